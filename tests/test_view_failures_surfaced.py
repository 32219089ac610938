"""Failed warm-view refreshes are visible to an operator: `stats()["warm"]` (views whose
latest refresh failed, how long the oldest has been failing, this process's failed
refreshes), `/metrics` (gauges and a counter without labels) and `tiermem stats`.
Before, they were only in `WarmStore.errors()` and `ViewMaintainer.failures`.

Counts and an age only: which view failed, and the error's text (which may quote the
turns), stay with the conversation (`WarmStore.errors`), erased with it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import tm
from llm_endpoint import LLMEndpoint, Reply, completion, serving
from prometheus_client import CollectorRegistry, generate_latest

from tiermem import Config, Memory
from tiermem.service.auth import TokenAuth
from tiermem.service.metrics import StateCollector
from tiermem.service.runtime import Runtime
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

CONV = "trip-to-lisbon-7731"
SECRET_TEXT = "my locker code is 4417"


def refused(_r: object) -> Reply:
    return Reply(400, json.dumps({"error": {"message": f"context too long: {SECRET_TEXT}"}}).encode())


@pytest.fixture
def endpoint() -> Iterator[LLMEndpoint]:
    yield from serving(refused)


def config(tmp_path: Path, endpoint: LLMEndpoint) -> Config:
    return Config(data_dir=tmp_path / "data", summarizer="llm", llm_base_url=endpoint.url, llm_model="m",
                  llm_api_key_env="", llm_timeout_s=5.0)


def collector(mem: Memory) -> StateCollector:
    auth = TokenAuth({}, enabled=False, default_namespace="default", max_id_chars=128)
    return StateCollector(Runtime(config=mem.config, auth=auth, memory=mem, start_scheduler=False))


def scrape(mem: Memory) -> str:
    registry = CollectorRegistry()
    registry.register(collector(mem))
    return generate_latest(registry).decode()


def sample(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):  # no labels: the name, a space, the value
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported without labels:\n{text}")


def test_a_failing_view_shows_in_stats_and_metrics_without_content(
        tmp_path: Path, embedder: FastEmbedder, endpoint: LLMEndpoint) -> None:
    with Memory(config(tmp_path, endpoint), embedder=embedder, hot=False, background_indexing=False) as mem:
        assert mem.stats()["warm"] | {"salvaged_rows": 0} == {
            "salvaged_rows": 0, "views_failing": 0, "oldest_failure_age_s": None, "refresh_failures": 0}
        mem.append(CONV, {"role": "user", "content": f"Remember this: {SECRET_TEXT}."})
        mem.consolidate(CONV)
        warm = mem.stats()["warm"]
        assert (warm["views_failing"], warm["refresh_failures"]) == (1, 1)
        assert 0.0 <= warm["oldest_failure_age_s"] < 60.0
        text = scrape(mem)
        assert sample(text, "tiermem_warm_views_failing") == 1.0
        assert sample(text, "tiermem_warm_refresh_failures_total") == 1.0
        assert 0.0 <= sample(text, "tiermem_warm_oldest_failure_age_seconds") < 60.0
        for shown in (json.dumps(mem.stats()), text):  # the figures name no conversation, quote nothing
            assert CONV not in shown and SECRET_TEXT not in shown and "4417" not in shown
        assert SECRET_TEXT in mem.warm.errors(CONV, "rolling")[0][0]  # the text stays with the view
        # a success: nothing fails any more (the counter of this process's failures stays)
        endpoint.reply = lambda _r: completion("A locker code was given [#0]")
        mem.consolidate(CONV)
        warm = mem.stats()["warm"]
        assert (warm["views_failing"], warm["oldest_failure_age_s"], warm["refresh_failures"]) == (0, None, 1)
        assert sample(scrape(mem), "tiermem_warm_views_failing") == 0.0


def test_tiermem_stats_counts_the_failing_views_of_every_process(
        tmp_path: Path, embedder: FastEmbedder, endpoint: LLMEndpoint) -> None:
    with Memory(config(tmp_path, endpoint), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append(CONV, {"role": "user", "content": f"Remember this: {SECRET_TEXT}."})
        mem.consolidate(CONV)  # another process's refresh failed (the scheduler of `serve`)
    try:
        result = tm(tmp_path, embedder, "", "stats", "--json")
        assert result.exit_code == 0, result.output
        warm = json.loads(result.stdout)["warm"]
        assert warm["views_failing"] == 1 and warm["oldest_failure_age_s"] >= 0.0
        assert warm["refresh_failures"] == 0  # none in this process
        table = tm(tmp_path, embedder, "", "stats")
        assert "warm.views_failing" in table.stdout and SECRET_TEXT not in table.stdout
    finally:
        EmbeddedRedis(tmp_path / "data").stop()
