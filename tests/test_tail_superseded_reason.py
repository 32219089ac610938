"""A superseded turn the recent tail shows is marked in its plan item's reason (build.py's
rule for a superseded turn that is shown: the supersession and its validity interval),
and `plan.left_out` does not list it: the tail shows it, as it was said.

Before, the tail item said only "recent turn" while `left_out` listed the same turn as
"#0 pinned superseded by #4: not presented as current", a turn the messages showed; so
it did for a superseded turn recalled, its line marked.
Real SQLite, the real model, no hot tier.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.models import message_text

BUDGET = 2000  # tokens: every turn of the conversation fits the tail
OLD, NEW = "alice.old@example.com", "alice.new@example.com"
OLD_TURN = 0
CORRECTION = 4  # the turn that supersedes OLD_TURN
STORY = [f"My email address is {OLD}, use it for the invoices.", "Noted.",
         "Let's talk about the trip to Lisbon next month.", "Sure, Lisbon in May sounds great.",
         f"Actually, my email address changed: it is now {NEW}.", "Updated.",
         "What about hotels near the river?", "There are several options along the river."]
QUESTION = "what is my email address?"
MUSEUMS = 60  # rounds of filler that move the old turn out of the tail
RECALL_BUDGET = 1000  # tokens: the tail holds only the newest rounds


def _append(mem: Memory, texts: list[str], start: int = 0) -> None:
    mem.append_many("c", [{"role": "user" if (start + i) % 2 == 0 else "assistant", "content": t}
                          for i, t in enumerate(texts)])
    mem.catch_up("c")


@pytest.mark.parametrize(("steps", "marked"), [
    # the review's case: the correction in the tail too; the turn was listed left out
    ("story", True),
    # the caller pinned the old turn: its pin stands, the tail shows it, still marked
    ("story+pin", True),
    # shown unmarked in an epoch's first context, corrected after: the extension keeps
    # the message as it was sent and the plan marks its item now
    ("shown-then-corrected", True),
    # the correction popped: the old value is current again, nothing marks it (right before too)
    ("popped", False),
])
def test_a_superseded_tail_turn_says_so(tmp_path: Path, embedder: FastEmbedder, steps: str, marked: bool) -> None:
    with Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False) as mem:
        if steps == "shown-then-corrected":
            _append(mem, STORY[:CORRECTION])
            mem.append("c", {"role": "user", "content": "Any tips for Lisbon?"})
            first = mem.context("c", "Any tips for Lisbon?", BUDGET)
            assert not any("superseded" in it.reason for it in first.plan.items)  # nothing corrected yet
            mem.append("c", {"role": "assistant", "content": "Try the trams."})
            _append(mem, STORY[CORRECTION:], start=CORRECTION)
            correction = CORRECTION + 2  # after the extra round
        else:
            _append(mem, STORY)
            correction = CORRECTION
        if steps == "story+pin":
            mem.pin("c", OLD_TURN)
        if steps == "popped":
            mem.append("c", {"type": RETRACT_TYPE, "position": CORRECTION})
        # the premise: the correction is recorded (a pop hides it at read time, the record stays)
        assert mem.cold.turns("c")[OLD_TURN].superseded_by == correction
        mem.append("c", {"role": "user", "content": QUESTION})
        ctx = mem.context("c", QUESTION, BUDGET)
    plan = ctx.plan
    if steps == "shown-then-corrected":
        assert not plan.cache.new_epoch, plan.cache  # the premise: an extension, not a rebuild
    # the premise: the tail shows the old turn as it was said
    shown = [m for m in ctx.messages if m.get("role") == "user" and OLD in message_text(m)]
    assert shown, ctx.messages
    (item,) = [it for it in plan.items if it.slice == "tail" and OLD_TURN in it.positions]
    if marked:
        assert f"superseded by #{correction} (valid #{OLD_TURN} " in item.reason, item.reason
        assert f"until #{correction} " in item.reason and "not as a current value" in item.reason, item.reason
        assert item.reason in plan.explain()
    else:
        assert "superseded" not in item.reason, item.reason
    # never listed left out while the messages show it
    assert not [it for it in plan.left_out if OLD_TURN in it.positions], plan.left_out


def test_a_superseded_turn_retrieved_marked_is_not_listed_left_out(tmp_path: Path, embedder: FastEmbedder) -> None:
    # out of the tail, recalled: its line carries the mark, its item the interval; before,
    # left_out listed it too ("#0 pinned superseded by #4: not presented as current")
    museums = [f"Tell me about museum number {i} in Lisbon, its opening hours and the tram that goes there."
               for i in range(MUSEUMS)]
    with Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False) as mem:
        _append(mem, [*STORY[:CORRECTION + 2], *(t for m in museums for t in (m, "It opens at nine; tram 28 stops."))])
        question = "what was my old email address?"
        mem.append("c", {"role": "user", "content": question})
        ctx = mem.context("c", question, RECALL_BUDGET)
    (item,) = [it for it in ctx.plan.items if OLD_TURN in it.positions]
    assert item.slice == "retrieved" and f"superseded by #{CORRECTION} (valid #{OLD_TURN} " in item.reason, item
    assert any(OLD in message_text(m) and "SUPERSEDED" in message_text(m) for m in ctx.messages)
    assert not [it for it in ctx.plan.left_out if OLD_TURN in it.positions], ctx.plan.left_out
