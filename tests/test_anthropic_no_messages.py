"""A context with nothing but system messages (no user message left to send) is still a
request the Messages API takes: `to_anthropic` sends one user message holding
`CONTINUED_TEXT`, as for a context that opens with an assistant turn, and the system
blocks and their marks as planned.

Fails on the code before: `messages` was `[]`, which the API refuses ("at least one
message is required"); the property test (test_context_provider_rules) skipped its
Anthropic checks for such a context."""

from __future__ import annotations

from typing import Any

import pytest
from provider_rules import anthropic_problems

from tiermem import Memory
from tiermem.adapters.anthropic import CONTINUED_TEXT, to_anthropic

SYSTEM = "Be brief."
USER = {"role": "user", "content": "Weather in Tokyo?"}
RETRACT_FIRST = {"type": "tiermem.retract", "position": 0}
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
LONG_WORDS = 400  # ~400 tokens: past SMALL_BUDGET once the system prompt is in
SMALL_BUDGET = 100  # tokens: room for the system prompt, none for the long row
BUDGET = 2000

# each case: a log, the budget and the caller's system prompt, where the context holds no
# message but system ones
CASES: list[tuple[str, list[dict[str, Any]], int, str | None]] = [
    # the one user message retracted
    ("user retracted", [USER, RETRACT_FIRST], BUDGET, SYSTEM),
    # the same without a system prompt: the context is empty, so is `system`
    ("user retracted, no system prompt", [USER, RETRACT_FIRST], BUDGET, None),
    # a log of one assistant message, too long for the budget
    ("assistant only, not fitting", [{"role": "assistant", "content": "word " * LONG_WORDS}], SMALL_BUDGET, SYSTEM),
    # a retracted question and a reply that does not fit
    ("retracted, reply not fitting", [USER, RETRACT_FIRST, {"role": "assistant", "content": "word " * LONG_WORDS}],
     SMALL_BUDGET, SYSTEM),
    # a tool round opening the log, its output too long to fit
    ("tool round only, not fitting", [CALL, {"role": "tool", "tool_call_id": "call_1", "content": "x " * LONG_WORDS}],
     SMALL_BUDGET, SYSTEM),
]


@pytest.mark.parametrize(("rows", "budget", "system"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_context_of_system_messages_only_is_a_valid_request(cold_memory: Memory, rows: list[dict[str, Any]],
                                                              budget: int, system: str | None) -> None:
    cold_memory.append_many("c", rows)
    ctx = cold_memory.context("c", None, budget, system=system)
    assert all(m.get("role") == "system" for m in ctx.messages), ctx.messages  # the shape under test
    req = to_anthropic(ctx, cold_memory)
    assert anthropic_problems(req.system, req.messages) == []
    assert req.messages == [{"role": "user", "content": [{"type": "text", "text": CONTINUED_TEXT}]}]
    # the system prompt and its mark stay as planned; none without one
    assert req.system == ([{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
                          if system else [])
    assert req.kwargs()["messages"] == req.messages
