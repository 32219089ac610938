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
  append what they need instead of starting over at once. A turn much larger than what
  is still to free (`much_larger`: a long tool output, a pasted document) does not go
  whole for a few dozen tokens: a shortenable one (a trimmed tool output, trimmed
  further) gives only what is still to free; another stays when the fewest of the next
  lowest-scored turns free it instead, with fewer tokens (`give_way`). Another query on
  the same log (nothing appended) gets the whole room, as before.

Invariants: pure functions of the candidates and their scores (no I/O); the budget stays
hard (planner.build counts the result exactly); nothing here depends on the query class
except through the ranking itself. The three constants were chosen on three of the four
LoCoMo dev conversations in the session eval and checked on the fourth (see README).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from tiermem.planner.candidates import Candidate

RANK_WEIGHT_EXPONENT = 1.0
EXTEND_MIN_VALUE_SHARE = 0.8
EPOCH_RESERVE_SHARE = 0.15
# A turn is much larger than what is still to free when it would keep at least this share
# of its tokens and at least SHORTEN_MIN_KEPT_TOKENS: dropped whole, it gave up more than
# twice what the reserve asked (at 500 tokens a 435-token tool output, the one turn the
# question needed, went to free 75). The floor keeps short chat turns (LoCoMo's are 20-80
# tokens) on the whole-turn rule: shortening one saves too little to matter.
SHORTEN_MIN_KEPT_SHARE = 0.5
SHORTEN_MIN_KEPT_TOKENS = 64


@dataclass
class GiveWay:
    """What a new epoch's reserve takes from the retrieved turns: `gone` leave whole;
    `shorten` (when not None) stays, `by` tokens shorter."""

    gone: list[Candidate] = field(default_factory=list)
    shorten: Candidate | None = None
    by: int = 0

    def freed(self) -> int:
        """The tokens it frees, as packed."""
        return sum(c.tokens for c in self.gone) + self.by


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


def _lowest_first(chosen: Sequence[Candidate]) -> list[Candidate]:
    return sorted(chosen, key=lambda c: (c.score, c.other, -c.position))


def much_larger(c: Candidate, need: int) -> bool:
    """Whether `c` is much larger than the `need` tokens still to free (it would keep
    SHORTEN_MIN_KEPT_SHARE of itself and SHORTEN_MIN_KEPT_TOKENS)."""
    kept = c.tokens - need
    return kept >= SHORTEN_MIN_KEPT_TOKENS and kept >= SHORTEN_MIN_KEPT_SHARE * c.tokens


def give_way(chosen: Sequence[Candidate], tokens: int,
             shortenable: Callable[[Candidate], bool] = lambda c: False) -> GiveWay:
    """What frees `tokens` of `chosen`: the lowest-scored turns whole, except
    a turn much larger than what is still to free when it comes: `shortenable` ones are
    shortened by that much (and nothing more goes); another stays when the fewest of
    the next lowest-scored turns, each not much larger themselves, free it with fewer
    tokens than it has (the lowest-scored such set of that size), else it goes whole."""
    order = _lowest_first(chosen)
    out = GiveWay()
    freed = 0
    for i, c in enumerate(order):
        need = tokens - freed
        if need <= 0:
            break
        if much_larger(c, need):
            if shortenable(c):
                out.shorten, out.by = c, need
                return out
            instead = _fewest(order[i + 1:], need, c.tokens)
            if instead is not None:
                out.gone.extend(instead)
                return out
        out.gone.append(c)
        freed += c.tokens
    return out


def _fewest(rest: Sequence[Candidate], need: int, under: int) -> list[Candidate] | None:
    """The fewest of `rest` (lowest-scored first) whose tokens reach `need` and stay under
    `under`, preferring the lowest-scored; None when no such set."""
    small = [c for c in rest if not much_larger(c, need)]
    for size in range(1, len(small) + 1):
        best: list[Candidate] | None = None
        # lowest-scored first: the first window of `size` turns that reaches `need`, by
        # the greedy largest-first check of each prefix's largest `size` turns
        for end in range(size, len(small) + 1):
            pick = sorted(small[:end], key=lambda c: -c.tokens)[:size]
            if sum(c.tokens for c in pick) >= need:
                best = pick
                break
        if best is not None:
            return best if sum(c.tokens for c in best) < under else None
    return None


def new_epoch_value(ranking: Sequence[Candidate], chosen: Sequence[Candidate], excess: int,
                    shortenable: Callable[[Candidate], bool] = lambda c: False) -> float:
    """What a new epoch would show of `ranking`: `chosen` less the turns that free
    `excess` tokens (the reserve it leaves; a shortened turn is still shown)."""
    gone = ({(c.conversation_id, c.position) for c in give_way(chosen, excess, shortenable).gone}
            if excess > 0 else set())
    return value(ranking, {(c.conversation_id, c.position) for c in chosen} - gone)


def enough(extended: float, new_epoch: float) -> bool:
    """Whether an extended context is worth enough of a new epoch's to go on with it."""
    return extended >= EXTEND_MIN_VALUE_SHARE * new_epoch
