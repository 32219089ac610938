"""`python -m tiermem.evals.bench_turncache_load` runs and reports both sides."""

from __future__ import annotations

import pytest

from tiermem.evals import bench_turncache_load as bench
from tiermem.tiers import turncache


def test_bench_reports_both_sides(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(turncache, "FACTS_PAGE_TURNS", 40)  # several pages of the 150 turns
    monkeypatch.setattr(bench, "SETTLE_S", 0.02)
    assert bench.main(["--turns", "150", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "| 150 |" in out and out.count("\n") == 3
    row = bench.measure(150, 1)
    for side in bench.SIDES:
        assert row[side]["first_ms_median"] > 0 and row[side]["other_max_ms_median"] > 0
        assert row[side]["load_peak_mb"] > 0 and row[side]["entry_mb"] > 0
    assert row["page_turns"] == 40 and turncache.FACTS_PAGE_TURNS == 40  # restored after each side
