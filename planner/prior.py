"""A length prior for recall questions: a turn that says more is more likely to hold what
a question asks after than a short reply ("Wow, that's cool!", "They loved it."), whose
few words embed close to any question on the same theme (the document length prior of
language-model retrieval: Kraaij, Westerveld and Hiemstra 2002).

`length_prior` gives each turn LENGTH_WEIGHT times the z-score of the logarithm of its
tokens among the conversation's turns, clipped to +-MAX_LENGTH_Z, when the retrieved turns'
room is small (LENGTH_MAX_ROOM_TOKENS): there a line is a slot, and the slot is best given
to a turn that says something; with more room a long line takes the place of two short
ones and recall drops. Off by default: it did not win held out (README, issue 19).

Invariants: pure; nothing when the query names a period; derived per call from the turn cache's token counts (nothing stored);
zero for every turn when off or when the turns are all of one length.
"""

from __future__ import annotations

import numpy as np

from tiermem.tiers.turncache import TurnTable

# On planner.rank's scale (z-score sums; the best turns score about 5-10). Off: chosen
# from {0.25, 0.5, 0.75} at the room gate below, leave-one-conversation-out, it won no
# held-out recall (78.4 pooled at 500 tokens either way) and lost temporal recall on one
# fold (README, issue 19); the harness sets it (`length`, `lenroom`).
LENGTH_WEIGHT = 0.0
MAX_LENGTH_Z = 2.0  # a very long turn (a pasted document) gets no more than this
# the most a turn longer than the average is lifted, in standard deviations (0: the prior
# only lowers the short turns, and no long line takes the room of two short ones)
MAX_LENGTH_UP_Z = 2.0
MIN_TOKENS = 1  # a turn's tokens as used in the logarithm (never 0)
# The prior applies only when the retrieved turns have at most this much room: with more,
# a longer line costs room that two short ones would use, and the shorter turns' evidence
# is lost (README: at 2,000 and 4,000 tokens every weight tried lost recall; at 1,000 it
# was a wash). 0: no limit. 600: budgets up to about 600 tokens (the room is the budget
# less the latest message and the fixed part, about 25-50 tokens).
LENGTH_MAX_ROOM_TOKENS = 600


def length_prior(table: TurnTable, room: int | None = None, *, period: bool = False) -> np.ndarray:
    """Per turn: LENGTH_WEIGHT * clip(z(log tokens)); zeros when off, when `room` (the
    tokens the retrieved turns may fill) is over LENGTH_MAX_ROOM_TOKENS, or when the query
    names a period (`period`: planner.dates found one), as planner.rounds' hop: the date
    credit says where the answer is, and a long turn of another day must not pass a short
    one of the named day."""
    n = len(table)
    if (not LENGTH_WEIGHT or n < 2 or period
            or (LENGTH_MAX_ROOM_TOKENS and room is not None and room > LENGTH_MAX_ROOM_TOKENS)):
        return np.zeros(n)
    lg = np.log(np.maximum(table.tokens.astype(np.float64), MIN_TOKENS))
    sd = float(lg.std())
    if sd < 1e-9:
        return np.zeros(n)
    return LENGTH_WEIGHT * np.clip((lg - float(lg.mean())) / sd, -MAX_LENGTH_Z, min(MAX_LENGTH_Z, MAX_LENGTH_UP_Z))
