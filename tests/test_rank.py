"""Turn scoring (planner/rank.py) and the query's embedding text (without_names): each
context component moves the turns it should, and only those."""

from __future__ import annotations

import numpy as np
import pytest

from tiermem.planner.candidates import without_names
from tiermem.planner.dates import DAY_S, TimeWindow
from tiermem.planner.rank import DATE, MISSING_Z, OUTSIDE_CREDIT, score_turns
from tiermem.tiers.turncache import TurnTable

T0 = 1_700_000_000.0


def table(n: int, *, groups: list[int] | None = None, created: list[float] | None = None,
          vectors: np.ndarray | None = None, has_vec: list[bool] | None = None) -> TurnTable:
    rng = np.random.default_rng(0)
    if vectors is None:
        vectors = rng.normal(size=(n, 8)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return TurnTable("c", np.arange(n, dtype=np.int64), np.full(n, 20, dtype=np.int64),
                     np.array(created if created is not None else [T0 + i for i in range(n)], dtype=np.float64),
                     np.array(groups if groups is not None else [0] * n, dtype=np.int64), vectors,
                     np.array(has_vec if has_vec is not None else [True] * n, dtype=bool))


def unit(i: int, dim: int = 8) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    v[i] = 1.0
    return v


def test_the_turn_next_to_a_match_outranks_an_equal_turn_far_away() -> None:
    # turns 3 and 12 are equally (un)like the query; turn 4 matches it strongly
    vecs = np.stack([unit(1)] * 20)
    vecs[4] = unit(0)
    t = table(20, vectors=vecs, groups=list(range(20)))  # one episode each: only neighbours differ
    s = score_turns(t, unit(0), [])
    assert s.total[3] > s.total[12]
    assert s.total[5] > s.total[12]
    assert "neighbours" in s.reason(3)


def test_turns_of_the_episode_with_the_matches_rank_higher() -> None:
    vecs = np.stack([unit(1)] * 30)
    vecs[[2, 3, 4]] = unit(0)  # episode 0 holds the matches
    t = table(30, vectors=vecs, groups=[0] * 10 + [1] * 10 + [2] * 10)
    s = score_turns(t, unit(0), [])
    assert s.total[8] > s.total[18] and s.total[8] > s.total[28]
    assert s.episode[8] > s.episode[18]


def test_a_named_day_lifts_that_days_turns_and_fades_outside_it() -> None:
    created = [T0 + d * DAY_S for d in range(10)]
    vecs = np.stack([unit(1)] * 10)
    t = table(10, created=created, groups=list(range(10)), vectors=vecs)
    day5 = TimeWindow(T0 + 5 * DAY_S - 10, T0 + 6 * DAY_S - 10, "day five")
    s = score_turns(t, unit(0), [], [day5])
    assert s.date[5] == pytest.approx(DATE)
    assert 0 < s.date[7] < s.date[6] <= DATE * OUTSIDE_CREDIT  # outside the day: less, fading
    assert s.date[0] == 0.0
    assert int(np.argmax(s.total)) == 5
    assert "'day five'" in s.reason(5)


def test_keyword_matches_rank_without_any_vectors() -> None:
    t = table(6, has_vec=[False] * 6)
    s = score_turns(t, unit(0), [(4, -9.0), (1, -3.0)])  # bm25: lower is better
    assert s.cosine is not None and np.isnan(s.cosine).all()
    assert int(np.argmax(s.total)) == 4
    assert s.bm25_rank == {4: 1, 1: 2}


def test_a_turn_without_a_vector_counts_as_below_average_not_as_the_worst() -> None:
    # cosines to the query spread evenly from 1 to -1: the worst turns are far below average
    angles = np.linspace(0, np.pi, 16)
    vecs = np.stack([np.cos(a) * unit(0) + np.sin(a) * unit(1) for a in angles]).astype(np.float32)
    t = table(16, vectors=vecs, has_vec=[True] * 15 + [False], groups=list(range(16)))
    s = score_turns(t, unit(0), [])
    base = s.total - s.neighbour - s.episode
    assert base[15] == pytest.approx(2 * MISSING_Z)  # missing in both retrievers
    assert base[15] > base.min()


def test_scores_are_deterministic() -> None:
    t = table(50, groups=[i // 10 for i in range(50)])
    q = unit(3)
    a = score_turns(t, q, [(7, -5.0), (9, -4.0)])
    b = score_turns(t, q, [(7, -5.0), (9, -4.0)])
    np.testing.assert_array_equal(a.total, b.total)


@pytest.mark.parametrize(
    ("query", "names", "expected"),
    [
        # a participant's name (and its possessive) says nothing about which turn is meant
        ("What did Caroline paint last week?", {"Caroline", "Mel"}, "What did paint last week?"),
        ("Where is Mel's new job?", {"Caroline", "Mel"}, "Where is new job?"),
        # whole words only: "Melody" is not "Mel"
        ("Did Melody call?", {"Mel"}, "Did Melody call?"),
        # case does not matter; longer names go first so "Anna Lee" is removed whole
        ("what did anna lee say", {"Anna", "Anna Lee"}, "what did say"),
        # a query that is only a name keeps its words: there is nothing else to embed
        ("Caroline?", {"Caroline"}, "Caroline?"),
        # no names in the conversation: unchanged
        ("when did we meet?", set(), "when did we meet?"),
    ],
)
def test_names_left_out_of_the_query_embedding(query: str, names: set[str], expected: str) -> None:
    assert without_names(query, frozenset(names)) == expected


def test_a_turn_of_the_named_period_outranks_good_matches_of_other_periods() -> None:
    # "what did I do in week 3?": five turns of other weeks are about as like the query as
    # an answer usually is (half its direction); turn 21, sent in the named week, shares
    # nothing with it. The named period decides. (A turn that alone matches the query
    # outright still wins: the date credit is a weight, not a filter.)
    n = 40
    created = [T0 + d * DAY_S for d in range(n)]
    half = (unit(0) + unit(1)) / np.linalg.norm(unit(0) + unit(1))
    vecs = np.stack([unit(1)] * n)
    for i in (2, 9, 30, 33, 38):
        vecs[i] = half
    t = table(n, created=created, groups=list(range(n)), vectors=vecs)
    week3 = TimeWindow(T0 + 20 * DAY_S - 10, T0 + 27 * DAY_S - 10, "week three")
    s = score_turns(t, unit(0), [], [week3])
    assert all(s.total[21] > s.total[i] for i in (2, 9, 30, 33, 38))
    assert s.total[30] > s.total[5]  # outside the period, the matches still lead
