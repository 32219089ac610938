"""evals.ltr_probe: leave-one-out never fits a model on the held-out sample's rows, the
offline packer ranks by a model's scores with the shipped score breaking ties, the
per-turn features read what they say, and on a small LoCoMo-format file the probe runs
end to end and its cache gives the same figures."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from convo_fixtures import SMALL_QA, one_session_locomo
from test_fusion_probe import TURNS

from tiermem.evals import ltr_probe
from tiermem.evals.fusion_probe import EXTRA, PARTS, Row, pack
from tiermem.evals.ltr_probe import FEATURES, Turns, features, leave_one_out, prepare
from tiermem.tiers.turncache import TurnTable

WIDTH = len(PARTS) + len(EXTRA)
COSINE = PARTS.index("cosine")


def _table(n: int, groups: list[int] | None = None, tokens: list[int] | None = None) -> TurnTable:
    return TurnTable("c", np.arange(n, dtype=np.int64), np.array(tokens or [10] * n, dtype=np.int64),
                     np.zeros(n), np.array(groups or [0] * n, dtype=np.int64), None, np.zeros(n, dtype=bool),
                     names=frozenset({"Ana"}))


def _row(cosine: list[float], *, sample: str = "s", evidence: list[int] | None = None, room: int = 40,
         question: str = "q", budget: int = 500) -> Row:
    n = len(cosine)
    parts = np.zeros((n, WIDTH))
    parts[:, COSINE] = cosine
    return Row(sample, question, budget, evidence or [0], np.arange(n), np.full(n, 40), parts,
               np.ones(n, dtype=bool), room, 0.0)


def test_leave_one_out_fits_on_the_other_samples_only() -> None:
    # each sample's turns carry a cosine no other sample's do: what a fold's model was
    # fitted on names the samples its rows came from
    marks = {"h": 7.0, "x": 3.0, "y": 5.0}
    turns = {s: Turns.of(_table(3), {0: "a", 1: "b", 2: "c"}, {}) for s in marks}
    rows = [_row([m, m - 1, m - 2], sample=s, evidence=[e]) for s, m in marks.items() for e in (0, 1)]
    seen: list[set[float]] = []

    def fit(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        seen.append(set(np.round(x[:, FEATURES.index("cosine")], 6).tolist()))
        assert len(y) == len(x) == 2 * 2 * 3  # two samples' two rows of three turns
        return lambda z: -z[:, FEATURES.index("cosine")]  # the worst cosine first

    out = leave_one_out(prepare(rows, turns), [500], {"m": fit})
    # the folds run in sample order (h, x, y): each fit saw the other two samples' turns only
    assert seen == [{m - k for s, m in marks.items() if s != held for k in range(3)} for held in ("h", "x", "y")]
    assert out["samples"] == ["h", "x", "y"]
    # the shipped weights show turn 0 (half the rows' evidence); the model turn 2 (none)
    assert out["pooled"]["shipped"]["500"] == pytest.approx(50.0)
    assert out["pooled"]["m"]["500"] == pytest.approx(0.0)


@pytest.mark.parametrize(("scores", "cosine", "shown"), [
    ([0, 0, 1], [3, 2, 1], {2}),  # the model's best first, whatever the shipped score says
    ([1, 1, 0], [1, 2, 3], {1}),  # a tie on the model's score: the shipped score's better one
    ([-np.inf, -np.inf, 5], [3, 2, 1], {2}),  # the candidates first; the rest by the shipped score
])
def test_pack_by_scores_breaks_ties_by_the_shipped_score(scores: list[float], cosine: list[float],
                                                         shown: set[int]) -> None:
    assert pack(_row(cosine), scores=np.array(scores, dtype=float)) == shown


def test_pack_without_weights_or_scores_is_refused() -> None:
    with pytest.raises(TypeError, match="weights or scores"):
        pack(_row([1.0]))


def test_features_read_the_turns() -> None:
    texts = {0: "We went camping by the lake.", 1: "Did you like it?", 2: "[image: a tent] The lake was cold.",
             3: "Ana said hello."}
    turns = Turns.of(_table(4, groups=[0, 0, 1, 1], tokens=[6, 4, 9, 3]), texts,
                     {0: "statement", 1: "question", 3: "chitchat"})
    r = _row([1.0, 0.0, 3.0, 2.0], question="Where did Ana go camping near a lake?")
    r.parts[:, PARTS.index("speaker")] = [0, 2.0, 0, 0]  # the named speaker's turn
    f = {name: features(r, turns)[:, j] for j, name in enumerate(FEATURES)}
    assert f["total"].tolist() == [1.0, 2.0, 3.0, 2.0]  # the cosine plus the speaker's 2 (nothing else set)
    assert f["gap"][2] == 0.0 and f["gap"][0] < 0  # turn 2 is the best: no gap
    assert f["rank_cosine"].tolist() == pytest.approx(np.log1p([2, 3, 0, 1]).tolist())
    assert f["log_tokens"].tolist() == pytest.approx(np.log1p([6, 4, 9, 3]).tolist())
    assert f["intent_question"].tolist() == [0, 1, 0, 0]
    assert f["intent_statement"].tolist() == [1, 0, 0, 0]
    assert f["named"].tolist() == [0, 1, 0, 0] and f["query_names"].tolist() == [1, 1, 1, 1]
    assert f["ends_ask"].tolist() == [0, 1, 0, 0]
    assert f["image"].tolist() == [0, 0, 1, 0]
    # sessions {0, 1} and {2, 3}: each turn against its session's best
    assert f["session_best"].tolist() == [2.0, 2.0, 3.0, 3.0]
    assert f["session_gap"].tolist() == [-1.0, 0.0, 0.0, -1.0]
    # the query's words (not the name "Ana", not stopwords): camping, lake, ...; turn 0
    # holds camping and lake, turn 2 lake only, turn 1 none
    assert f["coverage"][0] > f["coverage"][2] > 0 == f["coverage"][1]
    # the neighbours' best score: turn 0 has turn 1 only, turn 2 sits between two 2s
    assert f["neighbour_best"].tolist() == [2.0, 3.0, 2.0, 3.0]


def test_probe_on_a_small_file_and_its_cache(tmp_path: Path) -> None:
    data = one_session_locomo(tmp_path / "small-locomo.json", TURNS, SMALL_QA, ("small-1", "small-2", "small-3"))
    cache = tmp_path / "rows.pkl"
    out = ltr_probe.run(data, [100], tmp_path / "data", cache=cache)
    assert out["contexts"] == 3 * len(SMALL_QA)  # every recall question ranked, in each sample
    assert set(out["folds"]) == {"small-1", "small-2", "small-3"}
    assert set(out["pooled"]) == {"shipped", *ltr_probe.models()}
    assert cache.exists()
    # the second run reads the cache: the same figures (timings aside)
    again = ltr_probe.run(data, [100], tmp_path / "data", cache=cache)
    assert {k: v for k, v in again.items() if k != "fit_seconds"} == {k: v for k, v in out.items() if k != "fit_seconds"}
    assert "held-out" in ltr_probe.table(out)
    json.dumps(out)  # the --json-out form
