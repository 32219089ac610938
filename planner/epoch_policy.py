"""When an epoch goes on, and how much room a new one leaves: by marginal evidence.

A flow of questions (a user asking one thing after another about a long history) makes
every call a broad recall. Filling the whole room for each question and rebuilding the
context the next time costs a full miss per question; extending the previous context
instead costs only what is appended, but shows what earlier questions needed. Two rules
decide between them on what the question's own ranking says:

- **Value of a layout.** The retrieved candidates of this call, best first, weigh
  `1 / (rank + 1) ** RANK_WEIGHT_EXPONENT` each (the chance that a candidate holds the
  evidence falls about that fast with its rank: on the LoCoMo session, 14% for the top
  five, 3% for the next five, under 1% past twenty). A layout's value is the weight of
  the candidates it shows, wherever they sit: a turn an earlier question brought in and
  the context still shows counts as fully as one appended now, and costs nothing.
- **Extend on a new user message** when the extended context (what it keeps, plus the
  best of this call's turns that fit the room left) is worth at least
  `EXTEND_MIN_VALUE_SHARE` of the context a new epoch would send (planner.build keeps
  its rule on tokens too: either suffices).
- **A new epoch on a new user message leaves room** (`EPOCH_RESERVE_SHARE` of the
  budget) by leaving out its lowest-scored retrieved turns, so the next questions can
  append what they need instead of starting over at once. Another query on the same log
  (nothing appended) gets the whole room, as before.

Invariants: pure functions of the candidates and their scores (no I/O); the budget stays
hard (planner.build counts the result exactly); nothing here depends on the query class
except through the ranking itself. The three constants were chosen on three of the four
LoCoMo dev conversations in the session eval and checked on the fourth (see README).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tiermem.planner.candidates import Candidate

RANK_WEIGHT_EXPONENT = 1.0
EXTEND_MIN_VALUE_SHARE = 0.8
EPOCH_RESERVE_SHARE = 0.15


def ranked(*pools: Iterable[Candidate]) -> list[Candidate]:
    """Candidates of one call, best first (the order retrieval scored them in)."""
    return sorted((c for pool in pools for c in pool), key=lambda c: (-c.score, *c.tie_order()))


def value(ranking: Sequence[Candidate], shown: set[tuple[str, int]]) -> float:
    """The weight of the ranked candidates that `shown` holds."""
    return sum(1.0 / (i + 1) ** RANK_WEIGHT_EXPONENT
               for i, c in enumerate(ranking) if (c.conversation_id, c.position) in shown)


def reserve_tokens(budget: int) -> int:
    """Tokens a new epoch on a new user message leaves free for the next calls' appends."""
    return int(budget * EPOCH_RESERVE_SHARE)


def lowest(chosen: Sequence[Candidate], tokens: int) -> list[Candidate]:
    """The lowest-scored of `chosen` whose tokens together reach `tokens` (all of them
    when they do not)."""
    out: list[Candidate] = []
    freed = 0
    for c in sorted(chosen, key=lambda c: (c.score, c.other, -c.position)):
        if freed >= tokens:
            break
        out.append(c)
        freed += c.tokens
    return out


def new_epoch_value(ranking: Sequence[Candidate], chosen: Sequence[Candidate], excess: int) -> float:
    """What a new epoch would show of `ranking`: `chosen` less the lowest-scored turns
    that free `excess` tokens (the reserve it leaves)."""
    gone = {(c.conversation_id, c.position) for c in lowest(chosen, excess)} if excess > 0 else set()
    return value(ranking, {(c.conversation_id, c.position) for c in chosen} - gone)


def enough(extended: float, new_epoch: float) -> bool:
    """Whether an extended context is worth enough of a new epoch's to go on with it."""
    return extended >= EXTEND_MIN_VALUE_SHARE * new_epoch
