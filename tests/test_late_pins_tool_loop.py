"""Late pins in a tool loop (planner.late_pins, docs/design.md invariant 6): a pin made
while the agent runs tools (the same user message, its calls and results appended) is
never placed after that user message and its replies, where the late-pin block landed
before (and between a call and its result when the call was pending). The user message
is already in the epoch's prefix, so no place before the per-turn part is left: a new
epoch shows the pin in its pinned block, and the plan says why.

On the code before, both tool-loop tests fail; the control (a pin made before a new user
message still goes into a late-pin block before it, within the epoch) passes there too.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from tiermem import Memory
from tiermem.planner import late_pins

# the same seeded history and chat texts in every test (and module): their vectors are
# computed once a session (conftest.shared_vectors)
pytestmark = pytest.mark.usefixtures("shared_vectors")

WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]
BUDGET = 2000
PINNED = 10  # an early turn: no context of these tests shows it unpinned


def _history(memory: Memory, n: int = 300) -> None:
    rnd = random.Random(11)
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                              "content": " ".join(rnd.sample(WORDS, 6)) + f" and so on ({i})"} for i in range(n)])


def _call(cid: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "lookup", "arguments": '{"q": "walrus"}'}}]}


def _result(cid: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": "walruses live in the Arctic"}


def _latest_index(msgs: list[dict[str, Any]], text: str) -> int:
    return max(i for i, m in enumerate(msgs) if m["role"] == "user" and m["content"] == text)


def _nothing_but_turns_after(msgs: list[dict[str, Any]], text: str) -> None:
    i = _latest_index(msgs, text)
    assert all(m["role"] != "system" for m in msgs[i + 1:]), [m["role"] for m in msgs[i + 1:]]


def _start(memory: Memory, ask: str) -> None:
    _history(memory)
    memory.append("c", {"role": "user", "content": ask})
    first = memory.context("c", ask, budget=BUDGET)
    assert not any(f"({PINNED})" in str(m["content"]) for m in first.messages)  # the turn is not shown


def test_a_pin_made_in_a_tool_loop_is_not_placed_after_the_user_message(memory: Memory) -> None:
    ask = "Look up where walruses live, please."
    _start(memory, ask)
    memory.pin("c", PINNED, priority=100)
    memory.append_many("c", [_call("call_1"), _result("call_1")])
    ctx = memory.context("c", ask, budget=BUDGET)
    _nothing_but_turns_after(ctx.messages, ask)
    assert any(f"({PINNED})" in str(m["content"]) for m in ctx.messages if m["role"] == "system")
    assert ctx.plan.cache.new_epoch and "tool loop" in ctx.plan.cache.reason, ctx.plan.cache.reason
    assert ctx.messages[-1]["role"] == "tool"


def test_a_pin_made_while_a_call_is_pending_does_not_split_the_unit(memory: Memory) -> None:
    ask = "Look up where walruses live, please."
    _start(memory, ask)
    memory.append("c", _call("call_1"))
    pending = memory.context("c", ask, budget=BUDGET)
    assert pending.messages[-1].get("tool_calls")
    memory.pin("c", PINNED, priority=100)
    memory.append("c", _result("call_1"))
    ctx = memory.context("c", ask, budget=BUDGET)
    _nothing_but_turns_after(ctx.messages, ask)
    roles = [m["role"] for m in ctx.messages]
    assert roles[-2:] == ["assistant", "tool"], roles
    assert any(f"({PINNED})" in str(m["content"]) for m in ctx.messages if m["role"] == "system")


def test_a_pin_made_before_a_new_user_message_is_a_late_pin_before_it(memory: Memory) -> None:
    ask = "Tell me about harbours."
    _start(memory, ask)
    memory.pin("c", PINNED, priority=100)
    memory.append("c", {"role": "assistant", "content": "Harbours shelter ships."})
    memory.append("c", {"role": "user", "content": "ok cool"})
    ctx = memory.context("c", "ok cool", budget=BUDGET)
    assert not ctx.plan.cache.new_epoch, ctx.plan.cache.reason
    late = [i for i, m in enumerate(ctx.messages) if str(m["content"]).startswith(late_pins.HEADER)]
    assert late and late[0] < _latest_index(ctx.messages, "ok cool")
