"""`system_messages="before_latest"` puts the memory message (pins, summary, retrieved
turns) before the latest user message; with none (an agent's own log, its one user
message retracted) it went at the very end, after the agent's pending tool round:
`[system, assistant(call_0, call_1), tool call_0, system]` left call_1 unanswered before
a system message, which Chat Completions refuses ("An assistant message with
'tool_calls' must be followed by tool messages responding to each 'tool_call_id'") and
Responses too. It now goes just before that round, never inside one
(planner.render.Renderer.render_memory_last); the provider-rules property test
(tests/test_context_provider_rules.py) found it.

On the code before, the pending-round cases fail (6 of 12: two logs in each format); a
complete round at the end (memory after it) and a latest user message (memory before
it) pass before and after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from provider_rules import chat_problems, responses_problems

from tiermem import Config, Memory
from tiermem.planner.render import HEADERS
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import message_text, to_chat, to_responses

BUDGET = 110  # the pinned reply goes into the memory message, the pending round into the tail
ROOMY = 170  # a complete round fits the tail too (the pinned reply still does not)
SYSTEM = "Be brief."
QUERY = "what did the tool say?"
NOTED = {"role": "assistant", "content": "Noted: flight to Lisbon on Tuesday"}
CALLS = {"role": "assistant", "content": None, "tool_calls": [
    {"id": f"call_{i}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}} for i in (0, 1)]}


def _result(i: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{i}", "content": ""}


QUIET = [{"role": "user", "content": "flight to Lisbon on Tuesday"}, {"type": "tiermem.retract", "position": 0}]
# between the pinned reply and a complete round: a tail anchored anew grows into free room
# (up to two shares under before_latest), and this turn is more than that leaves, so the
# tail stops before it and the pinned reply stays in the memory message
ASIDE = {"role": "assistant", "content": "I will look that up in a couple of places and compare what they say "
                                         "about the schedule, the terminal and the baggage rules before I answer."}

# (log, budget, the kinds of the context's messages after the caller's system prompt:
# memory, call (a Responses round's call items count once), result, user)
CASES: list[tuple[list[dict[str, Any]], int, list[str]]] = [
    # the property test's minimal log: call_1 still waits, memory before the round
    ([*QUIET, NOTED, CALLS, _result(0)], BUDGET, ["memory", "call", "result"]),
    # no result yet
    ([*QUIET, NOTED, CALLS], BUDGET, ["memory", "call"]),
    # the round complete: nothing waits, the memory goes at the end
    ([*QUIET, NOTED, ASIDE, CALLS, _result(0), _result(1)], ROOMY, ["call", "result", "result", "memory"]),
    # a latest user message: the memory before it, as always
    ([*QUIET, NOTED, {"role": "user", "content": "which flight?"}, CALLS, _result(0)],
     BUDGET, ["memory", "user", "call", "result"]),
]


def _kind(m: dict[str, Any]) -> str:
    if m.get("role") == "system":
        return "memory" if message_text(m).startswith(tuple(HEADERS.values())) else "system"
    if m.get("tool_calls") or m.get("type") == "function_call":
        return "call"
    if m.get("role") == "tool" or m.get("type") == "function_call_output":
        return "result"
    return str(m.get("role"))


@pytest.mark.parametrize(("log", "budget", "kinds"), CASES)
@pytest.mark.parametrize("fmt", ["as_stored", "chat", "responses"])
def test_the_memory_message_never_splits_a_tool_round(tmp_path: Path, embedder: FastEmbedder,
                                                      log: list[dict[str, Any]], budget: int, kinds: list[str],
                                                      fmt: str) -> None:
    cfg = Config(data_dir=tmp_path / "d", context_format=fmt, system_messages="before_latest")  # type: ignore[arg-type]
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        for m in log:
            mem.append("c", m)
        ctx = mem.context("c", QUERY, budget, system=SYSTEM)
    assert ctx.tokens <= budget
    assert chat_problems(to_chat(ctx.messages), pending_ok=True) == [], ctx.messages
    assert responses_problems(to_responses(ctx.messages), pending_ok=True) == [], ctx.messages
    got = [_kind(m) for m in ctx.messages[1:]]
    assert [k for i, k in enumerate(got) if not (k == "call" and got[i - 1:i] == ["call"])] == kinds, ctx.messages
