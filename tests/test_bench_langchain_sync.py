"""`python -m tiermem.evals.bench_langchain_sync` runs and reports both sides: the shipped
sync and the pre-d47e36d baseline (a whole-log read added to each sync), whose ratio is
the README's figure."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("langchain_core")
from tiermem.evals import bench_langchain_sync


@pytest.mark.parametrize("copies", [
    [],            # the objects the last sync saw, one message more
    ["--copies"],  # a checkpoint's copies of them
])
def test_the_bench_reports_both_sides(capsys: pytest.CaptureFixture[str], copies: list[str]) -> None:
    assert bench_langchain_sync.main(["--messages", "40", "--rounds", "3", "--json", *copies]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["messages"] == 40 and r["rounds"] == 3 and r["copies"] == bool(copies)
    for side in ("sync", "before"):
        assert 0 < r[side]["p50"] <= r[side]["p99"]
    assert r["ratio_before_over_sync"] > 0


@pytest.mark.parametrize("argv", [
    ["--messages", "0"],   # no stored conversation to sync against
    ["--rounds", "-2"],    # a negative count
    ["--rounds", "x"],     # not a number
])
def test_bad_counts_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        bench_langchain_sync.main(argv)
    assert e.value.code == 2
    assert argv[0] in capsys.readouterr().err
