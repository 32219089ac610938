"""Small versions of every eval, end to end, to prove the harness (the full runs are manual).

- LoCoMo: one sample, ten questions, two budgets; then the CLI on the same data dir
  (reusing the ingested conversation) with one budget and --json;
- cost: a 30-turn replay;
- pressure: one generated conversation of ~120 turns;
- the pieces the numbers rest on: date parsing, answer normalization, packing, prompt
  cache prefixes, the generator's hygiene, the markdown report and the plots.

The hot tier is used when it starts (eviction on), the tiermem method when Memory has
`context()`; otherwise the baselines are proven alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tiermem.evals import pressure as pressure_mod
from tiermem.evals.baselines import (
    BASELINES,
    OpenedMemory,
    close_memory,
    open_memory,
    pack_ranked,
    tail_truncation,
    tiermem_available,
)
from tiermem.evals.cli import eval_group
from tiermem.evals.cost import canonical, common_prefix_chars, common_prefix_messages, run_cost
from tiermem.evals.locomo import answer_covered, normalize, parse_session_date, run_locomo
from tiermem.evals.plots import cost_curves, latency_histogram, recall_vs_budget
from tiermem.evals.report import render_markdown
from tiermem.tiers.embed_onnx import FastEmbedder

DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo-dev.json"
needs_dev = pytest.mark.skipif(not DEV.is_file(), reason=f"LoCoMo dev file not found at {DEV.resolve()}")

FIELDS = (
    "evidence_recall",
    "by_category",
    "answer_coverage",
    "mean_context_tokens",
    "full_context_tokens",
    "context_ms",
    "questions",
    "skipped_evidence_ids",
)


def _open(path: Path | None, embedder: FastEmbedder) -> OpenedMemory:
    opened = open_memory(
        path, hot=True, embedder=embedder
    )  # falls back to cold-only if the hot tier can't start
    return opened


@pytest.fixture
def opened(tmp_path: Path, shared_vectors: FastEmbedder) -> Iterator[OpenedMemory]:
    # LoCoMo's and the generator's turns recur across these tests: each text's vector is
    # computed once a session (conftest.shared_vectors)
    o = _open(tmp_path / "data", shared_vectors)
    try:
        yield o
    finally:
        o.stop_redis = True
        close_memory(o)


def _check_fields(entry: dict[str, Any]) -> None:
    for f in FIELDS:
        assert f in entry, f
    assert set(entry["by_category"]) == {"1", "2", "3", "4", "5"}
    assert set(entry["context_ms"]) == {"p50", "p99"}


def _in_unit(x: Any) -> bool:
    return x is None or 0.0 <= float(x) <= 1.0


# ---------------------------------------------------------------------------------------
# LoCoMo


@needs_dev
def test_locomo_small_run_then_cli_reuses_the_data_dir(
    tmp_path: Path, shared_vectors: FastEmbedder
) -> None:
    data_dir = tmp_path / "data"
    o = _open(data_dir, shared_vectors)  # LoCoMo's first conversation, embedded once a session
    has_context = tiermem_available(o.memory)
    try:
        run = run_locomo(o.memory, DEV, [300, 1000], limit_samples=1, limit_questions=10, hot=o.hot)
    finally:
        o.stop_redis = False  # the CLI below reuses the data dir (and its Redis)
        close_memory(o)
    res = run.result
    json.dumps(res)  # JSON-able
    assert res["hot_tier"] == o.hot
    assert set(res["budgets"]) == {"300", "1000"}
    for b, entry in res["budgets"].items():
        budget = int(b)
        assert set(entry["baselines"]) == set(BASELINES)
        for name, e in entry["baselines"].items():
            _check_fields(e)
            assert e["questions"] == 10
            assert _in_unit(e["evidence_recall"]) and _in_unit(e["answer_coverage"])
            assert all(_in_unit(v) for v in e["by_category"].values())
            assert e["token_mismatches"] == 0
            if name == "full_context":
                assert (
                    e["evidence_recall"] == 1.0
                )  # every resolved evidence turn is in the whole conversation
                assert e["mean_context_tokens"] == e["full_context_tokens"] > 5000
            else:
                assert e["max_context_tokens"] <= budget
                assert e["budget_violations"] == 0
        # more budget never hurts a packing baseline on average
        assert entry["baselines"]["tail"]["mean_context_tokens"] <= budget
        assert entry["available"] == has_context  # the planner runs whenever Memory has context()
        if entry["available"]:
            _check_fields(entry)
            assert _in_unit(entry["evidence_recall"])
            assert entry["questions"] == 10
            assert entry["max_context_tokens"] <= budget
            assert entry["budget_violations"] == 0
            assert entry["token_mismatches"] == 0
    assert run.latencies[1000]["tail"]

    # the CLI on the same data dir: the ingested conversation is reused, one budget puts
    # the fields at the top level too, and stdout is exactly one JSON object
    result = CliRunner().invoke(
        eval_group,
        [
            "locomo",
            "--data",
            str(DEV),
            "--budget",
            "500",
            "--limit-samples",
            "1",
            "--limit-questions",
            "3",
            "--method",
            "tail",
            "--method",
            "bm25_topk",
            "--json",
            "--quiet",
            "--data-dir",
            str(data_dir),
        ],
    )
    try:
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        assert out["reused_conversations"] == 1
        assert out["budget"] == 500 and "500" in out["budgets"]
        for f in FIELDS:
            assert f in out
        assert set(out["baselines"]) == {"tail", "bm25_topk"}
        assert out["baselines"]["tail"]["max_context_tokens"] <= 500
    finally:
        from tiermem.tiers.redis_server import EmbeddedRedis

        EmbeddedRedis(data_dir).stop()


def test_session_dates_parse_tolerantly() -> None:
    base = parse_session_date("1:56 pm on 8 May, 2023")
    assert base is not None
    assert parse_session_date("13:56 on 8 May 2023") == base
    assert parse_session_date("1:56pm on May 8, 2023") == base
    assert parse_session_date("1:56 P.M. on 8th May, 2023") == base
    assert parse_session_date("12:19 am on 4 January, 2024") == parse_session_date("2024-01-04 00:19")
    assert parse_session_date("8 Sept, 2023") is not None
    assert parse_session_date("sometime last year") is None
    assert parse_session_date(None) is None


def test_answer_normalization() -> None:
    assert normalize("The Roman  Empire!") == "roman empire"
    assert answer_covered("7 May 2023", "She went on 7 May, 2023 to the group.")
    assert answer_covered("2022", "in 20221") is False  # whole words only
    assert answer_covered("Psychology, counseling", "psychology counseling certification")
    assert answer_covered("...", "anything") is None


# ---------------------------------------------------------------------------------------
# Cost


def test_prefix_cache_accounting() -> None:
    a = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    b = [*a, {"role": "user", "content": "z"}]
    ca, cb = [canonical(m) for m in a], [canonical(m) for m in b]
    assert common_prefix_messages(ca, cb) == 2
    assert common_prefix_messages(cb[1:], cb) == 0
    assert canonical({"content": "x", "role": "user"}) == canonical({"role": "user", "content": "x"})
    assert common_prefix_chars("abcd", "abxd") == 2 and common_prefix_chars("", "a") == 0
    assert common_prefix_chars("abc", "abcd") == 3


@needs_dev
def test_cost_replay_small(opened: OpenedMemory, tmp_path: Path) -> None:
    trace: list[dict[str, Any]] = []
    run = run_cost(opened.memory, DEV, sample=0, budget=300, turns=30, hot=opened.hot, trace=trace)
    res = run.result
    json.dumps(res)
    json.dumps(trace)
    # the lower bound (evals.bound): within the budget, never above what a sliding tail bills
    bound = res["methods"]["bound"]
    assert bound["max_context_tokens"] <= 300 and bound["budget_violations"] == 0
    assert bound["total_billed_openai"] <= res["methods"]["tail"]["total_billed_openai"]
    assert len(bound["fill_curve"]) == 91 and "series" not in bound
    # the floor (evals.floor): no method that carries every new message and keeps
    # min(history, budget) tokens bills less under either provider (the bounds' cheapest
    # restarts at 300 tokens keep less: tests/test_cost_floor.py checks them at 2,000)
    floor = res["methods"]["floor"]
    assert floor["keep_tokens_openai"] == 300  # never more than the budget
    # (tiermem's contexts at 300 tokens keep less than that once rendered: the floor stays
    # under them only by reading its 1,024-token gift, which the caches' expiry at the
    # sessions' boundary takes away: compared inside the TTL, evals.cost.TTL_INSIDE)
    for name in ("full_context", "tiermem"):
        m = res["methods"].get(name)
        for p in ("openai", "anthropic"):
            for ttl in (("expire", "inside") if name == "full_context" else ("inside",)):
                assert m is None or floor["by_ttl"][ttl][f"total_billed_{p}"] <= \
                    m["by_ttl"][ttl][f"total_billed_{p}"], (name, p, ttl)
    assert res["methods"]["bound_middle"]["budget_violations"] == 0
    assert "billed_vs_cached_full_openai_feasible" in res["goals"]
    assert res["turns_replayed"] == 30 and res["context_builds"] > 5
    full, tail = res["methods"]["full_context"], res["methods"]["tail"]
    assert full["cache_stable_share"] > 0.8  # each turn's full context extends the previous one
    assert tail["max_context_tokens"] <= 300 and tail["budget_violations"] == 0
    assert tail["total_tokens"] <= full["total_tokens"]
    assert full["ratio_tokens_vs_full"] == 1.0
    # 30 turns stay under the 1,024-token minimum of both providers: nothing is cached yet
    assert full["max_context_tokens"] < 1024 and full["total_billed"] == full["total_tokens"]
    # billed on rendered tokens: below 1,024 tokens neither provider caches anything
    assert full["cached_tokens_openai"] % 128 == 0
    if tiermem_available(opened.memory):
        tm = res["methods"]["tiermem"]
        assert tm["max_context_tokens"] <= 300 and tm["budget_violations"] == 0
        assert 0.0 <= tm["cache_stable_share"] <= 1.0
        assert tm["new_epochs"] == sum(tm["epoch_reasons"].values())
        # the written tokens are paid for: Anthropic bills at least the read discount on each
        assert tm["total_billed_anthropic"] >= 0.1 * tm["total_tokens"]
        assert "tiermem_cache_stable_ok" in res["goals"]
        # one trace entry per tiermem context, saying what it kept and why
        assert len(trace) == res["context_builds"]
        assert all(t["stable"] <= t["tokens"] and t["class"] and t["cache_reason"] for t in trace)
    png = cost_curves(run.series, tmp_path / "docs" / "cost.png")
    assert png.stat().st_size > 1000


# ---------------------------------------------------------------------------------------
# Pressure


def test_generator_is_seeded_and_clean() -> None:
    g1, g2 = pressure_mod.generate(7, 200), pressure_mod.generate(7, 200)
    assert [e.messages for e in g1.events] == [e.messages for e in g2.events]
    assert 190 <= g1.n_messages <= 230
    tags = [e.tag for e in g1.events]
    assert "correct" in tags and "retract" in tags and tags.count("plant") == len(g1.slots)
    values = pressure_mod._all_values()
    for e in g1.events:
        if e.tag == "distractor":
            for m in e.messages:
                assert not any(pressure_mod.contains(m["content"], v) for v in values), m
    # a correction never repeats the value it replaces
    for e in g1.events:
        if e.tag in ("correct", "retract"):
            assert "superseded" not in e.messages[0]["content"].lower()
    final_probes = [p for e in g1.events if e.kind == "probe" for p in e.probes if p.round == 2]
    assert any(p.state.stale for p in final_probes)


def test_pressure_small(opened: OpenedMemory) -> None:
    run = pressure_mod.run_pressure(
        opened.memory, seed=1, budgets=[1000], turns=120, conversations=1, hot=opened.hot
    )
    res = run.result
    json.dumps(res)
    entry = res["budgets"]["1000"]
    full = entry["baselines"]["full_context"]
    assert full["retention"] == 1.0  # everything is in the whole conversation...
    assert full["leakage"] >= 1  # ...including superseded values presented as current
    for name, e in entry["baselines"].items():
        assert 0.0 <= e["retention"] <= 1.0
        if name != "full_context":
            assert e["budget_violations"] == 0 and e["max_context_tokens"] <= 1000
    assert res["budget"] == 1000 and "retention" in res and "leakage" in res
    if entry["available"]:
        assert 0.0 <= entry["retention"] <= 1.0
        assert entry["budget_violations"] == 0 and entry["token_mismatches"] == 0


# ---------------------------------------------------------------------------------------
# Packing, report, plots


class _View:
    """A stand-in ConvView: positions 0..n-1 with given token counts."""

    def __init__(self, tokens: list[int]) -> None:
        self.conversation_id = "c"
        self.positions = list(range(len(tokens)))
        self.bodies = [{"role": "user", "content": f"m{i}"} for i in range(len(tokens))]
        self.tokens = tokens
        self.index = {i: i for i in range(len(tokens))}

    def __len__(self) -> int:
        return len(self.tokens)


def test_packing_respects_the_budget_and_log_order() -> None:
    view: Any = _View([10, 50, 10, 10, 40])
    out = pack_ranked(view, [4, 1, 0, 3], 3 + 40 + 10 + 10)  # 1 does not fit, is skipped
    assert [m["content"] for m in out.messages] == ["m0", "m3", "m4"]
    assert out.tokens == 63
    tail = tail_truncation(view, 3 + 40 + 10)
    assert out.tokens <= 63 and tail.positions == {3, 4}
    assert tail_truncation(view, 2).messages == []


def _fake_locomo() -> dict[str, Any]:
    def e(r: float) -> dict[str, Any]:
        return {
            "evidence_recall": r,
            "by_category": {str(c): r for c in range(1, 6)},
            "answer_coverage": r / 2,
            "mean_context_tokens": 900.0,
            "full_context_tokens": 20000.0,
            "context_ms": {"p50": 1.0, "p99": 2.0},
            "questions": 10,
            "skipped_evidence_ids": 1,
        }

    budgets = {
        str(b): {
            "method": "tiermem",
            "available": True,
            **e(0.5 + b / 10000),
            "baselines": {"full_context": e(1.0), "tail": e(0.1), "hybrid_topk": e(0.4)},
        }
        for b in (500, 2000)
    }
    return {
        "samples": ["s1"],
        "turns": 100,
        "hot_tier": True,
        "hot_budget_tokens": 4000,
        "tokenizer": "o200k_base",
        "budgets": budgets,
    }


def test_report_and_plots(tmp_path: Path) -> None:
    loc = _fake_locomo()
    md = render_markdown(locomo=loc, commands={"locomo": "tiermem eval locomo --json"})
    assert "| **tiermem** | 55.0 | 70.0 |" in md
    assert "full context (20,000 tokens)" in md and "`tiermem eval locomo --json`" in md
    assert recall_vs_budget(loc, tmp_path / "recall.png").stat().st_size > 1000
    assert latency_histogram({"tail": [1.0, 2.0, 3.0]}, tmp_path / "lat.png").stat().st_size > 1000
