"""Whose turns a question is about: a question that names one participant of the conversation
("what does Jo do to relax?") is answered mostly by that participant's own turns.

`speaker_boost` adds SPEAKER_BOOST to the turns spoken by the one participant the query names
(by the `name` their messages carry, as the turn cache records it per turn), and nothing when
the query names none, or several (then it is about their exchange, not one side of it).

Invariants: pure; names come from the conversation itself (the turn cache), never from a list
here; a name shorter than MIN_NAME_CHARS is ignored (too ambiguous to match in a question).
"""

from __future__ import annotations

import re

import numpy as np

from tiermem.tiers.turncache import TurnTable

MIN_NAME_CHARS = 2
# On planner.rank's scale (z-score sums; the best turns score about 5-10): it reorders the
# candidates of one topic toward the named participant's side, but does not lift an unrelated
# turn past a matching one. Chosen leave-one-conversation-out on the LoCoMo dev conversations
# from {0.5, 1, 1.5, 2, 2.5, 2 with rank.EPISODE 0.6}, one value for every budget (README,
# issue 19): two folds chose 2, one 2.5, one 2 with the lower episode weight. (It was 0.5,
# chosen from {0, 0.5}.) Adversarial questions, which name the wrong participant on
# purpose, lose by it (98.3 -> 97.7% at 2,000 tokens).
SPEAKER_BOOST = 2.0


def named_speaker(table: TurnTable, query: str) -> int | None:
    """The index (into `table.speaker_names`) of the one participant the query names, or None."""
    hits = [i for i, n in enumerate(table.speaker_names)
            if len(n.strip()) >= MIN_NAME_CHARS
            and re.search(r"\b" + re.escape(n.strip()) + r"(?:'s)?\b", query, re.IGNORECASE)]
    return hits[0] if len(hits) == 1 else None


def speaker_boost(table: TurnTable, query: str) -> np.ndarray:
    """Per turn of `table`: SPEAKER_BOOST for the named participant's turns, else 0."""
    n = len(table)
    out = np.zeros(n, dtype=np.float64)
    if not SPEAKER_BOOST or table.speaker is None or not table.speaker_names:
        return out
    who = named_speaker(table, query)
    if who is not None:
        out[table.speaker[:n] == who] = SPEAKER_BOOST
    return out
