"""Retrieval beyond the first round, for recall questions: episode keys
(planner.episodes), a second round seeded by the first one's best turns
(planner.multihop) and pseudo-relevance feedback from the best turns so far
(planner.feedback, off by default), as one credit per turn that planner.candidates adds
to its scores.

Invariants: the keys' and the hop's credit is never negative, so a turn the first round
ranks high stays there unless a turn linked to the question by an episode or a hop passes
it; the episode spread (planner.episodes.episode_spread, off unless set) is the one
penalty, applied last, on the rank within each episode; the seeds are chosen after the
episode keys' credit (an episode that matches as a whole may seed the hop); a query that
names a period does not hop (the date credit already says where its answer is: a hop
would carry turns of other days past those of the named one), nor does a call whose
retrieved turns have little room (multihop.HOP_MIN_ROOM_TOKENS); nothing stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tiermem.planner import multihop
from tiermem.planner.episodes import Keys, episode_keys, episode_spread
from tiermem.planner.feedback import Feedback, feedback
from tiermem.planner.multihop import Hop, second_round
from tiermem.tiers.turncache import TurnTable


@dataclass(frozen=True)
class Rounds:
    table: TurnTable
    boost: np.ndarray  # per turn, added to the first round's score
    keys: Keys | None
    hop: Hop | None
    spread: np.ndarray | None = None
    feedback: Feedback | None = None

    def reason(self, i: int) -> str:
        return ((self.keys.reason(i) if self.keys is not None else "")
                + (self.hop.reason(i, self.table) if self.hop is not None else "")
                + (self.feedback.reason(i) if self.feedback is not None else "")
                + (f", later in its episode {self.spread[i]:+.2f}"
                   if self.spread is not None and self.spread[i] else ""))


def more_rounds(table: TurnTable, query: str, cosine: np.ndarray | None, total: np.ndarray,
                eligible: np.ndarray, read: Callable[[list[int]], dict[int, str]], *,
                period: bool = False, room: int | None = None) -> Rounds | None:
    """The episode keys', the second round's and the spread's credit per turn, or None when
    none adds any. `period`: the query names a period (planner.dates); its answer is in
    that period, so no hop leads out of it. `room`: the tokens the retrieved turns may
    fill; below multihop.HOP_MIN_ROOM_TOKENS there is no hop."""
    keys = episode_keys(table, query, cosine)
    boost = keys.boost.copy() if keys is not None else np.zeros(len(table))
    hop_room = room is None or room >= multihop.HOP_MIN_ROOM_TOKENS
    hop = second_round(table, total + boost, eligible, query, read) if hop_room and not period else None
    if hop is not None:
        boost += hop.boost
    # pseudo-relevance feedback from the best turns so far (planner.feedback; off unless set)
    fb = feedback(table, total + boost, eligible, query, read)
    if fb is not None:
        boost += fb.boost
    spread = episode_spread(table, total + boost, eligible)
    if spread is not None:
        boost += spread
    if keys is None and hop is None and spread is None and fb is None:
        return None
    return Rounds(table, boost, keys, hop, spread, fb)
