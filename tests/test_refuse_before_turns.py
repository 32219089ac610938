"""A context the budget cannot hold is refused before the turn table is read.

The reviewer stored 10 turns of 1 MB and asked for a context at budget 2,000: the first
call read the whole conversation into the turn cache (every turn's keywords and periods
derived: 13 s of CPU) and only then answered BudgetTooSmall, as the latest message alone
does not fit. `Planner.refuse_unfit` now makes the planner's own check first, on the
latest user message read by itself; the turn cache's own counter (`stats()`'s
conversations) says whether the conversation was read. The error is the one the planner's
check after the table gives, word for word."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.errors import BudgetTooSmall
from tiermem.tiers.embed_onnx import FastEmbedder

LONG = "word " * 400  # the latest user message, far past the budgets below
BIG_SYSTEM = "word " * 500  # a system prompt past every budget below on its own
SMALL_SYSTEM = "You are a terse assistant."

# (conversation, system prompt, budget, truncate_latest, the part BudgetTooSmall names,
#  how many conversations the turn cache holds after the refusal)
REFUSED = [
    # the reviewer's call: the whole latest message is past the budget
    ("long", None, 100, False, "latest", 0),
    # the system prompt alone is past it: named, not the message
    ("long", BIG_SYSTEM, 100, False, "system", 0),
    # truncate_latest, but not even the least truncated message fits beside the system prompt
    ("long", SMALL_SYSTEM, 16, True, "truncated_latest", 0),
    # no user message at all, a system prompt past the budget
    ("assistant_only", BIG_SYSTEM, 100, False, "system", 0),
    # the newest user message is short but retracted: the long one before it is the latest. The
    # early check looks only where the newest one's stored count does not fit (a retraction
    # costs a read of the control rows), so the planner's check after the table refuses it
    ("retracted", None, 100, False, "latest", 1),
]
IDS = ["latest", "system", "truncated", "no_user", "retracted_latest"]


def _memory(path: Path, embedder: FastEmbedder) -> Memory:
    mem = Memory(Config(data_dir=path), embedder=embedder, hot=False, background_indexing=False)
    mem.append("long", {"role": "user", "content": "hello"})
    mem.append("long", {"role": "assistant", "content": "hi"})
    mem.append("long", {"role": "user", "content": LONG})
    mem.append("assistant_only", {"role": "assistant", "content": "hello"})
    mem.append("retracted", {"role": "user", "content": LONG})
    mem.append("retracted", {"role": "user", "content": "ok"})
    mem.append("retracted", {"type": "tiermem.retract", "position": 1})  # "ok" taken back: the long one is latest
    mem.turns.drop()  # what a fresh process holds: no conversation read yet
    return mem


@pytest.mark.parametrize(("conv", "system", "budget", "truncate", "part", "read"), REFUSED, ids=IDS)
def test_a_refusal_reads_no_turn_table(tmp_path: Path, embedder: FastEmbedder, conv: str, system: str | None,
                                       budget: int, truncate: bool, part: str, read: int) -> None:
    with _memory(tmp_path / "data", embedder) as mem:
        with pytest.raises(BudgetTooSmall) as early:
            mem.context(conv, "x", budget, system=system, truncate_latest=truncate)
        assert early.value.part == part
        assert mem.turns.stats()["conversations"] == read  # 0: refused before the turn cache read it
        # the planner's check after the table (what every refusal went through before): the same words
        _name, ns, key = mem._key(conv, None)
        with pytest.raises(BudgetTooSmall) as late:
            mem.planner.build(key, "x", budget, namespace=ns, system=system, truncate_latest=truncate,
                              table=mem.turns.get(key))
        assert str(early.value) == str(late.value)


# (conversation, system prompt, budget, truncate_latest): calls that fit
FITTING = [
    # the latest message fits whole
    ("long", SMALL_SYSTEM, 2_000, False),
    # it does not, but truncated it does
    ("long", None, 100, True),
    # the retracted short message was the newest: the stored count of the long one before it is what fits
    ("retracted", None, 2_000, False),
]


@pytest.mark.parametrize(("conv", "system", "budget", "truncate"), FITTING, ids=["whole", "truncated", "retracted"])
def test_a_context_that_fits_reads_the_table(tmp_path: Path, embedder: FastEmbedder, conv: str,
                                             system: str | None, budget: int, truncate: bool) -> None:
    with _memory(tmp_path / "data", embedder) as mem:
        ctx = mem.context(conv, "x", budget, system=system, truncate_latest=truncate)
        assert ctx.tokens <= budget
        assert mem.turns.stats()["conversations"] == 1  # the counter the refusal test reads does count
