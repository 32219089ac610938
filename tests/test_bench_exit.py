"""`evals.bench_exit` runs end to end in a quick size and reports a clean exit for each
case, with the keys its printout and the README rely on (no timing assertions).

One run, through the command (`main`): its result is taken on its way to the printout,
so the printout's path and exit status are those of the run whose figures are checked."""

from __future__ import annotations

from typing import Any

import pytest

from tiermem.evals import bench_exit


def test_quick_run_reports_a_clean_exit_for_each_case(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    results: list[dict[str, Any]] = []
    real_run = bench_exit.run

    def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        results.append(real_run(*args, **kwargs))
        return results[-1]

    monkeypatch.setattr(bench_exit, "run", run)
    # the printout's path, and its exit status (0: every run exited cleanly)
    assert bench_exit.main(["--chat", "200", "--long", "20", "--reps", "1", "--settle", "0.2"]) == 0
    (res,) = results
    assert res["reps"] == 1 and res["settle_s"] == 0.2
    assert set(res["cases"]) == {"chat", "long"}
    for kind, c in res["cases"].items():
        assert c["clean"] and c["rcs"] == [0], (kind, c["runs"])
        assert c["exit_wait_s"] is not None and c["exit_wait_s"]["median"] >= 0
        assert 0 <= c["pending"][0] <= c["turns"] + 1  # the hello turn too
    assert res["cases"]["chat"]["turns"] == 200 and res["cases"]["long"]["turns"] == 20
    printed = capsys.readouterr().out
    assert "chat" in printed and "long" in printed and "exit wait" in printed
