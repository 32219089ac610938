"""The order in which retrieved candidates are offered to the packing: by value per token.

The packing (planner.pack.Packing.take) walks the retrieved pool in order and takes what
fits. Rank order spends a small budget on a few long turns; a turn half as long that
scores nearly as well holds about as much evidence for half the room. `pack_order`
offers the pool by

    key = score - DENSITY_WEIGHT * ln(tokens / REFERENCE_LINE_TOKENS)

so a line of REFERENCE_LINE_TOKENS keeps its score, a longer one ranks a little lower
and a shorter one a little higher (on planner.rank's scale: the best turns score about
5-10, so a weight of 1 moves a line twice the reference length down by 0.69).

Invariants: pure; a permutation of its input (nothing added, nothing dropped, scores
unchanged: the plan still reports each turn's own score, and the lowest-scored line is
the first to go when the exact count is over); DENSITY_WEIGHT = 0 keeps rank order
exactly; ties keep the input's order (a stable sort).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tiermem.planner.candidates import Candidate

# The weight of a line's length against its score (0: rank order). Off: on the LoCoMo dev
# conversations 0.25, 0.5, 1 and 2 each lost recall at 500 tokens (short lines are often
# small talk) for at most +0.7 points at 1,000-2,000 (README, issue 19); the recall harness
# sets it (evals/recall_rounds.py, knob `density`).
DENSITY_WEIGHT = 0.0
REFERENCE_LINE_TOKENS = 30  # about a LoCoMo-like turn's line: neither lifted nor lowered
MIN_LINE_TOKENS = 1  # a line's token count as used in the logarithm (never 0)


def density_key(score: float, tokens: int, weight: float | None = None) -> float:
    """The packing key of a line: its score less `weight` times its length's log ratio."""
    w = DENSITY_WEIGHT if weight is None else weight
    return score - w * math.log(max(MIN_LINE_TOKENS, tokens) / REFERENCE_LINE_TOKENS)


def pack_order(cands: Sequence[Candidate], weight: float | None = None) -> list[Candidate]:
    """`cands` (best first) in packing order: by density_key, highest first, stable."""
    w = DENSITY_WEIGHT if weight is None else weight
    if not w:
        return list(cands)
    return sorted(cands, key=lambda c: -density_key(c.score, c.tokens, w))
