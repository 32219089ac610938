"""`to_anthropic` sends back only the current tool loop's thinking blocks by default.

A thinking block is valid only while everything before it is what Claude saw when it
wrote it; models with preserved thinking check that (a 400, or the block dropped:
https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks),
and Anthropic's advice for an integration that trims or summarizes earlier turns, as a
memory does by design, is to remove the thinking of the turns it keeps. The current
loop's thinking must go back (an assistant turn with thinking continuing a tool loop).
Fails on the code before: every restored thinking block went back, the first loop's too."""

from __future__ import annotations

from typing import Any

import pytest

from tiermem import Memory
from tiermem.adapters.anthropic import from_anthropic, to_anthropic
from tiermem.tiers.errors import ValidationError

SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDYXJlZnVsbHkgdGhpbmsiMHNpZ25lZA=="


def _thinking(n: int) -> dict[str, Any]:
    return {"type": "thinking", "thinking": f"loop {n}: call the tool.", "signature": SIGNATURE}


def _loop(n: int, *, answered: bool = True, text_after: bool = False) -> list[dict[str, Any]]:
    """A user question, Claude's thinking and tool call, and (when answered) the result."""
    out: list[dict[str, Any]] = [
        {"role": "user", "content": f"What's the weather in city {n}?"},
        {"role": "assistant", "content": [_thinking(n), {"type": "tool_use", "id": f"toolu_{n}", "name": "weather",
                                                         "input": {"city": str(n)}}]}]
    if answered:
        result: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "sunny"}]
        if text_after:
            result.append({"type": "text", "text": "Go on."})
        out.append({"role": "user", "content": result})
    return out


def _thinking_of(messages: list[dict[str, Any]]) -> list[str]:
    return [b["thinking"] for m in messages if m["role"] == "assistant" for b in m["content"]
            if b["type"] == "thinking"]


# (the conversation, the thinking that goes back by default)
CASES = [
    # two loops: the second is current, the first's thinking stays behind
    ([*_loop(1), {"role": "assistant", "content": "Sunny in 1."}, *_loop(2)], ["loop 2: call the tool."]),
    # text after the results still continues the loop (a user turn with results is no new question)
    (_loop(1, text_after=True), ["loop 1: call the tool."]),
    # a new question after the first loop: no loop is under way, no thinking goes back
    ([*_loop(1), {"role": "assistant", "content": "Sunny in 1."}, *_loop(2, answered=False)[:1]], []),
]


@pytest.mark.parametrize(("conversation", "current"), CASES)
def test_only_the_current_loops_thinking_goes_back(cold_memory: Memory, conversation: list[dict[str, Any]],
                                                  current: list[str]) -> None:
    for m in conversation:
        cold_memory.append_many("c", from_anthropic(m))
    ctx = cold_memory.context("c", "weather?", 8000)
    assert _thinking_of(to_anthropic(ctx, cold_memory).messages) == current
    every = [f"loop {n}: call the tool." for n in (1, 2) if any(
        isinstance(m["content"], list) and _thinking(n) in m["content"] for m in conversation)]
    assert _thinking_of(to_anthropic(ctx, cold_memory, thinking="all").messages) == every


def test_an_unknown_scope_is_refused(cold_memory: Memory) -> None:
    cold_memory.append_many("c", from_anthropic({"role": "user", "content": "hi"}))
    with pytest.raises(ValidationError, match="thinking"):
        to_anthropic(cold_memory.context("c", "hi", 1000), cold_memory, thinking="some")
