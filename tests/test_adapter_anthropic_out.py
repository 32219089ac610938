"""`to_anthropic` on contexts the planner really builds: leading system messages and
tiermem's pinned and summary blocks as `system` blocks, the rest alternating user /
assistant from a user message, every `tool_use` answered first thing in the next user
message, Responses items converted (reasoning and hosted tools left out), at most four
`cache_control` marks where the plan's breakpoints say, the same bytes for the same context.

Fails on the code before: there was no Anthropic adapter (`ctx.with_cache_control()`
gives OpenAI messages, which the Messages API refuses: a system role, `tool` messages,
`tool_calls`)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import sdk_corpus as corpus
from convo_fixtures import depot_notes

from tiermem import Config, Memory
from tiermem.adapters.anthropic import CONTINUED_TEXT, AnthropicRequest, to_anthropic
from tiermem.planner.plan import MAX_BREAKPOINTS
from tiermem.planner.render import HEADERS
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ValidationError

SYSTEM = "Be brief."
ID = re.compile(r"[A-Za-z0-9_-]+")


def _mem(tmp_path: Path, embedder: FastEmbedder, **kw: Any) -> Memory:
    return Memory(Config(data_dir=tmp_path / "d", **kw), embedder=embedder, hot=False, background_indexing=False)


def check_shape(req: AnthropicRequest) -> None:
    """What the Messages API requires of `system` and `messages`."""
    assert all(b["type"] == "text" and b["text"].strip() for b in req.system)
    roles = [m["role"] for m in req.messages]
    assert roles and roles[0] == "user" and roles[-1] == "user", roles
    assert all(a != b for a, b in itertools.pairwise(roles)), roles  # alternating
    for i, m in enumerate(req.messages):
        assert m["content"], m
        uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in m["content"] if b["type"] == "tool_result"]
        for b in m["content"]:
            assert b["type"] != "text" or b["text"].strip(), m
            assert ID.fullmatch(b.get("id", "x")) and ID.fullmatch(b.get("tool_use_id", "x")), b
        if results:  # a result answers the call just before, results first in the message
            prev = req.messages[i - 1]["content"]
            assert set(results) <= {b["id"] for b in prev if b["type"] == "tool_use"}, (prev, results)
            assert [b["type"] for b in m["content"][:len(results)]] == ["tool_result"] * len(results)
        if uses:  # every call is answered in the next message
            nxt = req.messages[i + 1]["content"]
            assert set(uses) <= {b["tool_use_id"] for b in nxt if b["type"] == "tool_result"}, (uses, nxt)
    marks = [b for b in [*req.system, *(b for m in req.messages for b in m["content"])] if "cache_control" in b]
    assert len(marks) <= MAX_BREAKPOINTS
    assert all(b["cache_control"] == {"type": "ephemeral"} and b["type"] not in ("thinking", "redacted_thinking")
               for b in marks)


# (context_format, conversation): each family the planner returns
CASES = [
    ("as_stored", corpus.chat_conversation),  # every chat variant: parallel and custom calls, legacy function
    ("as_stored", corpus.responses_conversation),  # the Agents SDK's items: reasoning, hosted tools
    ("responses", corpus.chat_conversation),  # chat rows returned as Responses items
    ("as_stored", depot_notes),  # a retrieved block before the latest message
]


@pytest.mark.parametrize(("fmt", "conversation"), CASES, ids=[f"{f}-{c.__name__}" for f, c in CASES])
@pytest.mark.parametrize("budget", [400, 900, 4000])
def test_planned_contexts_alternate_and_pair(tmp_path: Path, embedder: FastEmbedder, fmt: str, conversation: Any,
                                             budget: int) -> None:
    with _mem(tmp_path, embedder, context_format=fmt) as mem:
        mem.append_many("c", conversation())
        for query in ("which flight and what weather?", "what did the tool say about Tokyo?"):
            ctx = mem.context("c", query, budget, system=SYSTEM)
            req = to_anthropic(ctx, mem)
            check_shape(req)
            assert req.system[0]["text"] == SYSTEM
            # the same context gives the same bytes
            assert json.dumps(to_anthropic(ctx, mem).kwargs()) == json.dumps(req.kwargs())


def test_responses_items_convert(tmp_path: Path, embedder: FastEmbedder) -> None:
    with _mem(tmp_path, embedder) as mem:
        mem.append_many("c", corpus.responses_conversation())
        req = to_anthropic(mem.context("c", "Book it.", 8000), mem)
    assert [b["text"] for b in req.system] == ["You are a travel agent."]
    blocks = [b for m in req.messages for b in m["content"]]
    uses = {b["id"]: (b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"}
    assert uses == {"call_1": ("search_flights", {"to": "HND"}), "call_2": ("get_weather", {"city": "Tokyo"}),
                    "call_3": ("sql", {"input": "SELECT 1"})}  # a custom call's text as {"input": ...}
    # the two parallel calls are one assistant message, their results one user message
    both = next(m for m in req.messages if {"call_1", "call_2"} <= {b.get("id") for b in m["content"]})
    assert both["role"] == "assistant"
    assert {"image", "document"} <= {b["type"] for b in blocks}  # the seat map and the itinerary PDF
    assert not any("Check fares first." in json.dumps(b) for b in blocks)  # reasoning is left out
    assert not any("mcpr_1" in json.dumps(b) for b in blocks)  # as are hosted-tool items


def test_a_system_block_after_the_opening_goes_into_the_user_turn(tmp_path: Path, embedder: FastEmbedder) -> None:
    with _mem(tmp_path, embedder) as mem:
        mem.append_many("c", depot_notes(40))
        ctx = mem.context("c", "which depot ships for client 3?", 900, system=SYSTEM)
        req = to_anthropic(ctx, mem)
    check_shape(req)
    assert [b["text"] for b in req.system] == [SYSTEM]
    assert any(it.slice == "retrieved" for it in ctx.plan.items)
    latest = req.messages[-1]["content"]  # the retrieved block, then the question
    assert latest[0]["text"].startswith(HEADERS["retrieved"]) and latest[-1]["text"] == "Which depot ships for client 3?"
    assert not any(HEADERS["retrieved"] in b["text"] for b in req.system)


def test_breakpoints_land_on_the_last_block_of_their_message(tmp_path: Path, embedder: FastEmbedder) -> None:
    with _mem(tmp_path, embedder) as mem:
        mem.append_many("c", depot_notes(40))
        ctx = mem.context("c", "which depot ships for client 3?", 900, system=SYSTEM)
        layers = {b.layer: b.index for b in ctx.plan.breakpoints}
        assert {"system", "stable"} <= set(layers), ctx.plan.breakpoints
        req = to_anthropic(ctx, mem)
        marked = [b["text"] for b in [*req.system, *(b for m in req.messages for b in m["content"])]
                  if "cache_control" in b]
        want = [str(ctx.messages[b.index]["content"]) for b in ctx.plan.breakpoints]
        assert marked == want  # each mark on its message's (only) block, in order
        # fewer allowed (the caller marks its tools): the end of the stable prefix first
        one = to_anthropic(ctx, mem, max_breakpoints=1)
        assert [b["text"] for m in one.messages for b in m["content"] if "cache_control" in b] == \
            [str(ctx.messages[layers["stable"]]["content"])]
        assert not any("cache_control" in b for b in one.system)
        for bad in (-1, MAX_BREAKPOINTS + 1, True):
            with pytest.raises(ValidationError, match="max_breakpoints"):
                to_anthropic(ctx, mem, max_breakpoints=bad)


def test_the_next_call_repeats_the_previous_request_as_its_prefix(tmp_path: Path, embedder: FastEmbedder) -> None:
    with _mem(tmp_path, embedder) as mem:
        mem.append_many("c", depot_notes(10)[:-1])
        mem.append("c", {"role": "user", "content": "Thanks, that is all for the notes."})
        first = to_anthropic(mem.context("c", None, 4000, system=SYSTEM), mem)
        mem.append_many("c", [{"role": "assistant", "content": "You're welcome."},
                              {"role": "user", "content": "One more: note 10 ships from depot 3."}])
        second = to_anthropic(mem.context("c", None, 4000, system=SYSTEM), mem)

    def unmarked(blocks: list[dict[str, Any]]) -> str:
        return json.dumps([{k: v for k, v in b.items() if k != "cache_control"} for b in blocks])

    assert unmarked(first.system) == unmarked(second.system)
    n = len(first.messages)
    assert [unmarked(m["content"]) for m in first.messages] == [unmarked(m["content"]) for m in second.messages[:n]]


def test_an_unanswered_call_is_left_out_and_an_assistant_opening_gets_a_user_turn(
        tmp_path: Path, embedder: FastEmbedder) -> None:
    with _mem(tmp_path, embedder) as mem:
        mem.append_many("c", [
            {"role": "assistant", "content": "Hi! How can I help?"},
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_lost", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
            {"role": "user", "content": "Never mind, the time?"}])
        req = to_anthropic(mem.context("c", None, 4000), mem)
    check_shape(req)
    assert req.messages[0] == {"role": "user", "content": [{"type": "text", "text": CONTINUED_TEXT}]}
    assert "call_lost" not in json.dumps(req.messages)
    assert [b["text"] for b in req.messages[-1]["content"]] == ["Weather?", "Never mind, the time?"]
