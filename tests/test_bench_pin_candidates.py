"""`python -m tiermem.evals.bench_pin_candidates` runs, reports both sides with their
plans and the keys the README's figures come from, and leaves the pin reads as shipped."""

from __future__ import annotations

import pytest

from tiermem.evals import bench_pin_candidates as bench
from tiermem.tiers.cold import ColdStore


def test_bench_reports_both_sides(capsys: pytest.CaptureFixture[str]) -> None:
    shipped = (ColdStore._PIN_CANDIDATES_INDEX, ColdStore._SUPERSEDED_PINS_INDEX)
    assert bench.main(["--turns", "120", "--calls", "2"]) == 0
    out = capsys.readouterr().out
    assert "120 turns (" in out and "2 calls a side" in out and "| append |" in out
    row = bench.run(120, None, 2)
    assert all(bench.OLD_INDEX in plan for plan in row["plans"]["sort"])  # the reads before m023
    assert [shipped[0] in row["plans"]["index"][0], shipped[1] in row["plans"]["index"][1]] == [True, True]
    for side in bench.SIDES:
        assert all(row[side][call]["p50_ms"] > 0 and row[side][call]["p99_ms"] >= row[side][call]["p50_ms"]
                   for call in bench.CALL_NAMES)
    assert set(row["ratio_p50"]) == set(bench.CALL_NAMES)
    assert shipped == (ColdStore._PIN_CANDIDATES_INDEX, ColdStore._SUPERSEDED_PINS_INDEX)  # restored after the run
