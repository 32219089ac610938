"""The inspector's recall/cost chart from the latest `tiermem tune` result (issue 21: "recall/
cost curves from the last tiermem tune ... if present"). `tune` keeps its result in the data
dir (0600); the metrics page charts it for an operator (every namespace) and never for a
tenant token, whose namespace the run's conversation ids and config do not belong to.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from convo_fixtures import support_lines, write_jsonl
from fastapi.testclient import TestClient
from inspector_helpers import TOKEN_ACME, TOKENS

from tiermem import Config, Memory
from tiermem.cli import CliState, cli
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

HX = {"HX-Request": "true"}
RESULT = {"probes": 3, "candidates": [
    {"name": "c0", "values": {"layer_shares.tail": 0.05},
     "budgets": {"500": {"evidence_recall": 0.7, "billed_vs_full": 0.1},
                 "2000": {"evidence_recall": 0.9, "billed_vs_full": 0.3}}},
    {"name": "c1", "values": {"layer_shares.tail": 0.4},
     "budgets": {"500": {"evidence_recall": 0.6, "billed_vs_full": 0.12}}}]}


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens=TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


def test_an_operator_sees_the_latest_tune_as_points(mem: Memory) -> None:
    mem.config.last_tune_path.write_text(json.dumps(RESULT))
    with TestClient(create_app(mem.config, mem, start_scheduler=False, auth=False), base_url="http://127.0.0.1") as c:
        page = c.get("/ui/metrics").text
    assert page.count("<circle") == 3  # one per (candidate, budget)
    assert "layer_shares.tail=0.05 at 2000 tokens: recall 90.0%, cost 30.0% of full" in page
    assert "evidence recall against billed cost" in page


def test_a_tenant_never_sees_it(mem: Memory) -> None:
    mem.config.last_tune_path.write_text(json.dumps(RESULT))
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        assert c.post("/ui/login", json={"token": TOKEN_ACME}, headers=HX).status_code == 200
        page = c.get("/ui/metrics").text
    assert "<circle" not in page and "Tuning" not in page


@pytest.mark.parametrize("content", [
    None,             # no tune has run: the page says so, no error
    "{not json",      # a torn or foreign file: ignored
    '{"candidates": 5}',  # the wrong shape
])
def test_a_missing_or_bad_result_is_an_empty_chart(mem: Memory, content: str | None) -> None:
    if content is not None:
        mem.config.last_tune_path.write_text(content)
    with TestClient(create_app(mem.config, mem, start_scheduler=False, auth=False), base_url="http://127.0.0.1") as c:
        r = c.get("/ui/metrics")
    assert r.status_code == 200
    assert "no <code>tiermem tune</code> result in the data dir" in r.text


def test_tune_keeps_its_result_private_in_the_data_dir(tmp_path: Path, embedder: FastEmbedder) -> None:
    data = tmp_path / "data"
    # a small conversation file: what is checked is where the result goes, not the tuning
    convo = write_jsonl(tmp_path / "support.jsonl", support_lines(recap=True))
    r = CliRunner().invoke(cli, ["--data-dir", str(data), "tune", str(convo), "--budgets", "300", "--json"],
                           obj=CliState(embedder=embedder))
    assert r.exit_code == 0, r.output
    kept = Config(data_dir=data).last_tune_path
    assert json.loads(kept.read_text())["budgets"] == [300]
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
