"""`python -m tiermem.evals.bench_pending_seek` runs, reports both sides with their plans,
and leaves the store's per-conversation read as shipped."""

from __future__ import annotations

import pytest

from tiermem.evals import bench_pending_seek as bench
from tiermem.tiers.cold import ColdStore


def test_bench_reports_both_sides(capsys: pytest.CaptureFixture[str]) -> None:
    shipped = ColdStore._CONV_PENDING_INDEX
    assert bench.main(["--turns", "120", "--calls", "2"]) == 0
    out = capsys.readouterr().out
    assert "120 turns, 2 calls a side" in out and "| append |" in out
    row = bench.run(120, None, 2)
    assert "sqlite_autoindex_turns" in row["plans"]["walk"][0]  # the primary key: the walk
    assert shipped in row["plans"]["seek"][0]
    for side in bench.SIDES:
        assert all(row[side][call]["p50_ms"] > 0 for call in ("one_pending", "none_pending", "append"))
    assert shipped == ColdStore._CONV_PENDING_INDEX  # restored after the run
