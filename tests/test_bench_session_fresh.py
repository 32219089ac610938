"""`python -m tiermem.evals.bench_session_fresh` runs, reports both sides with their plans
(the walk of the primary key against the seek of turns_by_session), and answers alike
on both."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem.evals import bench_session_fresh as bench
from tiermem.evals.huge_store import build
from tiermem.tiers.schema import SESSION_TURNS_INDEX


def test_bench_reports_both_sides(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--turns", "120", "--calls", "2"]) == 0
    out = capsys.readouterr().out
    assert "120 turns in 12 sessions, 2 calls a side" in out and "| views_page |" in out
    row = bench.run(120, None, 2)
    assert "sqlite_autoindex_turns" in row["plans"]["walk"][0]  # the primary key: the walk
    assert SESSION_TURNS_INDEX in row["plans"]["seek"][0]
    for side in bench.SIDES:
        assert all(row[side][call]["p50_ms"] > 0 for call in bench.CALLS)


def test_a_data_dir_without_sessions_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    build(data, 40)
    with pytest.raises(SystemExit, match="has no sessions to measure"):
        bench.main(["--data", str(data), "--calls", "1"])
