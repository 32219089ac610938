"""Every call id the Responses and chat forms send is sent once, each result naming its
own call's (tiers.formats, "Ids sent": `SentCallIds`, the renaming `to_anthropic` uses
too), and Responses items of one round that share a `call_id` keep both pairs.

Fails on the code before: a log from a server that numbers its calls per reply
(`call_0` every round) went out in the Responses form (`context_format="responses"`,
`to_responses` over an `as_stored` context, the Agents SDK session's `context_items`)
with `call_0` in two `function_call`s and two `function_call_output`s, which a strict
Responses endpoint refuses ("Duplicate function_call_output for call_id ... Each
function_call must have exactly one matching function_call_output"); in the chat form
with one `tool_call_id` twice, which a strict Chat Completions server refuses
("Duplicate value for 'tool_call_id'"). Two `function_call` items of one round sharing
a `call_id` lost their second output (the planner took it for an orphan) and so the
second call went out unanswered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from call_history import BUDGET, LONG_ID, ask, calls, item_call, item_output, per_reply_rounds, result
from provider_rules import anthropic_problems, chat_problems, responses_problems

from tiermem import Config, Memory
from tiermem.adapters.anthropic import to_anthropic
from tiermem.adapters.openai_agents import TiermemSession
from tiermem.tiers.embed import Embedder
from tiermem.tiers.formats import CALL_ID_MAX_CHARS, to_responses

# the Agents SDK's items: two calls of one call_id in one round, then their outputs
ONE_ROUND = [ask("go"), item_call("c1", 1), item_call("c1", 2), item_output("c1", "a"), item_output("c1", "b")]

# each case: a log, and the (call_id sent, its arguments, its output's text) of every call
# in request order, in the Responses form
CASES: list[tuple[str, list[dict[str, Any]], list[tuple[str, str, str]]]] = [
    # a server that numbers calls per reply: the second round's call_0 gets a suffix
    ("call_0 in two rounds", [*per_reply_rounds(2), ask("thanks")],
     [("call_0", '{"n": 0}', "sunny 0"), ("call_0_2", '{"n": 0}', "sunny 1")]),
    # and the third the next free one
    ("call_0 in three rounds", [*per_reply_rounds(3), ask("thanks")],
     [("call_0", '{"n": 0}', "sunny 0"), ("call_0_2", '{"n": 0}', "sunny 1"), ("call_0_3", '{"n": 0}', "sunny 2")]),
    # Responses items (the Agents SDK's) with a call_id per reply, in two rounds
    ("Responses items, call_0 in two rounds",
     [ask("a"), item_call("call_0", 0), item_output("call_0", "one"), ask("b"), item_call("call_0", 1),
      item_output("call_0", "two"), ask("thanks")],
     [("call_0", '{"n": 0}', "one"), ("call_0_2", '{"n": 1}', "two")]),
    # two items of one round sharing a call_id: the second pair renamed, both outputs kept
    ("one round, two calls of c1", [*ONE_ROUND, ask("thanks")],
     [("c1", '{"n": 1}', "a"), ("c1_2", '{"n": 2}', "b")]),
    # an id stored as a later round's is not the suffix an earlier repeat took
    ("a stored id equal to a suffix", [*per_reply_rounds(2), ask("more"), calls("call_0_2"),
                                       result("call_0_2", "third"), ask("thanks")],
     [("call_0", '{"n": 0}', "sunny 0"), ("call_0_2", '{"n": 0}', "sunny 1"), ("call_0_2_2", '{"n": 0}', "third")]),
    # the longest id append takes, used twice: the suffix keeps it within the limit
    ("the longest id twice", [ask("a"), calls(LONG_ID), result(LONG_ID, "one"), ask("b"), calls(LONG_ID),
                              result(LONG_ID, "two"), ask("thanks")],
     [(LONG_ID, '{"n": 0}', "one"), (LONG_ID[:CALL_ID_MAX_CHARS - 2] + "_2", '{"n": 0}', "two")]),
    # the legacy function_call, answered by name: its Responses call_id is the name's
    ("a legacy function called twice",
     [ask("a"), {"role": "assistant", "content": None, "function_call": {"name": "lookup", "arguments": "{}"}},
      {"role": "function", "name": "lookup", "content": "one"}, ask("b"),
      {"role": "assistant", "content": None, "function_call": {"name": "lookup", "arguments": "{}"}},
      {"role": "function", "name": "lookup", "content": "two"}, ask("thanks")],
     [("function:lookup", "{}", "one"), ("function:lookup_2", "{}", "two")]),
    # ids of their own: sent as stored (passes before and after)
    ("fresh ids", [ask("a"), calls("call_a", "call_b"), result("call_b", "b"), result("call_a", "a"), ask("thanks")],
     [("call_a", '{"n": 0}', "a"), ("call_b", '{"n": 1}', "b")]),
]


def sent_calls(items: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(call_id, arguments, output text) of each function_call, its output found by call_id."""
    out = []
    for item in items:
        if item.get("type") == "function_call":
            answers = [o["output"] for o in items
                       if o.get("type") == "function_call_output" and o["call_id"] == item["call_id"]]
            out.append((item["call_id"], item["arguments"], answers[0] if len(answers) == 1 else f"{len(answers)} outputs"))
    return out


def memory(path: Path, embedder: Embedder, fmt: str) -> Memory:
    return Memory(Config(data_dir=path, context_format=fmt), embedder=embedder,  # type: ignore[arg-type]
                  hot=False, background_indexing=False)


def context_of(path: Path, embedder: Embedder, fmt: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The context for "thanks" of a fresh store holding `rows`, in the form `fmt`."""
    with memory(path, embedder, fmt) as mem:
        mem.append_many("c", rows)
        return mem.context("c", "thanks", BUDGET).messages


@pytest.mark.parametrize(("rows", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_responses_form_sends_each_call_id_once(tmp_path: Path, embedder: Embedder, rows: list[dict[str, Any]],
                                                expected: list[tuple[str, str, str]]) -> None:
    items = context_of(tmp_path / "responses", embedder, "responses", rows)
    assert sent_calls(items) == expected
    assert responses_problems(items) == []
    assert all(len(cid) <= CALL_ID_MAX_CHARS for cid, _args, _text in expected)
    # an as_stored context in the Responses form (the Agents SDK session's context_items)
    with memory(tmp_path / "as_stored", embedder, "as_stored") as mem:
        mem.append_many("c", rows)
        assert to_responses(mem.context("c", "thanks", BUDGET).messages) == items
        assert TiermemSession(mem, "c").context_items("thanks", BUDGET) == items


# each case: a log, and the (id sent, arguments, result text) of every call in the chat form
CHAT_CASES: list[tuple[str, list[dict[str, Any]], list[tuple[str, str, str]]]] = [
    # a server that numbers calls per reply: DeepSeek's chat endpoint refuses call_0 twice
    ("call_0 in two rounds", [*per_reply_rounds(2), ask("thanks")],
     [("call_0", '{"n": 0}', "sunny 0"), ("call_0_2", '{"n": 0}', "sunny 1")]),
    # Responses items of one round sharing a call_id: one assistant message, its ids its own
    ("one round, two calls of c1", [*ONE_ROUND, ask("thanks")],
     [("c1", '{"n": 1}', "a"), ("c1_2", '{"n": 2}', "b")]),
]


def sent_chat_calls(msgs: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    out = []
    for m in msgs:
        for c in m.get("tool_calls") or ():
            answers = [r["content"] for r in msgs if r.get("role") == "tool" and r["tool_call_id"] == c["id"]]
            out.append((c["id"], c["function"]["arguments"], answers[0] if len(answers) == 1 else f"{len(answers)}"))
    return out


@pytest.mark.parametrize(("rows", "expected"), [c[1:] for c in CHAT_CASES], ids=[c[0] for c in CHAT_CASES])
def test_chat_form_sends_each_tool_call_id_once(tmp_path: Path, embedder: Embedder, rows: list[dict[str, Any]],
                                                expected: list[tuple[str, str, str]]) -> None:
    msgs = context_of(tmp_path / "chat", embedder, "chat", rows)
    assert sent_chat_calls(msgs) == expected
    assert chat_problems(msgs) == []


def test_one_round_sharing_a_call_id_keeps_both_pairs(tmp_path: Path, embedder: Embedder) -> None:
    """As stored both outputs are shown (each call answered), and the Anthropic form
    sends both calls with their own results."""
    with memory(tmp_path / "as_stored", embedder, "as_stored") as mem:
        mem.append_many("c", [*ONE_ROUND, ask("thanks")])
        ctx = mem.context("c", "thanks", BUDGET)
        assert ctx.messages[:len(ONE_ROUND)] == ONE_ROUND
        req = to_anthropic(ctx, mem)
    assert anthropic_problems(req.system, req.messages) == []
    uses = [(b["id"], b["input"]) for m in req.messages for b in m["content"] if b["type"] == "tool_use"]
    results = [(b["tool_use_id"], b["content"]) for m in req.messages for b in m["content"]
               if b["type"] == "tool_result"]
    assert uses == [("c1", {"n": 1}), ("c1_2", {"n": 2})]
    assert results == [("c1", "a"), ("c1_2", "b")]


def test_a_pending_round_sharing_a_call_id_is_answered_in_the_next_context(tmp_path: Path,
                                                                           embedder: Embedder) -> None:
    """The agent's pending round (two calls of c1, shown at the end) gets both outputs
    in the next call's context (an epoch extending the first: `open_calls` counts calls)."""
    with memory(tmp_path / "as_stored", embedder, "as_stored") as mem:
        mem.append_many("c", ONE_ROUND[:3])
        first = mem.context("c", None, BUDGET).messages
        mem.append_many("c", ONE_ROUND[3:])
        items = to_responses(mem.context("c", None, BUDGET).messages)
    assert first == ONE_ROUND[:3]
    assert sent_calls(items) == [("c1", '{"n": 1}', "a"), ("c1_2", '{"n": 2}', "b")]
    assert responses_problems(items) == []


def test_appending_a_round_leaves_the_ids_before_it(tmp_path: Path, embedder: Embedder) -> None:
    """An id depends only on what comes before it: the next request's prefix (and the
    prompt cache's) is the same."""
    with memory(tmp_path / "responses", embedder, "responses") as mem:
        mem.append_many("c", per_reply_rounds(2))
        before = mem.context("c", None, BUDGET).messages
        mem.append_many("c", [ask("more"), calls("call_0_2", "call_0"), result("call_0", "x"),
                              result("call_0_2", "y")])
        after = mem.context("c", None, BUDGET).messages
    assert after[:len(before)] == before
    assert [cid for cid, _args, _text in sent_calls(after)] == ["call_0", "call_0_2", "call_0_2_2", "call_0_3"]
    assert responses_problems(after) == []
