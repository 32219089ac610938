"""`python -m tiermem.evals.bench_service_load` at tiny sizes: two real `tiermem serve`
processes on one data dir, three customers round-robin over them; every route is
measured, and the data check passes (and would say so if it did not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem.evals import bench_service_load as bench

TURNS = 6  # per customer: every route comes up at the shares below


def test_two_processes_three_customers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # every turn asks for each route, so a few turns cover them all
    for share in ("CONTEXT_SHARE", "SEARCH_SHARE", "HISTORY_SHARE"):
        monkeypatch.setattr(bench, share, 1.0)
    monkeypatch.setattr(bench, "DELETE_SHARE", 0.3)
    r = bench.run_one(2, 3, turns=TURNS, work_dir=tmp_path)
    assert r["check"]["ok"], r["check"]["problems"]
    assert r["check"]["messages_checked"] > 0 and r["check"]["erased"] > 0
    assert r["turns"] == 3 * TURNS and r["hung_clients"] == 0
    assert set(r["routes"]) == set(bench.ROUTES) - {"conversations"}
    assert r["routes"]["append"]["n"] == 2 * 3 * TURNS
    assert not [x for x in r["non_2xx"] if x["status"] >= 500], r["non_2xx"]
    assert "| append |" in bench.render(r)


def test_the_check_finds_a_lost_message(tmp_path: Path) -> None:
    # the data check is not vacuous: an acknowledgement the store does not hold is named
    customers = [bench.Customer(0, "cust-000", "tok-load-check-0123456789")]
    conv = customers[0].new_conversation()
    with bench.servers(tmp_path / "data", 1, {customers[0].token: "cust-000"}, tmp_path) as urls:
        lb = bench.Balancer(urls, customers[0], bench.Recorder())
        try:
            bench._append(lb, customers[0], conv, "user", "kept")
        finally:
            lb.close()
        customers[0].expected[conv].append(("assistant", "never sent", 1))
        check = bench.check_data(urls, customers)
    assert not check["ok"] and "cust-000/c000-0000" in check["problems"][0], check
