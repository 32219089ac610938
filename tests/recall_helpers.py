"""One fact said early, a run of small talk, then the message that asks for it: the
context built for that message, for tests of what a query class brings back."""

from __future__ import annotations

from tiermem import Memory
from tiermem.planner.plan import Context

T0 = 1_777_600_000.0  # 2026-05-01 01:46 UTC
HOUR_S = 3600.0
FILLER = ("I had a long day at work.", "The weather was lovely this morning.", "My cat knocked a glass over.",
          "I finally finished that novel.", "Traffic was terrible on the bridge.", "I made pancakes today.")
FILLER_ROUNDS = 3  # the fact is 36 turns back: past the recent tail at a few hundred tokens


def context_after_small_talk(mem: Memory, fact: str, asked: str, budget: int) -> Context:
    """Append `fact`, the filler an hour apart, then `asked`, and build its context."""
    turns = [("user", fact), ("assistant", "Noted.")]
    for f in FILLER * FILLER_ROUNDS:
        turns += [("user", f), ("assistant", "I see.")]
    turns.append(("user", asked))
    mem.append_many("c", [{"role": r, "content": t, "created_at": T0 + i * HOUR_S}
                          for i, (r, t) in enumerate(turns)])
    return mem.context("c", asked, budget)
