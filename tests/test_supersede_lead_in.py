"""A fact said again behind a discourse lead-in and then corrected: no saying stays current.

A review found: "I live in Oslo." ... "Remember, I live in Oslo." ... "Actually I moved to
Bergen." superseded only the second saying; ``facts()`` listed the first as current, and
the pinned block and the rolling summary written before the correction served "I live in
Oslo." unmarked. With "Note that I live in Oslo." the second saying stayed current instead.
`_holder` read the clause's first word ("remember", "as", "note") as its subject, so the
lead-in's saying was nobody's fact: no restatement of the user's (`_restates`), and no home
of the user's for the correction's slot match (`_held_kinds`, which took the older saying).

Invariants (consolidation.supersede `_OPENER`):
- An English discourse lead-in that says a fact again or stresses it ("Remember,", "As I
  said,", "Note that", "For the record,", "Like I said,", "As I mentioned,") is an opener:
  the holder is what follows it, so the saying behind it is a restatement of the plain one,
  and both go with the correction.
- It changes no holder: "Remember, my sister lives in Oslo." is still the sister's home and
  "As I said, we live in Oslo." the household's; both stay current after the user's move.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import message_text

ACK = {"role": "assistant", "content": "Got it."}
OSLO = "I live in Oslo."
BERGEN = "Actually I moved to Bergen."
MARK = "SUPERSEDED, not current"
BUDGET = 400  # tokens: the repro's budget, at which the rolling summary's Oslo line was served
FILLER_PAIRS = 6  # exchanges after the sayings, so that the rolling view covers them (the repro's)


def _superseded_by(mem: Memory, n: int) -> list[int | None]:
    """For each of the `n` user turns, the user turn (its index) that superseded it."""
    by = {r.position: r.superseded_by for r in mem.cold.turns("k")}
    return [None if by[2 * i] is None else by[2 * i] // 2 for i in range(n)]


# (user turns, for each the index of the user turn that supersedes it; None: current)
CASES = [
    # the review's repro: the first saying stayed current (before: [None, 2, None])
    ([OSLO, "Remember, I live in Oslo.", BERGEN], [2, 2, None]),
    # (before: [None, 2, None])
    ([OSLO, "As I said, I live in Oslo.", BERGEN], [2, 2, None]),
    # the correction matched the older saying, the lead-in's stayed current (before: [2, None, None])
    ([OSLO, "Note that I live in Oslo.", BERGEN], [2, 2, None]),
    ([OSLO, "Remember that I live in Oslo.", BERGEN], [2, 2, None]),
    ([OSLO, "For the record, I live in Oslo.", BERGEN], [2, 2, None]),
    ([OSLO, "Like I said, I live in Oslo.", BERGEN], [2, 2, None]),
    ([OSLO, "As I mentioned earlier, I live in Oslo.", BERGEN], [2, 2, None]),
    # after another opener
    ([OSLO, "Oh, and remember, I live in Oslo.", BERGEN], [2, 2, None]),
    # the lead-in on the first saying
    (["Note that I live in Oslo.", OSLO, BERGEN], [2, 2, None]),
    # openers read before: superseded as before
    ([OSLO, "Just so you know, I live in Oslo.", BERGEN], [2, 2, None]),
    ([OSLO, "FYI, I live in Oslo.", BERGEN], [2, 2, None]),
    # a lead-in changes no holder: the sister's home and the household's stay current
    (["Remember, my sister lives in Oslo.", OSLO, BERGEN], [None, 2, None]),
    (["As I said, we live in Oslo.", OSLO, BERGEN], [None, 2, None]),
]


@pytest.mark.parametrize(("texts", "expected"), CASES)
def test_a_saying_behind_a_lead_in_goes_with_the_correction(tmp_path: Path, embedder: FastEmbedder,
                                                            texts: list[str], expected: list[int | None]) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        for t in texts:
            mem.append("k", {"role": "user", "content": t})
            mem.append("k", ACK)
        mem.catch_up("k")
        assert _superseded_by(mem, len(texts)) == expected
        # and ``facts()`` serves none of the superseded sayings as current
        current = {f.position // 2 for f in mem.facts("k") if f.until_position is None}
        assert current & {i for i, by in enumerate(expected) if by is not None} == set()


@pytest.mark.parametrize("again", [
    # the review's repro: the first saying served as current, pinned and in the summary
    "Remember, I live in Oslo.",
    # the second saying served as current
    "Note that I live in Oslo.",
])
def test_a_rolling_view_written_before_the_correction_serves_no_current_oslo(
        tmp_path: Path, embedder: FastEmbedder, again: str) -> None:
    with Memory(Config(data_dir=tmp_path / "data", namespace_recall=False), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        msgs = [{"role": "user", "content": OSLO}, {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": again}, {"role": "assistant", "content": "Sure."}]
        for i in range(FILLER_PAIRS):
            msgs += [{"role": "user", "content": f"Tell me about topic number {i} in physics."},
                     {"role": "assistant", "content": f"Topic {i} is about energy and waves."}]
        mem.append_many("k", msgs, session_id="s0")
        mem.consolidate("k")
        view = mem.warm.latest("k", "rolling")
        # the view was written while Oslo was current, and holds it
        assert view is not None and any("Oslo" in s.text and s.status == "current" for s in view.sentences)
        mem.append_many("k", [{"role": "user", "content": BERGEN}, {"role": "assistant", "content": "Got it, Bergen."}],
                        session_id="s1")
        mem.catch_up("k")
        assert [f.position for f in mem.facts("k") if "Oslo" in f.text and f.until_position is None] == []
        ctx = mem.context("k", "Where do I live?", budget=BUDGET)
        lines = [ln for m in ctx.messages for ln in message_text(m).splitlines() if "Oslo" in ln]
        # every line that shows Oslo says it is no longer current (before: a pinned current
        # value and the summary's "- I live in Oslo.")
        assert [ln for ln in lines if MARK not in ln] == []
