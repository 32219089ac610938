"""A `cache_control` mark never lands on a blank text block: a breakpoint on a message
with nothing but blank text (an empty reply, a tool's empty output, a blank system
prompt or stored system message, an empty latest user message) marks the last part
before it, which ends the same prefix, in `Context.with_cache_control()` (the OpenAI
form, for a gateway that hands the marks on to Anthropic) as in `to_anthropic`.

Fails on the code before: `with_cache_control()` put the mark on the blank message
itself, as a text part `""` or `"   "` with `cache_control`, which Anthropic refuses
("cache_control cannot be set for empty text blocks"); a message whose last part was
blank took the mark on that part. `to_anthropic` already left blank blocks out and
marked the block before (those checks pass before and after)."""

from __future__ import annotations

from typing import Any

import pytest
from provider_rules import anthropic_problems, openai_form_cache_marks

from tiermem import Memory
from tiermem.adapters.anthropic import to_anthropic

SYSTEM = "Be brief."
USER = {"role": "user", "content": "Weather in Tokyo?"}
LATEST = {"role": "user", "content": "And in Osaka?"}
REPLY = {"role": "assistant", "content": "Sunny, 21C."}
CALLS = [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]
CALL = {"role": "assistant", "content": None, "tool_calls": CALLS}
BUDGET = 2000
EPHEMERAL = {"type": "ephemeral"}


def _tool(content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "call_1", "content": content}


# each case: a log, the caller's system prompt, the index of the blank message a
# breakpoint falls on, and where the marks must be instead: (message index, part index),
# part None for a mark on the message itself (tool calls only, no content)
CASES: list[tuple[str, list[dict[str, Any]], str, int, list[tuple[int, int | None]]]] = [
    # an empty reply before the latest user message ends the stable part: the question before it
    ("empty reply", [USER, {"role": "assistant", "content": ""}, LATEST], SYSTEM, 2, [(0, 0), (1, 0)]),
    # a tool's empty output ends the stable part: the call before it (no content: on the message)
    ("empty tool output", [USER, CALL, _tool(""), LATEST], SYSTEM, 3, [(0, 0), (2, None), (4, 0)]),
    # a tool output of one blank text part
    ("blank tool output part", [USER, CALL, _tool([{"type": "text", "text": " "}]), LATEST], SYSTEM, 3,
     [(0, 0), (2, None), (4, 0)]),
    # an empty output after a call with empty text: back to the question
    ("empty output, empty call text", [USER, {**CALL, "content": ""}, _tool(""), LATEST], SYSTEM, 3,
     [(0, 0), (1, 0), (4, 0)]),
    # the caller's system prompt blank, nothing before it: no mark at all
    ("blank system prompt", [USER], "   ", 0, []),
    # a stored system message blank after the caller's: the caller's prompt
    ("blank stored system message", [{"role": "system", "content": " "}, USER], SYSTEM, 1, [(0, 0)]),
    # an empty latest user message ends the context: the reply before it (already the stable mark)
    ("empty latest message", [USER, REPLY, {"role": "user", "content": ""}], SYSTEM, 3, [(0, 0), (2, 0)]),
    # a reply whose last part is blank: the part before it in the same message
    ("blank last part", [USER, {"role": "assistant", "content": [{"type": "text", "text": "Sunny."},
                                                                  {"type": "text", "text": "\n"}]}, LATEST],
     SYSTEM, 2, [(0, 0), (2, 0)]),
]


def _marks(messages: list[dict[str, Any]]) -> list[tuple[int, int | None]]:
    out: list[tuple[int, int | None]] = []
    for i, m in enumerate(messages):
        if "cache_control" in m:
            out.append((i, None))
        content = m.get("content")
        out += [(i, k) for k, p in enumerate(content if isinstance(content, list) else ())
                if isinstance(p, dict) and p.get("cache_control") == EPHEMERAL]
    return out


def _unmarked(m: dict[str, Any], was: dict[str, Any]) -> dict[str, Any]:
    """`m` without its marks, a string made one marked part back to the string."""
    out = {k: v for k, v in m.items() if k != "cache_control"}
    content = out.get("content")
    if isinstance(content, list):
        parts = [{k: v for k, v in p.items() if k != "cache_control"} for p in content]
        out["content"] = parts[0]["text"] if isinstance(was.get("content"), str) else parts
    return out


@pytest.mark.parametrize(("rows", "system", "blank", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_no_cache_mark_on_a_blank_message(cold_memory: Memory, rows: list[dict[str, Any]], system: str,
                                          blank: int, want: list[tuple[int, int | None]]) -> None:
    cold_memory.append_many("c", rows)
    ctx = cold_memory.context("c", None, BUDGET, system=system)
    assert blank in {b.index for b in ctx.plan.breakpoints}, ctx.plan.breakpoints  # the shape under test
    marked = ctx.with_cache_control()
    assert openai_form_cache_marks(marked) == []
    assert _marks(marked) == want
    # only marks added: every message as it was
    assert [_unmarked(m, was) for m, was in zip(marked, ctx.messages, strict=True)] == ctx.messages
    req = to_anthropic(ctx, cold_memory)
    assert anthropic_problems(req.system, req.messages) == []
