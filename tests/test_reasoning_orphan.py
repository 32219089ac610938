"""A reasoning item travels with the model's item after it (planner.candidates.tool_units,
README "One unit"): when that item is hidden (retracted, cleared, left out) or not in the
log, the reasoning is left out with it (`tool_units` says why: ORPHAN_REASONING).
Before, it stayed in the tail alone, right before a user message or last, which the
Responses API refuses ("Item of type 'reasoning' was provided without its required
following item"); the provider-rules property test (tests/test_context_provider_rules.py)
found it.

On the code before, the contexts with a reasoning item left before a user message or
last fail (18 of 54: three logs, as stored and as Responses items, in each
`system_messages` mode; the chat form has no reasoning items), and so do 4 of the 6
`tool_units` cases; a reasoning item before the reply it produced or with its call and
result, one cleared, and one whose call is left out unanswered pass before and after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from provider_rules import responses_problems

from tiermem import Config, Memory
from tiermem.planner import candidates
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import to_responses
from tiermem.tiers.models import StoredMessage, canonical_role

BUDGET = 2000
SYSTEM = "Be brief."
QUERY = "what did the tool say?"
ASK = {"role": "user", "content": "flight to Lisbon on Tuesday"}
NEXT = {"role": "user", "content": "hotel near the station please"}
RS = {"type": "reasoning", "id": "rs_0", "summary": []}
FC = {"type": "function_call", "id": "fc_0", "call_id": "call_0", "name": "lookup", "arguments": "{}"}
REPLY = {"role": "assistant", "content": "Noted: hotel near the station"}


def _retract(position: int) -> dict[str, Any]:
    return {"type": "tiermem.retract", "position": position}


# (log, whether the reasoning item rs_0 is shown)
CASES: list[tuple[list[dict[str, Any]], bool]] = [
    # the property test's minimal log: the call retracted, the user speaks next
    ([ASK, RS, FC, _retract(2), NEXT], False),
    # the call retracted at the end of the log: the reasoning would be last
    ([ASK, RS, FC, _retract(2)], False),
    # the user message after it is not the latest one: [reasoning, user] is no unit either
    ([ASK, RS, FC, _retract(2), NEXT, REPLY, {"role": "user", "content": "and the train?"}], False),
    # cleared with everything before it
    ([ASK, RS, FC, {"type": "tiermem.clear"}, NEXT], False),
    # its call left out (never answered, a user message follows): it goes with the call
    ([ASK, RS, FC, NEXT], False),
    # the call retracted, a reply the model gave after it: the reasoning precedes a model item
    ([ASK, RS, FC, _retract(2), REPLY, NEXT], True),
]


@pytest.mark.parametrize(("log", "kept"), CASES)
@pytest.mark.parametrize("fmt", ["as_stored", "chat", "responses"])
@pytest.mark.parametrize("system_messages", ["as_is", "merge", "before_latest"])
def test_a_reasoning_item_goes_with_the_item_after_it(tmp_path: Path, embedder: FastEmbedder,
                                                      log: list[dict[str, Any]], kept: bool, fmt: str,
                                                      system_messages: str) -> None:
    cfg = Config(data_dir=tmp_path / "d", context_format=fmt, system_messages=system_messages)  # type: ignore[arg-type]
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        for m in log:
            mem.append("c", m)
        ctx = mem.context("c", QUERY, BUDGET, system=SYSTEM)
    assert responses_problems(to_responses(ctx.messages), pending_ok=True) == [], ctx.messages
    if fmt != "chat":  # the chat form has no reasoning items
        assert any(m.get("type") == "reasoning" for m in ctx.messages) == kept, ctx.messages


def _m(pos: int, body: dict[str, Any]) -> StoredMessage:
    return StoredMessage("c", pos, canonical_role(body), body, None, None, 0.0)


U = {"role": "user", "content": "q"}
A = {"role": "assistant", "content": "a"}
SYS = {"role": "system", "content": "s"}

# (visible bodies in log order, None: unreadable; units kept oldest first; positions left out)
UNITS: list[tuple[list[dict[str, Any] | None], list[list[int]], list[int]]] = [
    # before a user message: its own item is hidden
    ([U, RS, U], [[0], [2]], [1]),
    # before a system message
    ([U, RS, SYS], [[0], [2]], [1]),
    # last: nothing it produced is shown
    ([U, RS], [[0]], [1]),
    # before an unreadable message: never joined across it
    ([U, RS, None, A], [[0], [3]], [1]),
    # before the model's reply: one unit
    ([U, RS, A], [[0], [1, 2]], []),
    # before its call and result: one unit
    ([U, RS, FC, {"type": "function_call_output", "call_id": "call_0", "output": "r"}], [[0], [1, 2, 3]], []),
]


@pytest.mark.parametrize(("bodies", "units", "left_out"), UNITS)
def test_tool_units_leave_an_orphaned_reasoning_item_out(bodies: list[dict[str, Any] | None], units: list[list[int]],
                                                          left_out: list[int]) -> None:
    msgs = [_m(i, b) if b is not None else None for i, b in enumerate(bodies)]
    got = candidates.tool_units(msgs, [False] * len(msgs))
    assert [[m.position for m in g] for g in reversed(got.groups)] == units
    assert [m.position for g, why in got.dropped if why == candidates.ORPHAN_REASONING for m in g] == left_out
