"""planner.density: the retrieved pool is offered to the packing by value per token; at
weight 0 it is rank order exactly, and it only ever permutes the pool."""

from __future__ import annotations

import pytest

from tiermem.planner import density
from tiermem.planner.candidates import Candidate
from tiermem.planner.density import REFERENCE_LINE_TOKENS, density_key, pack_order


def _cand(position: int, score: float, tokens: int) -> Candidate:
    return Candidate("retrieved", "c", position, score, "test", f"[x] line {position}", tokens=tokens)


@pytest.mark.parametrize(("weight", "order"), [
    (0.0, [0, 1, 2]),  # off: rank order, untouched
    (1.0, [1, 0, 2]),  # the short line scoring a little less goes before the long one
    (0.1, [0, 1, 2]),  # a weak weight does not overturn a 0.3 score gap
])
def test_pack_order(weight: float, order: list[int]) -> None:
    pool = [_cand(0, 10.0, 4 * REFERENCE_LINE_TOKENS), _cand(1, 9.7, REFERENCE_LINE_TOKENS // 2),
            _cand(2, 2.0, 5)]  # the last: short, but far below the others
    got = pack_order(pool, weight)
    assert [c.position for c in got] == order
    assert sorted(id(c) for c in got) == sorted(id(c) for c in pool)  # a permutation
    assert [c.score for c in pool] == [10.0, 9.7, 2.0]  # scores unchanged


@pytest.mark.parametrize(("tokens", "sign"), [
    (REFERENCE_LINE_TOKENS, 0),  # the reference length keeps its score
    (2 * REFERENCE_LINE_TOKENS, -1),  # longer: lower
    (REFERENCE_LINE_TOKENS // 3, 1),  # shorter: higher
    (0, 1),  # an empty line counts as one token, no log(0)
])
def test_density_key(tokens: int, sign: int) -> None:
    got = density_key(5.0, tokens, 1.0) - 5.0
    assert (got > 1e-12) - (got < -1e-12) == sign


def test_the_module_weight_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = [_cand(0, 10.0, 4 * REFERENCE_LINE_TOKENS), _cand(1, 9.7, REFERENCE_LINE_TOKENS // 2)]
    monkeypatch.setattr(density, "DENSITY_WEIGHT", 0.0)
    assert [c.position for c in pack_order(pool)] == [0, 1]
    monkeypatch.setattr(density, "DENSITY_WEIGHT", 1.0)
    assert [c.position for c in pack_order(pool)] == [1, 0]
