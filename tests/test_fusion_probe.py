"""evals.fusion_probe: the offline packer packs as planner.pack does, leave-one-out never
chooses on the held-out sample, the tap puts planner.candidates back, and on a small
LoCoMo-format file the probe records every question's ranking and packs it as the planner did."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from convo_fixtures import SMALL_QA, one_session_locomo

from tiermem.evals import fusion_probe
from tiermem.evals.fusion_probe import EXTRA, PARTS, Row, by, choose, pack, recall, shipped_weights, tapped
from tiermem.planner import candidates

WIDTH = len(PARTS) + len(EXTRA)


def _row(scores: list[float], cost: list[int], room: int, *, eligible: list[bool] | None = None,
         evidence: list[int] | None = None, sample: str = "s", budget: int = 500) -> Row:
    n = len(scores)
    parts = np.zeros((n, WIDTH))
    parts[:, 0] = scores  # the cosine column: weight 1 in every setting
    return Row(sample, "q", budget, evidence or [0], np.arange(n), np.array(cost), parts,
               np.array(eligible if eligible is not None else [True] * n), room, 0.0)


@pytest.mark.parametrize(("scores", "cost", "room", "eligible", "shown"), [
    ([3, 2, 1], [40, 40, 40], 100, None, {0, 1}),  # best first until the room is used
    ([3, 2, 1], [120, 40, 40], 100, None, {1, 2}),  # a line that does not fit is skipped, not the end
    ([3, 2, 1], [40, 40, 40], 100, [False, True, True], {1, 2}),  # another layer shows turn 0
    ([1, 2, 3], [40, 40, 40], 40, None, {2}),  # order by score, not by position
])
def test_pack(scores: list[float], cost: list[int], room: int, eligible: list[bool] | None,
              shown: set[int]) -> None:
    assert pack(_row(scores, cost, room, eligible=eligible), shipped_weights()) == shown


def test_recall_is_the_mean_share_of_evidence_shown() -> None:
    rows = [_row([3, 2, 1], [40, 40, 40], 40, evidence=[0, 2]),  # half its evidence fits
            _row([3, 2, 1], [40, 40, 40], 40, evidence=[0])]  # all of it
    assert recall(rows, shipped_weights()) == pytest.approx(75.0)


def test_leave_one_out_chooses_on_the_other_samples_only() -> None:
    # each row: turn 0 leads on the cosine (setting "a"), turn 1 on the first extra column
    # (setting "b"), and the room holds one line. "b" wins on the held-out sample "h" by
    # so much that over all three samples it would be chosen; over the other two, "a" wins
    evidence = {"h": [[1], [1]], "x": [[0], [0]], "y": [[0], [1], [1]]}
    rows = []
    for sample, evs in evidence.items():
        for ev in evs:
            r = _row([1.0, 0.0], [40, 40], 40, evidence=ev, sample=sample)
            r.parts[:, len(PARTS)] = [-5.0, 5.0]
            rows.append(r)
    a = shipped_weights()
    b = a.copy()
    b[len(PARTS)] = 1.0
    groups = by(rows)
    assert choose({"a": a, "b": b}, groups, ["h", "x", "y"], "h") == "a"
    # the same choice with nothing held out (a sample no group has) goes the other way
    assert choose({"a": a, "b": b}, groups, ["h", "x", "y"], "none") == "b"


def test_the_tap_puts_the_planner_back_even_on_error() -> None:
    before = {n: getattr(candidates, n) for n in ("score_turns", "timeline_boost", "speaker_boost", "more_rounds")}
    with pytest.raises(RuntimeError), tapped({}):
        assert candidates.score_turns is not before["score_turns"]
        raise RuntimeError("boom")
    assert {n: getattr(candidates, n) for n in before} == before


TURNS = [
    ("Ana", "Hey Ben! I finally adopted a dog last week, a grey whippet called Pixel."),
    ("Ben", "Congrats! Whippets are fast. I started pottery classes on Tuesdays."),
    ("Ana", "Pottery sounds relaxing. Pixel loves the beach near Porto."),
    ("Ben", "My sister moved to Lyon for a job at a bakery."),
    ("Ana", "I am training for a half marathon in October. My knees hurt after long runs."),
    ("Ben", "Good luck! I made two bowls and a cup at pottery so far."),
    ("Ana", "My brother visited and we cooked paella together."),
    ("Ben", "I read a novel about sailors crossing the Atlantic."),
]
def _small_file(tmp_path: Path) -> Path:
    return one_session_locomo(tmp_path / "small-locomo.json", TURNS, SMALL_QA, ("small-1", "small-2"))


def test_probe_on_a_small_file_packs_as_the_planner_did(tmp_path: Path) -> None:
    out = fusion_probe.run(_small_file(tmp_path), [100], tmp_path / "data")
    assert out["contexts"] == 2 * len(SMALL_QA)  # every recall question ranked, in both samples
    # the offline packer, with the shipped weights, shows what the planner's block showed
    assert out["offline"] == out["planner"]
    assert 0 < out["planner"]["100"] < 100  # a budget that shows some evidence, not all
    assert set(out["folds"]) == {"small-1", "small-2"}
    for fold in out["folds"].values():
        assert set(fold) == {"fusion", *EXTRA}
        assert set(fold["fusion"]["weights"]) == set(PARTS)
    assert "held-out recall" in fusion_probe.table(out)


def test_main_writes_the_json_it_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "probe.json"
    assert fusion_probe.main(["--data", str(_small_file(tmp_path)), "--budgets", "100, 100",
                              "--data-root", str(tmp_path / "data"), "--json-out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["budgets"] == [100]  # the repeated budget asked once
    assert capsys.readouterr().out.strip() == fusion_probe.table(result)
