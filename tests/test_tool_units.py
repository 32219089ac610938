"""A call and its results are one unit (planner.candidates.tool_units): chat tool_calls with tool
messages, Responses function_call items with their outputs by call_id (parallel calls
included), a reasoning item with what follows it; and the hot tier's payloads render the
same contexts as the cold log."""

from __future__ import annotations

from typing import Any

import pytest
import sdk_corpus as corpus

from tiermem import Memory
from tiermem.planner.candidates import tool_units
from tiermem.tiers.models import StoredMessage, canonical_role


def _units(msgs: list[Any], skip: list[bool]) -> list[list[Any]]:
    """The units `tool_units` keeps, newest first."""
    return tool_units(msgs, skip).groups


def _m(pos: int, body: dict[str, Any]) -> StoredMessage:
    return StoredMessage("c", pos, canonical_role(body), body, None, None, 0.0)


U = {"role": "user", "content": "q"}
A = {"role": "assistant", "content": "a"}


def _chat_call(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids]}


def _tool(i: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": i, "content": "r"}


def _fc(i: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": i, "name": "f", "arguments": "{}"}


def _out(i: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": i, "output": "r"}


RS = {"type": "reasoning", "id": "rs_0", "summary": []}

# (bodies in log order, expected units as position lists, oldest unit first)
CASES: list[tuple[list[dict[str, Any]], list[list[int]]]] = [
    # chat: parallel calls in one message, both results
    ([U, _chat_call("a", "b"), _tool("a"), _tool("b"), A], [[0], [1, 2, 3], [4]]),
    # Responses: parallel calls are separate items; all four are one unit
    ([U, _fc("a"), _fc("b"), _out("a"), _out("b"), A], [[0], [1, 2, 3, 4], [5]]),
    # a reasoning item goes with the calls it produced
    ([U, RS, _fc("a"), _out("a")], [[0], [1, 2, 3]]),
    # a call whose result has not arrived yet stands alone
    ([U, _fc("a")], [[0], [1]]),
    # results whose call is not in view are left out: both APIs refuse them alone
    # (tests/test_tool_units_complete.py)
    ([_out("x"), U], [[1]]),
    # two sequential call rounds stay two units
    ([_fc("a"), _out("a"), _fc("b"), _out("b")], [[0, 1], [2, 3]]),
    # the legacy function_call pairs with the function message by name
    ([{"role": "assistant", "content": None, "function_call": {"name": "now", "arguments": "{}"}},
      {"role": "function", "name": "now", "content": "9"}], [[0, 1]]),
]


@pytest.mark.parametrize(("bodies", "units"), CASES)
def test_units(bodies: list[dict[str, Any]], units: list[list[int]]) -> None:
    msgs: list[StoredMessage | None] = [_m(i, b) for i, b in enumerate(bodies)]
    got = _units(msgs, [False] * len(msgs))
    assert [[m.position for m in g] for g in reversed(got)] == units


def test_a_result_whose_call_cannot_be_read_is_dropped_with_it() -> None:
    msgs: list[StoredMessage | None] = [None, _m(1, _out("a")), _m(2, A)]
    got = _units(msgs, [False] * 3)
    assert [[m.position for m in g] for g in got] == [[2]]


def test_hot_tier_payloads_give_valid_contexts(memory: Memory) -> None:
    memory.append_many("resp", corpus.responses_conversation())
    memory.append_many("chat", corpus.chat_conversation())
    for budget in (400, 1400, 6000):
        r = memory.context("resp", "book it", budget)
        assert r.plan.tiers["hot"] != "degraded"
        corpus.valid_responses(r.messages)
        corpus.valid_chat(memory.context("chat", "which flight?", budget).messages)


def test_tool_names_are_not_speaker_names(cold_memory: Memory) -> None:
    # the planner strips speaker names from a query before embedding it: a tool's name must
    # not count as one, or "what's the weather?" would lose the word "weather"
    cold_memory.append_many("c", [{"role": "user", "content": "hi", "name": "ana"}, _fc("a") | {"name": "weather"},
                                  {"role": "tool", "tool_call_id": "a", "content": "sunny", "name": "weather"},
                                  {"role": "function", "name": "weather", "content": "sunny"}])
    assert cold_memory.turns.get("c").names == frozenset({"ana"})
    assert [h.position for h in cold_memory.search("c", "ana", k=5)][:1] == [0]
