"""`python -m tiermem.evals.bench_idempotency` runs on SQLite, times the three calls
against the baseline and measures the key table, and its appends land as it says: one
row per plain or keyed call, none per replay."""

from __future__ import annotations

import pytest

from tiermem.evals import bench_idempotency as bench

CALLS = 3


def test_bench_reports_the_three_calls(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--calls", str(CALLS)]) == 0
    out = capsys.readouterr().out
    assert f"sqlite: {CALLS} calls each" in out and "| replay |" in out
    (row,) = bench.run(CALLS, None)
    assert all(row[name]["p50_ms"] > 0 for name in bench.CALLS)
    assert row["ratio"]["plain"]["p50_ms"] == 1.0
    # warm-up: a keyed and a plain append each; timed: a plain and a keyed one each, replays add nothing
    assert row["messages"] == 2 * bench.WARM_UP_CALLS + 2 * CALLS
    assert row["key_table_bytes_per_keyed_append"] > 0
