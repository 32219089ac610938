"""Every context's tool units are complete, as both provider APIs require
(planner.candidates.tool_units): each tool result follows the assistant message or item
carrying its call id, and each call is followed by its results before any other user or
assistant message. A unit that cannot be shown complete is left out and the plan says
why: a retracted call or result, an agent that stopped mid-loop (a call never answered,
followed by a new user message), a fork cut between call and result. A call still
waiting at the very end of the log is the agent's pending round: it is kept, and an
epoch appends its result right after it; when a new message follows instead, the epoch
ends (it showed the call) and the rebuild leaves the call out.

On the code before, 7 of 10 fail (the result without its call and the call without its
result were shown, and an epoch kept a crashed round's call); three pass there too and
guard what held: a pending call at the end kept and its result appended, a Responses
round split across appends, a huge result at small budgets.
"""

from __future__ import annotations

from typing import Any

import pytest

from tiermem import Memory
from tiermem.planner import candidates
from tiermem.tiers.models import StoredMessage, canonical_role

BUDGET = 1000


def _call(cid: str = "call_1") -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "search_flights", "arguments": '{"to": "LIS"}'}}]}


def _result(cid: str = "call_1") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": "TP1350 at 09:10"}


def _fc(cid: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": cid, "name": "lookup", "arguments": "{}"}


def _out(cid: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": "found it"}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def problems(msgs: list[dict[str, Any]], *, pending_ok: bool = False) -> list[str]:
    """What either API refuses in `msgs` (chat messages and Responses items); `pending_ok`:
    calls may wait at the very end (the agent's pending round)."""
    waiting: set[str] = set()
    out: list[str] = []
    for i, m in enumerate(msgs):
        rid = m.get("tool_call_id") if m.get("role") == "tool" else (
            m.get("call_id") if str(m.get("type", "")).endswith("_output") else None)
        calls = [c["id"] for c in m.get("tool_calls") or ()] or (
            [m["call_id"]] if m.get("type") == "function_call" else [])
        if rid is not None:
            if rid not in waiting:
                out.append(f"message {i}: result {rid} without its call")
            waiting.discard(rid)
        elif calls:
            waiting |= set(calls)
        elif waiting:
            out.append(f"message {i} ({m.get('role')}) before the results of {sorted(waiting)}")
            waiting = set()
    if waiting and not pending_ok:
        out.append(f"ends with unanswered calls {sorted(waiting)}")
    return out


def left_out_reasons(ctx: Any) -> list[str]:
    return [it.reason for it in ctx.plan.left_out if it.slice == "tail"]


@pytest.mark.parametrize("hide", ["call", "result"])
def test_a_retracted_half_of_a_unit_leaves_the_other_half_out(memory: Memory, hide: str) -> None:
    memory.append("c", _user("Find me a flight to Lisbon."))
    call = memory.append("c", _call())
    result = memory.append("c", _result())
    memory.append("c", {"type": "tiermem.retract", "position": call if hide == "call" else result})
    memory.append("c", _user("Book the morning one."))
    ctx = memory.context("c", "Book the morning one.", budget=BUDGET)
    assert problems(ctx.messages) == []
    assert [m["role"] for m in ctx.messages] == ["user", "user"]
    assert any("refuse" in r for r in left_out_reasons(ctx)), ctx.plan.left_out


def test_a_call_never_answered_mid_log_is_left_out(memory: Memory) -> None:
    memory.append("c", _user("Find me a flight to Lisbon."))
    memory.append("c", {**_call(), "content": "Let me check."})
    memory.append("c", _user("Hello? Are you there?"))
    memory.append("c", {"role": "assistant", "content": "Sorry, I am back."})
    ctx = memory.context("c", "Hello? Are you there?", budget=BUDGET)
    assert problems(ctx.messages) == []
    assert not any(m.get("tool_calls") for m in ctx.messages)
    assert any("call no result answers" in r for r in left_out_reasons(ctx))


def test_a_fork_cut_between_call_and_result_shows_no_half_unit(memory: Memory) -> None:
    memory.append("full", _user("Find me a flight to Lisbon."))
    memory.append("full", _call())
    memory.append("full", _result())
    child = memory.fork("full", 1, new_id="child")
    memory.append(child, _user("Actually, look for Porto instead."))
    ctx = memory.context(child, "Actually, look for Porto instead.", budget=BUDGET)
    assert problems(ctx.messages) == []
    # the two user messages and no tool message; the first, superseded by the second, may
    # also be marked in a system block (planner/marks.py), which holds no unit
    assert [m["role"] for m in ctx.messages
            if not (m["role"] == "system" and "SUPERSEDED, not current" in str(m["content"]))] == ["user", "user"]


def test_a_result_whose_call_is_past_the_tail_is_not_shown(cold_memory: Memory) -> None:
    # the call lies beyond the rows the tail reads at a small budget: its result alone
    # would open the context's tail
    cold_memory.append("c", _user("Search the archive."))
    cold_memory.append("c", _call())
    cold_memory.append("c", {"role": "tool", "tool_call_id": "call_1", "content": "line " * 2000})
    cold_memory.append("c", _user("Summarise what you found, briefly."))
    for budget in (60, 150, 400, 800):
        ctx = cold_memory.context("c", "Summarise what you found, briefly.", budget=budget)
        assert problems(ctx.messages) == [], (budget, [m["role"] for m in ctx.messages])


def test_a_pending_call_at_the_end_is_kept_and_its_result_appended(memory: Memory) -> None:
    # the agent is mid-loop: the context ends with its call, the result comes next and
    # the epoch appends it right after the call (this held before too)
    memory.append("c", _user("Find me a flight to Lisbon."))
    memory.append("c", _call())
    first = memory.context("c", "Find me a flight to Lisbon.", budget=BUDGET)
    assert first.messages[-1].get("tool_calls")
    assert problems(first.messages, pending_ok=True) == []
    memory.append("c", _result())
    second = memory.context("c", "Find me a flight to Lisbon.", budget=BUDGET)
    assert not second.plan.cache.new_epoch, second.plan.cache.reason
    assert second.messages[:len(first.messages)] == first.messages
    assert second.messages[-1]["role"] == "tool"
    assert problems(second.messages) == []


def test_a_pending_call_then_a_new_message_ends_the_epoch(memory: Memory) -> None:
    # the agent crashed after its call: the next user message would leave the call shown
    # by the previous context unanswered mid-context
    memory.append("c", _user("Find me a flight to Lisbon."))
    memory.append("c", _call())
    first = memory.context("c", "Find me a flight to Lisbon.", budget=BUDGET)
    assert first.messages[-1].get("tool_calls")
    memory.append("c", _user("Hello? Are you there?"))
    second = memory.context("c", "Hello? Are you there?", budget=BUDGET)
    assert problems(second.messages) == []
    assert second.plan.cache.new_epoch and "never answered" in second.plan.cache.reason
    assert second.messages[-1] == _user("Hello? Are you there?")


def test_responses_parallel_calls_answered_in_part_mid_log_are_left_out(cold_memory: Memory) -> None:
    cold_memory.append_many("c", [_user("Look up both."), _fc("a"), _fc("b"), _out("a"),
                                  _user("Never mind, what time is it?")])
    ctx = cold_memory.context("c", "Never mind, what time is it?", budget=BUDGET)
    assert problems(ctx.messages) == []
    assert not any(m.get("type") in ("function_call", "function_call_output") for m in ctx.messages)


def test_responses_parallel_calls_split_across_appends_stay_one_unit(cold_memory: Memory) -> None:
    # the items of one round appended one by one: a context between them ends pending
    cold_memory.append_many("c", [_user("Look up both."), _fc("a"), _fc("b"), _out("a")])
    first = cold_memory.context("c", "Look up both.", budget=BUDGET)
    assert problems(first.messages, pending_ok=True) == []
    assert [m.get("type") for m in first.messages[-3:]] == ["function_call", "function_call", "function_call_output"]
    cold_memory.append("c", _out("b"))
    second = cold_memory.context("c", "Look up both.", budget=BUDGET)
    assert problems(second.messages) == []
    assert not second.plan.cache.new_epoch, second.plan.cache.reason


def _m(pos: int, body: dict[str, Any]) -> StoredMessage:
    return StoredMessage("c", pos, canonical_role(body), body, None, None, 0.0)


def test_tool_units_reports_what_it_leaves_out() -> None:
    bodies = [_out("x"), _user("q"), _call("a"), _user("q2"), _call("b")]
    got = candidates.tool_units([_m(i, b) for i, b in enumerate(bodies)], [False] * len(bodies))
    assert [[m.position for m in g] for g in reversed(got.groups)] == [[1], [3], [4]]  # the last call waits
    assert sorted(m.position for g, _why in got.dropped for m in g) == [0, 2]
    # results of calls the previous context left waiting continue its unit
    cont = candidates.tool_units([_m(5, _result("b")), _m(6, _user("ok"))], [False, False], frozenset({"b"}))
    assert [[m.position for m in g] for g in reversed(cont.groups)] == [[5], [6]] and not cont.interrupted
    cut = candidates.tool_units([_m(5, _user("hello?"))], [False], frozenset({"b"}))
    assert cut.interrupted
