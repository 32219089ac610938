"""`tiermem tune` on a small support conversation written here (every role, two probes):
two candidates, two budgets, recall and cost in one run, the effective config of each
candidate recorded, the best one written as TOML that loads back."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import vectors_shared
from convo_fixtures import support_lines, write_jsonl

from tiermem.cli import CliState, cli
from tiermem.config import Config
from tiermem.tiers.embed_onnx import FastEmbedder

BUDGETS = (150, 1500)  # 1,500 holds the whole conversation; 150 cannot


pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


def tune(embedder: FastEmbedder, *args: str) -> Result:
    return CliRunner().invoke(cli, ["tune", *args], obj=CliState(embedder=embedder))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("tune")
    data = write_jsonl(d / "support.jsonl", support_lines(recap=True))
    base = d / "base.toml"
    # one setting flat, one in its section: a base file may mix them
    base.write_text("hot_budget_tokens = 3000\n[planner.layer_shares]\ntail = 0.2\n")
    out, best, plot = d / "tune.json", d / "best.toml", d / "tune.png"
    # the attribution and both candidates embed the same turns: once (conftest.shared_vectors)
    with vectors_shared(embedder):
        r = tune(embedder, str(data), "--budgets", ",".join(map(str, BUDGETS)), "--config", str(base),
                 "--grid", "retrieval.k=3,20", "--json-out", str(out), "--write-config", str(best), "--plot", str(plot))
    assert r.exit_code == 0, r.output
    return {"table": r.stdout, "result": json.loads(out.read_text()), "best": best, "base": base, "plot": plot}


def test_each_candidate_records_its_effective_config(run: dict[str, Any]) -> None:
    cands = run["result"]["candidates"]
    assert [c["values"] for c in cands] == [{"retrieval.k": 3}, {"retrieval.k": 20}]
    for c in cands:
        cfg = c["config"]
        assert cfg["retrieval_k"] == c["values"]["retrieval.k"]
        assert cfg["hot_budget_tokens"] == 3000  # from the base file
        # the base file's one share, with the other layers' defaults kept
        assert cfg["layer_shares"] == {"pinned": 0.1, "summary": 0.1, "tail": 0.2}
        assert "data_dir" not in cfg  # the run's temporary dir is no setting


def test_recall_and_cost_per_budget(run: dict[str, Any]) -> None:
    res = run["result"]
    assert res["format"] == "conversations" and res["probes"] == 2 and res["budgets"] == list(BUDGETS)
    for c in res["candidates"]:
        small, big = c["budgets"][str(BUDGETS[0])], c["budgets"][str(BUDGETS[1])]
        # at a budget that holds the whole conversation, every evidence message is in
        assert big["evidence_recall"] == 1.0 and big["probes_with_evidence"] == 2
        assert big["answer_coverage"] == 1.0  # the one probe with an answer ("4242")
        assert 0.0 <= small["evidence_recall"] <= 1.0
        for r in (small, big):
            assert r["contexts"] == 9  # one per user message (the system message is not one)
            assert r["budget_violations"] == 0 and r["token_mismatches"] == 0
            assert 0 < r["total_billed"] <= r["total_tokens"]
            # against full context billed the same way (on a conversation this short, full
            # context is mostly a cached prefix, so it can cost less than a small budget)
            assert r["billed_vs_full"] == round(r["total_billed"] / c["full_context"]["total_billed"], 4)
        assert small["total_tokens"] < big["total_tokens"]  # a smaller budget sends less
    assert "recall %" in run["table"] and "c0" in run["table"] and "best (*):" in run["table"]


def test_best_is_written_as_a_config_that_loads(run: dict[str, Any], tmp_path: Path) -> None:
    best = run["result"]["best"]
    assert best is not None and best["evidence_recall"] == 1.0 and best["budget"] == BUDGETS[1]
    text = run["best"].read_text()
    assert text.startswith("# tiermem tune ")
    data = tomllib.loads(text)
    # written in sections, whichever way the base file and the grid named the settings
    assert data["retrieval"]["k"] == best["values"]["retrieval.k"] and data["hot"]["budget_tokens"] == 3000
    assert "retrieval_k" not in data and "hot_budget_tokens" not in data
    cfg = Config.load(run["best"], data_dir=tmp_path)
    assert cfg.retrieval_k == best["values"]["retrieval.k"]
    assert cfg.layer_shares.tail == 0.2


def test_min_recall_picks_the_cheapest_that_meets_it(run: dict[str, Any]) -> None:
    from tiermem.evals.tune import pick_best

    cands = run["result"]["candidates"]
    best = pick_best(cands, min_recall=1.0)
    assert best is not None
    meets = [r for c in cands for r in c["budgets"].values() if r["evidence_recall"] >= 1.0]
    assert best["total_billed"] == min(r["total_billed"] for r in meets)
    assert pick_best(cands, max_cost_ratio=0.0) is None  # nothing is free


# (the bad option, what the error names, the exit status: 2 for a bad value on the command
# line (0d40f04; a grid value or name the config refuses too), with click's usage lines; 1 for
# what the data refuses, one line)
@pytest.mark.parametrize(("args", "named", "status"), [
    (["--grid", "retrieval_k=0,5"], "'--grid': retrieval_k", 2),     # a value the config refuses
    (["--grid", "no_such_setting=1"], "'--grid': no_such_setting", 2),  # an unknown setting
    (["--grid", "retrieval_k"], "KEY=V1,V2", 2),                      # no values: usage
    (["--budgets", "ten"], "budgets", 2),                             # not numbers: usage
    (["--conversation", "nope"], "nope", 1),                          # not in the file
])
def test_bad_options_fail_before_running(args: list[str], named: str, status: int, tmp_path: Path,
                                         embedder: FastEmbedder) -> None:
    data = write_jsonl(tmp_path / "s.jsonl", support_lines())
    r = tune(embedder, str(data), *args)
    assert r.exit_code == status and named in r.stderr, r.output
    if status == 1:
        assert len(r.stderr.strip().splitlines()) == 1, r.output


def test_reply_recall_needs_no_labels(run: dict[str, Any]) -> None:
    res = run["result"]
    # one reply (the recap) restates earlier turns: the refund request and its confirmation
    assert res["replies_with_sources"] == 1
    for c in res["candidates"]:
        small, big = c["budgets"][str(BUDGETS[0])], c["budgets"][str(BUDGETS[1])]
        assert (big["replies_with_sources"], big["reply_sources"]) == (1, 2)
        assert big["reply_recall"] == 1.0  # the whole conversation fits: both sources are in
        assert small["reply_recall"] is not None and small["reply_recall"] < 1.0  # 150 tokens hold the tail only
    assert "reply recall %" in run["table"]
    agree = res["reply_recall_vs_evidence_recall"]
    assert agree["points"] == 2 * len(BUDGETS)


def test_plot_is_a_png(run: dict[str, Any]) -> None:
    assert run["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert run["plot"].stat().st_size > 10_000  # axes, points and a legend, not an empty canvas


def test_without_probes_best_is_ranked_by_reply_recall(run: dict[str, Any]) -> None:
    from tiermem.evals.tune import pick_best

    cands = [{**c, "budgets": {b: {**r, "evidence_recall": None} for b, r in c["budgets"].items()}}
             for c in run["result"]["candidates"]]
    best = pick_best(cands)
    assert best is not None and best["ranked_by"] == "reply_recall" and best["reply_recall"] == 1.0
