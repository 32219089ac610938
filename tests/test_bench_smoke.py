"""Every benchmark's quick mode runs end to end and returns its figures.

No timing assertions: a slow or shared machine must not fail the tests, it only makes
the figures worse. What is asserted: the keys the README table and `docs/bench.json`
rely on exist, and every latency, throughput and size is a positive number. Each bench
runs once (module-scoped fixtures); the combined `evals.bench` command is then run
with those results substituted for the sub-runs, so its wiring, table, JSON and
markdown are tested without measuring everything twice.

The sizes are below the quick mode's where a bench takes one (a smoke checks the harness
and its fields, not the figures): a 100-turn search store, a 150-turn conversation for
context(), a 2,000-turn scale database (quick: 300, 300 and 20,000). The embedder is the
session's ONNX export, so torch's thread count is left alone (setting it imports torch,
which nothing here runs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tiermem.evals import bench, bench_cold, bench_context, bench_hot, bench_scale
from tiermem.tiers.embed_onnx import FastEmbedder

DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo-dev.json"
DATA: Path | None = DEV if DEV.is_file() else None  # without it the benches use the labeled turn set
SEARCH_TURNS = 100  # bench_cold's search store
SCALE_TURNS = 2_000  # bench_scale's database, over its quick mode's 20 conversations
CONTEXT_TURNS = 150  # bench_context's conversation


def positive(d: dict[str, Any], *keys: str) -> None:
    for k in keys:
        v = d[k]
        assert isinstance(v, int | float) and not isinstance(v, bool) and v > 0, (k, v)


def dist_ok(d: dict[str, Any]) -> None:
    positive(d, "p50", "p99", "mean", "n")
    assert d["p50"] <= d["p99"]


@pytest.fixture(scope="module")
def cold_result(embedder: FastEmbedder) -> dict[str, Any]:
    return bench_cold.run(quick=True, data=DATA, embedder=embedder, search_turns=SEARCH_TURNS, torch_threads=None)


@pytest.fixture(scope="module")
def context_result(embedder: FastEmbedder) -> dict[str, Any]:
    return bench_context.run(quick=True, data=DATA, embedder=embedder, turns=CONTEXT_TURNS, torch_threads=None)


@pytest.fixture(scope="module")
def scale_result() -> dict[str, Any]:
    # the conversations' count stays the quick mode's
    return bench_scale.run(quick=True, turns=SCALE_TURNS, data=DATA, n_queries=10, n_appends=30)


@pytest.fixture(scope="module")
def hot_result() -> dict[str, Any]:
    return bench_hot.run(quick=True)


def test_bench_cold_quick(cold_result: dict[str, Any]) -> None:
    r = cold_result
    assert set(r["append"]) == {"normal", "full"}
    for a in r["append"].values():
        dist_ok(a["append_us"])
        dist_ok(a["raw_insert_us"])
        positive(a, "append_per_s", "raw_insert_per_s", "append_many_500_per_s", "ratio_p50", "ratio_p99")
        assert isinstance(a["p50_ok"], bool)
    if DATA is not None:
        positive(r["ingest"], "turns", "embedded", "turns_per_s", "embed_only_texts_per_s", "ratio_vs_embed_only")
        assert r["ingest"]["pending_after"] == 0
        assert r["ingest"]["embedded"] == r["ingest"]["turns"]  # every turn has its vector
    else:
        assert "skipped" in r["ingest"]
    s = r["search"]
    for name in ("embed", "hybrid", "hybrid_given_vector", "bm25", "dense"):
        dist_ok(s["ms"][name])
    assert s["vectors"] == s["turns"] and s["mean_hits"] > 0
    positive(s["ratio_vs_embed"], "hybrid", "bm25", "dense")
    assert len(r["load_avg"]["start"]) == 3 or r["load_avg"]["start"] == []
    assert len(bench_cold.rows(r)) >= 7


def test_bench_context_quick(context_result: dict[str, Any]) -> None:
    r = context_result
    dist_ok(r["context_ms"])
    dist_ok(r["search_ms"])
    assert set(r["context_ms_by_budget"]) == {str(b) for b in bench_context.BUDGETS}
    assert set(r["context_ms_by_kind"]) == {"recent", "targeted", "temporal", "default"}
    # a quick run does not wait for the load to settle, but says what it was
    assert r["settle"]["waited_s"] == 0.0 and isinstance(r["settle"]["settled"], bool)
    positive(r, "speed_at_measure")
    for d in [*r["context_ms_by_budget"].values(), *r["context_ms_by_kind"].values()]:
        dist_ok(d)
    assert set(r["timings_ms_median"]) == set(bench_context.TIMING_KEYS)
    positive(r["timings_ms_median"], "embed", "total")
    positive(r, "ratio_vs_search_p50", "calls")
    assert r["over_budget"] == 0  # the planner's hard budget, not a timing
    assert r["machine_speed"]["start"] > 0 and r["machine_speed"]["end"] > 0
    assert r["query_classes_by_kind"]["recent"].get("recent_recall", 0) > 0
    assert len(bench_context.rows(r)) >= 8


def test_bench_scale_quick(scale_result: dict[str, Any]) -> None:
    r = scale_result
    assert r["turns"] == SCALE_TURNS and r["conversations"] == bench_scale.QUICK[1]
    for part in ("full", "baseline"):
        for key in bench_scale.LABELS:
            dist_ok(r[part][key])
        dist_ok(r[part]["append_us"])
    positive(r, "db_bytes", "bytes_per_turn")
    positive(r["build"], "turns_per_s")
    # synthetic vectors went in through the store's own table: one per built turn
    assert r["integrity"]["vectors"] == r["turns"]
    assert r["integrity"]["messages"] > r["turns"]  # plus the timed appends, which have no vectors
    assert r["path"] is None  # the temp dir is gone
    # the saved JSON is what evals.bench reads back
    assert len(bench_scale.rows(json.loads(json.dumps(r)))) == len(bench_scale.LABELS) + 3


def test_bench_hot_quick(hot_result: dict[str, Any]) -> None:
    positive(hot_result, "admit_p50_us", "admit_p99_us", "read_2k_p50_us", "rebuild_10k_ms",
             "pipeline_zadd_hset_p50_us", "ping_p50_us", "admit_vs_pipeline")
    assert len(bench.hot_rows(hot_result)) == 3


def test_bench_combined(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, embedder: FastEmbedder,
                        cold_result: dict[str, Any], context_result: dict[str, Any],
                        scale_result: dict[str, Any], hot_result: dict[str, Any],
                        capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m tiermem.evals.bench --quick --json ... --markdown`, with the sub-runs' results
    taken from the fixtures above (the warm tier's quick run, without the model, is real)."""
    monkeypatch.setattr(bench_cold, "run", lambda *a, **k: dict(cold_result))
    monkeypatch.setattr(bench_context, "run", lambda *a, **k: dict(context_result))
    monkeypatch.setattr(bench_hot, "run", lambda *a, **k: dict(hot_result))
    real_run = bench.run
    monkeypatch.setattr(bench, "run", lambda quick, **k: real_run(quick, embedder=embedder, **k))
    scale_json = tmp_path / "scale.json"
    scale_json.write_text(json.dumps({**scale_result, "command": "python -m tiermem.evals.bench_scale --quick"}))
    out_json, out_md = tmp_path / "docs" / "bench.json", tmp_path / "docs" / "bench.md"
    rc = bench.main(["--quick", "--json", str(out_json), "--md", str(out_md), "--scale-json", str(scale_json),
                     "--markdown"])
    printed = capsys.readouterr().out
    report = json.loads(out_json.read_text())
    assert rc == 0, report["errors"]
    assert {"cold", "hot", "context"} <= set(report["results"])
    assert "warm" in report["results"] or "warm" in report["skipped"]
    assert report["meta"]["load_avg_start"] is not None and "scale" in report
    benches = {r["bench"] for r in report["rows"]}
    assert {"cold", "hot", "context"} <= benches
    md = out_md.read_text()
    assert md.strip() in printed
    assert md.count("\n| scale |") == len(bench_scale.LABELS) + 3
    assert "| context | context(), budget 2000 |" in md
    assert "load average" in md
