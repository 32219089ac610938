"""`evals.bench_exit` runs end to end in a quick size and reports a clean exit for each
case, with the keys its printout and the README rely on (no timing assertions)."""

from __future__ import annotations

from tiermem.evals import bench_exit


def test_quick_run_reports_a_clean_exit_for_each_case() -> None:
    res = bench_exit.run(chat=200, long=20, reps=1, settle_s=0.2)
    assert set(res["cases"]) == {"chat", "long"}
    for kind, c in res["cases"].items():
        assert c["clean"] and c["rcs"] == [0], (kind, c["runs"])
        assert c["exit_wait_s"] is not None and c["exit_wait_s"]["median"] >= 0
        assert 0 <= c["pending"][0] <= c["turns"] + 1  # the hello turn too
    # the printout's path, and its exit status (0: every run exited cleanly)
    assert bench_exit.main(["--chat", "50", "--long", "5", "--reps", "1", "--settle", "0"]) == 0
