"""A turn the caller pinned, then superseded by a correction, is never presented as a
current value: the pinned block (headed "current values") still shows it, since the
caller's pin stands, but marked "SUPERSEDED, not current" with its validity interval, as a
superseded retrieved line is, and the plan item says which turn superseded it. An epoch
that showed it unmarked ends when the correction arrives; the marked pin is not counted
as current, so the epochs after it extend as usual.

On the code before, the first two tests fail (the pinned line stayed unmarked, and the
epoch went on showing it as current); the third passes there too (no supersession: the
caller pin is shown as before).
"""

from __future__ import annotations

from typing import Any

from tiermem import Memory

BUDGET = 300
MARK = "SUPERSEDED, not current"


def _pinned_block(ctx: Any) -> str:
    blocks = [m["content"] for m in ctx.messages
              if m["role"] == "system" and str(m["content"]).startswith("Standing instructions")]
    assert len(blocks) == 1, ctx.messages
    return str(blocks[0])


def _chatter(memory: Memory, what: str, n: int = 12) -> None:
    memory.append_many("c", [{"role": "user" if i % 2 else "assistant", "content": f"{what} ({i})"}
                             for i in range(n)])


def _setup(memory: Memory) -> int:
    p = memory.append("c", {"role": "user", "content": "My dog's name is Biscuit."})
    memory.pin("c", p, priority=100)
    memory.append("c", {"role": "assistant", "content": "What a lovely name."})
    _chatter(memory, "the weather is nice today")
    return p


def _correct(memory: Memory, p: int) -> None:
    memory.append("c", {"role": "user", "content": "Actually, my dog's name is Pepper now."})
    memory.append("c", {"role": "assistant", "content": "Noted."})
    _chatter(memory, "I had pasta for lunch")
    key = memory.cold.key_of("default", "c")
    assert key is not None
    assert memory.cold.turns_at(key, [p])[0].superseded_by is not None  # the correction took


def test_a_superseded_caller_pin_is_shown_marked(memory: Memory) -> None:
    p = _setup(memory)
    _correct(memory, p)
    memory.append("c", {"role": "user", "content": "Book the vet for my dog."})
    ctx = memory.context("c", "Book the vet for my dog.", budget=BUDGET)
    block = _pinned_block(ctx)
    line = next(ln for ln in block.split("\n") if "Biscuit" in ln)
    assert MARK in line and "until" in line, line
    item = next(it for it in ctx.plan.items if it.slice == "pinned" and it.positions == [p])
    assert "pinned by the caller" in item.reason and "superseded by #" in item.reason, item.reason


def test_an_epoch_showing_the_pin_ends_when_it_is_superseded(memory: Memory) -> None:
    p = _setup(memory)
    memory.append("c", {"role": "user", "content": "Tell me a joke."})
    first = memory.context("c", "Tell me a joke.", budget=BUDGET)
    assert MARK not in _pinned_block(first) and "Biscuit" in _pinned_block(first)
    _correct(memory, p)
    memory.append("c", {"role": "user", "content": "Book the vet for my dog."})
    second = memory.context("c", "Book the vet for my dog.", budget=BUDGET)
    assert second.plan.cache.new_epoch, second.plan.cache.reason
    biscuit = [ln for m in second.messages if m["role"] == "system"
               for ln in str(m["content"]).split("\n") if "Biscuit" in ln]
    assert biscuit and all(MARK in ln for ln in biscuit), biscuit
    # marked, it is not a current pin: the next call extends this epoch
    memory.append("c", {"role": "assistant", "content": "Booked for Tuesday."})
    memory.append("c", {"role": "user", "content": "Thanks."})
    third = memory.context("c", "Thanks.", budget=BUDGET)
    assert not third.plan.cache.new_epoch, third.plan.cache.reason


def test_a_current_caller_pin_is_shown_unmarked(cold_memory: Memory) -> None:
    p = cold_memory.append("c", {"role": "user", "content": "My dog's name is Biscuit."})
    cold_memory.pin("c", p, priority=100)
    cold_memory.append_many("c", [{"role": "user" if i % 2 else "assistant", "content": f"nice weather ({i})"}
                                  for i in range(12)])
    cold_memory.append("c", {"role": "user", "content": "Book the vet for my dog."})
    ctx = cold_memory.context("c", "Book the vet for my dog.", budget=BUDGET)
    block = _pinned_block(ctx)
    assert "Biscuit" in block and MARK not in block
