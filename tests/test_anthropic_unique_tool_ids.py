"""Every `tool_use` id `to_anthropic` sends is unique in the request, each `tool_result`
carrying its own call's (tiermem.adapters.anthropic, "Ids"), and a message whose calls
share an id is refused at append, naming the second (tiers.formats.repeated_call_id).

Fails on the code before: an OpenAI-compatible server that numbers its calls per reply
(`call_0` every round) left a log whose Anthropic form repeated `call_0`, and ids that
differ only in characters the API does not take (`call.1`, `call:1`) were both sent as
`call_1`, with two results for it: the API answers 400 ("tool_use ids must be unique").
`[c1, c1]` in one assistant message was stored.

The Responses form of a log with ids numbered per reply sends each `call_id` once too
(the same renaming, tiers.formats.SentCallIds; its cases: tests/test_responses_unique_call_ids)."""

from __future__ import annotations

from typing import Any

import pytest
from call_history import BUDGET, LONG_ID, ask, calls, item_call, item_output, per_reply_rounds, result
from provider_rules import anthropic_problems, responses_call_ids_once

from tiermem import Memory
from tiermem.adapters.anthropic import from_anthropic, to_anthropic
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.formats import CALL_ID_MAX_CHARS, to_responses

# each case: a log, and the (tool_use id sent, its input, its result's text) of every call
# in request order
CASES: list[tuple[str, list[dict[str, Any]], list[tuple[str, dict[str, Any], str]]]] = [
    # a server that numbers calls per reply: the second round's call_0 gets a suffix
    ("call_0 in two rounds", [*per_reply_rounds(2), ask("thanks")],
     [("call_0", {"n": 0}, "sunny 0"), ("call_0_2", {"n": 0}, "sunny 1")]),
    # and the third the next free one
    ("call_0 in three rounds", [*per_reply_rounds(3), ask("thanks")],
     [("call_0", {"n": 0}, "sunny 0"), ("call_0_2", {"n": 0}, "sunny 1"), ("call_0_3", {"n": 0}, "sunny 2")]),
    # two ids of one message that are one id in the API's characters, results in the
    # other order: each result goes with its own call
    ("call.1 and call:1", [ask("go"), calls("call.1", "call:1"), result("call:1", "b"), result("call.1", "a"),
                           ask("next?")],
     [("call_1", {"n": 0}, "a"), ("call_1_2", {"n": 1}, "b")]),
    # an id stored as a later round's is not the suffix an earlier repeat took
    ("a stored id equal to a suffix", [*per_reply_rounds(2), ask("more"), calls("call_0_2"),
                                       result("call_0_2", "third"), ask("thanks")],
     [("call_0", {"n": 0}, "sunny 0"), ("call_0_2", {"n": 0}, "sunny 1"), ("call_0_2_2", {"n": 0}, "third")]),
    # the longest id append takes, used twice: the suffix keeps it within the limit
    ("the longest id twice", [ask("a"), calls(LONG_ID), result(LONG_ID, "one"), ask("b"), calls(LONG_ID),
                              result(LONG_ID, "two"), ask("thanks")],
     [(LONG_ID, {"n": 0}, "one"), (LONG_ID[:CALL_ID_MAX_CHARS - 2] + "_2", {"n": 0}, "two")]),
    # Responses items (the Agents SDK's) with a call_id per reply, in two rounds
    ("Responses items, call_0 in two rounds",
     [ask("a"), item_call("call_0", 0), item_output("call_0", "one"), ask("b"), item_call("call_0", 1),
      item_output("call_0", "two"), ask("thanks")],
     [("call_0", {"n": 0}, "one"), ("call_0_2", {"n": 1}, "two")]),
]


def sent_calls(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], str]]:
    """(id, input, result text) of each tool_use, its result found in the next message."""
    out = []
    for i, m in enumerate(messages):
        for b in m["content"]:
            if b["type"] == "tool_use":
                answers = [r["content"] for r in messages[i + 1]["content"]
                           if r["type"] == "tool_result" and r["tool_use_id"] == b["id"]]
                out.append((b["id"], b["input"], answers[0] if len(answers) == 1 else f"{len(answers)} results"))
    return out


@pytest.mark.parametrize(("rows", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_tool_use_id_sent_is_unique(cold_memory: Memory, rows: list[dict[str, Any]],
                                          expected: list[tuple[str, dict[str, Any], str]]) -> None:
    cold_memory.append_many("c", rows)
    ctx = cold_memory.context("c", "thanks", BUDGET)
    req = to_anthropic(ctx, cold_memory)
    assert anthropic_problems(req.system, req.messages) == []
    assert sent_calls(req.messages) == expected
    assert all(len(cid) <= CALL_ID_MAX_CHARS for cid, _input, _text in sent_calls(req.messages))


def test_appending_a_round_leaves_the_ids_before_it(cold_memory: Memory) -> None:
    """An id depends only on what comes before it: the next request's prefix (and the
    prompt cache's) is the same."""
    cold_memory.append_many("c", per_reply_rounds(2))
    before = to_anthropic(cold_memory.context("c", None, BUDGET), cold_memory).messages
    cold_memory.append_many("c", [ask("more"), calls("call_0_2", "call_0"), result("call_0", "x"),
                                  result("call_0_2", "y")])
    after = to_anthropic(cold_memory.context("c", None, BUDGET), cold_memory).messages
    assert [b for m in after[:len(before)] for b in m["content"] if b["type"] == "tool_use"] == \
        [b for m in before for b in m["content"] if b["type"] == "tool_use"]
    assert [cid for cid, _input, _text in sent_calls(after)] == ["call_0", "call_0_2", "call_0_2_2", "call_0_3"]
    assert anthropic_problems([], after) == []


# each case: an assistant message whose calls share an id, and the field named
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    # the review's case: two calls of one id
    ("c1 twice", calls("c1", "c1"), "tool_calls[1].id"),
    # the repeat named where it is, after another id
    ("c1, c2, c1", calls("c1", "c2", "c1"), "tool_calls[2].id"),
    # with text beside the calls, as a reply has it
    ("with text", {**calls("a", "b", "b"), "content": "Let me check."}, "tool_calls[2].id"),
]


@pytest.mark.parametrize(("message", "field"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_calls_sharing_an_id_are_refused_at_append(cold_memory: Memory, message: dict[str, Any],
                                                   field: str) -> None:
    cold_memory.append("c", ask("go"))
    with pytest.raises(ValidationError) as err:
        cold_memory.append_many("c", [message, result("c1", "a")])
    assert field in str(err.value) and "an id of its own" in str(err.value)
    assert len(cold_memory.history("c")) == 1  # nothing of the batch written


def test_from_anthropic_names_the_repeated_tool_use() -> None:
    message = {"role": "assistant", "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"n": 1}}]}
    with pytest.raises(ValidationError) as err:
        from_anthropic(message)
    assert str(err.value).startswith("content[2].id:") and "content[1]" in str(err.value)


def test_responses_form_sends_each_call_id_once(cold_memory: Memory) -> None:
    cold_memory.append_many("c", [*per_reply_rounds(2), ask("thanks")])
    ctx = cold_memory.context("c", "thanks", BUDGET)
    assert responses_call_ids_once(to_responses(ctx.messages)) == []
