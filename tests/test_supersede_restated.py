"""A fact said more than once and then corrected: no saying of it stays current.

A review found (both engines): "I live in Oslo." twice (each answered "Got it."), then
"Actually I moved to Bergen.": only the second saying was superseded (the correction's
best match, recency breaking the tie), so ``facts()`` listed the first as current and the
context pinned "[user ...] I live in Oslo." among the current values.

Invariants (consolidation.supersede, `_restates` / `Superseder._restated`):
- A correction supersedes every current earlier restatement of what it revises: the same
  words, or the same holder giving the same value of the same kind of fact ("I live in
  Oslo.", "My home is in Oslo.", "I'm based in Oslo.").
- It reaches no further: a value superseded before stays superseded by what superseded it,
  and a statement of another kind ("I work in Oslo."), another holder ("My sister lives in
  Oslo.") or another thing ("The dentist is at 3pm.") stays current, as does a saying
  after the correction.
- A popped correction revives every saying it superseded.
- A restatement is the same fact: the same values both ways, the same time qualifiers
  (day, date, today / tomorrow, this / next week, a year, a past or habitual form), the
  same words besides the value where no kind of fact is told, and no negation or wish the
  other lacks. A second review found a84f5f5 reached further: "My flight is at 9am
  today." was superseded by a correction of tomorrow's flight, "I lived in Oslo in 2019."
  and "I used to live in Oslo." by "Actually I moved to Bergen." (`REACH_CASES`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.models import message_text

ACK = {"role": "assistant", "content": "Got it."}
OSLO = "I live in Oslo."
BERGEN = "Actually I moved to Bergen."
MARK = "SUPERSEDED, not current"
BUDGET = 300  # tokens: the repro's budget (every turn fits; the old sayings are pinned or retrieved)


def _say(mem: Memory, texts: list[str]) -> None:
    """Each of `texts` as a user turn answered "Got it." (user turn i at position 2*i)."""
    for t in texts:
        mem.append("k", {"role": "user", "content": t})
        mem.append("k", ACK)
    mem.catch_up("k")


def _superseded_by(mem: Memory, n: int) -> list[int | None]:
    """For each of the `n` user turns, the user turn (its index) that superseded it."""
    by = {r.position: r.superseded_by for r in mem.cold.turns("k")}
    return [None if by[2 * i] is None else by[2 * i] // 2 for i in range(n)]


# (user turns, for each the index of the user turn that supersedes it; None: current)
CASES = [
    # the review's repro: said twice, both superseded (before: only the second)
    ([OSLO, OSLO, BERGEN], [2, 2, None]),
    # three times
    ([OSLO, OSLO, OSLO, BERGEN], [3, 3, 3, None]),
    # the same fact in other words (before: only the one the correction matched best)
    ([OSLO, "My home is in Oslo.", "I'm based in Oslo.", BERGEN], [3, 3, 3, None]),
    ([OSLO, OSLO, "I reside in Oslo.", BERGEN], [3, 3, 3, None]),
    # said again after the correction: that saying is current (nothing later corrects it)
    ([OSLO, OSLO, BERGEN, OSLO], [2, 2, None, None]),
    # a statement of another kind naming the same city stays current
    ([OSLO, "I work in Oslo.", OSLO, BERGEN], [3, None, 3, None]),
    # another holder's home stays current
    (["My sister lives in Oslo.", OSLO, OSLO, BERGEN], [None, 3, 3, None]),
    # the same value of another fact stays current
    (["I was born in Oslo.", OSLO, OSLO, BERGEN], [None, 3, 3, None]),
    # a value superseded before keeps its own correction; both sayings of the next go
    (["I live in Trondheim.", "Actually I moved to Oslo.", OSLO, BERGEN], [1, 3, 3, None]),
    # no fact of a person: the same words, both superseded
    (["The meeting is at 3pm.", "The meeting is at 3pm.", "Actually the meeting is at 4pm."], [2, 2, None]),
    # another thing at the same hour stays current
    (["The dentist is at 3pm.", "The meeting is at 3pm.", "The meeting is at 3pm.",
      "Actually the meeting is at 4pm."], [None, 3, 3, None]),
]


@pytest.mark.parametrize(("texts", "expected"), CASES)
def test_a_correction_supersedes_every_restatement(tmp_path: Path, embedder: FastEmbedder, texts: list[str],
                                                   expected: list[int | None]) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        _say(mem, texts)
        assert _superseded_by(mem, len(texts)) == expected


@pytest.mark.parametrize("engine_config", ["sqlite", "postgres"], indirect=True)
def test_the_repro_pins_only_the_new_value(engine_config: Config, embedder: FastEmbedder) -> None:
    with Memory(engine_config, embedder=embedder, hot=False, background_indexing=False) as mem:
        _say(mem, [OSLO, OSLO, BERGEN])
        facts = {f.position: f for f in mem.facts("k")}
        assert [(facts[p].until_position, facts[p].current_position) for p in (0, 2, 4)] == \
            [(4, 4), (4, 4), (None, 4)]
        ctx = mem.context("k", "Where do I live?", budget=BUDGET)
        lines = [ln for m in ctx.messages for ln in message_text(m).splitlines() if "Oslo" in ln]
        # every line that shows Oslo says it is no longer current (before: a pinned current value)
        assert [ln for ln in lines if MARK not in ln] == []


@pytest.mark.parametrize("engine_config", ["sqlite", "postgres"], indirect=True)
def test_a_popped_correction_revives_every_saying(engine_config: Config, embedder: FastEmbedder) -> None:
    with Memory(engine_config, embedder=embedder, hot=False, background_indexing=False) as mem:
        _say(mem, [OSLO, OSLO, BERGEN])
        mem.append("k", {"type": RETRACT_TYPE, "position": 4})
        mem.catch_up("k")
        facts = {f.position: f for f in mem.facts("k")}
        assert 4 not in facts  # the popped correction is not believed
        assert [(facts[p].status, facts[p].until_position) for p in (0, 2)] == [("current", None)] * 2


# What a84f5f5's restatement rule must not reach, and the judgement calls (second review):
# (user turns as (speaker or None, text), for each the index of the user turn that
# supersedes it; None: current). In each, the correction's own target (the turn before it)
# is superseded as before; the question is only the earlier turn.
REACH_CASES = [
    # another occasion: today's flight is no saying of tomorrow's (before: superseded)
    ([(None, "My flight is at 9am today."), (None, "My flight is at 9am tomorrow."),
      (None, "Actually tomorrow's flight is at 11am.")], [None, 2, None]),
    # this week's meeting is no saying of next week's (before: superseded)
    ([(None, "The meeting is at 3pm this week."), (None, "The meeting is at 3pm next week."),
      (None, "Actually next week's meeting is at 4pm.")], [None, 2, None]),
    # the past: where the user lived in 2019 still holds (before: superseded)
    ([(None, "I lived in Oslo in 2019."), (None, OSLO), (None, BERGEN)], [None, 2, None]),
    # a habitual past (before: superseded)
    ([(None, "I used to live in Oslo."), (None, OSLO), (None, BERGEN)], [None, 2, None]),
    # a past as a student (before: superseded)
    ([(None, "I lived in Oslo as a student."), (None, OSLO), (None, BERGEN)], [None, 2, None]),
    # a negated wish states no home (before: superseded)
    ([(None, "I don't want to live in Oslo forever."), (None, OSLO), (None, BERGEN)], [None, 2, None]),
    # a word more on one side is another thing: the meeting with Bob (before: superseded)
    ([(None, "The meeting is at 3pm."), (None, "The meeting with Bob is at 3pm."),
      (None, "Actually the meeting with Bob is at 4pm.")], [None, 2, None]),
    # judgement call: "the hotel" may be another trip's; the correction names Rome's, a
    # value the first lacks, so it stays current (before: superseded)
    ([(None, "The hotel costs $200 a night."), (None, "The hotel in Rome costs $200 a night."),
      (None, "Actually the hotel in Rome costs $250 a night.")], [None, 2, None]),
    # judgement call: the usual dinner time is no saying of Saturday's (before: superseded)
    ([(None, "Dinner is at 7pm."), (None, "Dinner on Saturday is at 7pm."),
      (None, "Actually dinner on Saturday is at 8pm.")], [None, 2, None]),
    # judgement call: "we" is the household, and the speaker's move says nothing of the
    # others: it stays current (before: superseded)
    ([(None, "We live in Oslo."), (None, OSLO), (None, BERGEN)], [None, 2, None]),
    # judgement call: an unnamed user turn may be the named speaker's (voices_may_revise
    # reads a turn naming nobody as anyone's), the same words: superseded as before
    ([(None, OSLO), ("alice", OSLO), ("alice", BERGEN)], [2, 2, None]),
    # the same occasion said twice still goes with its correction
    ([(None, "My flight is at 9am tomorrow."), (None, "My flight is at 9am tomorrow."),
      (None, "Actually tomorrow's flight is at 11am.")], [2, 2, None]),
    # another named speaker's saying stays current
    ([("bob", OSLO), ("alice", OSLO), ("alice", BERGEN)], [None, 2, None]),
]


@pytest.mark.parametrize(("turns", "expected"), REACH_CASES)
def test_a_restatement_is_the_same_fact(tmp_path: Path, embedder: FastEmbedder, turns: list[tuple[str | None, str]],
                                        expected: list[int | None]) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        for who, text in turns:
            mem.append("k", {"role": "user", "content": text, **({"name": who} if who else {})})
            mem.append("k", ACK)
        mem.catch_up("k")
        assert _superseded_by(mem, len(turns)) == expected
