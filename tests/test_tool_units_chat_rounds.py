"""A chat assistant message holds all of its round's parallel calls, so a second one after
calls still waiting is a new model turn: the round before it was abandoned (the agent's
tool raised, it asked the model again). `planner.candidates.tool_units` joined them as
one round, as it must for Responses items (each parallel call an item of its own): the
context showed the abandoned `tool_calls` message right before the next one, which Chat
Completions refuses ("An assistant message with 'tool_calls' must be followed by tool
messages responding to each 'tool_call_id'"), so the agent's next model call failed;
and once a text message followed, the answered round was left out with the abandoned one.

On the code before, every case here fails; Responses items split across appends stay
one round (tests/test_tool_units.py, tests/test_tool_units_complete.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from provider_rules import chat_problems, responses_problems

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import to_chat

BUDGET = 1000
ASK = {"role": "user", "content": "Find me a flight to Lisbon."}


def _call(cid: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "search_flights", "arguments": '{"to": "LIS"}'}}]}


def _result(cid: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": f"TP1350 at 09:10 ({cid})"}


def _calls(ctx: Any) -> list[str]:
    return [c["id"] for m in to_chat(ctx.messages) for c in m.get("tool_calls") or ()]


# (log after the user's message, the call ids the context shows)
CASES: list[tuple[list[dict[str, Any]], list[str]]] = [
    # the agent's round `a` was abandoned, round `b` answered: the agent calls the model now
    ([_call("a"), _call("b"), _result("b")], ["b"]),
    # two abandoned rounds before an answered one
    ([_call("a"), _call("b"), _call("c"), _result("c")], ["c"]),
    # the answered round stays when the model's reply and a new user message follow
    ([_call("a"), _call("b"), _result("b"), {"role": "assistant", "content": "TP1350 it is."},
      {"role": "user", "content": "Book it."}], ["b"]),
]


@pytest.mark.parametrize(("log", "shown"), CASES)
@pytest.mark.parametrize("fmt", ["as_stored", "chat", "responses"])
def test_an_abandoned_chat_round_is_left_out(tmp_path: Path, embedder: FastEmbedder, log: list[dict[str, Any]],
                                             shown: list[str], fmt: str) -> None:
    with Memory(Config(data_dir=tmp_path / "d", context_format=fmt), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        mem.append_many("c", [ASK, *log])
        ctx = mem.context("c", "Find me a flight to Lisbon.", BUDGET)
    assert _calls(ctx) == shown
    assert chat_problems(to_chat(ctx.messages)) == [], ctx.messages
    if fmt == "responses":
        assert responses_problems(ctx.messages) == [], ctx.messages


def test_an_epoch_that_showed_the_pending_call_ends_when_a_new_round_follows_it(cold_memory: Memory) -> None:
    # the first context ends with the agent's pending call; the next round follows it
    # without its result: extending would show the abandoned call mid-context
    cold_memory.append_many("c", [ASK, _call("a")])
    first = cold_memory.context("c", "Find me a flight to Lisbon.", BUDGET)
    assert _calls(first) == ["a"]
    cold_memory.append_many("c", [_call("b"), _result("b")])
    second = cold_memory.context("c", "Find me a flight to Lisbon.", BUDGET)
    assert second.plan.cache.new_epoch, second.plan.cache.reason
    assert _calls(second) == ["b"]
    assert chat_problems(second.messages) == [], second.messages
