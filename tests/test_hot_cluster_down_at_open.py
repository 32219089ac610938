"""A Redis Cluster that is down when tiermem opens degrades as a single Redis does.

redis-py's RedisCluster asks a node for the slot map while the client is built, so
`Memory(Config(redis_url="redis+cluster://..."))` with no node answering raised
RedisClusterUnreachableError, and `tiermem context`/`stats`/`pin` exited 1, where the
same commands on an unreachable `redis://` answer from the cold log with one warning
("Losing Redis loses speed, not data"). Now the link opens with a stand-in client
(tiers.hot DeferredCluster): appends go to the log, context is served from it
(`degraded`), and once the cluster is up the next call builds the client, recovers and
fills the hot set. Real redis-server processes in cluster mode on loopback; "down" is a
port nobody listens on.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from click.testing import CliRunner
from hot_fixtures import free_cluster_ports, start_local_cluster

from tiermem import Config, Memory
from tiermem.cli import CliState
from tiermem.cli import cli as cli_group
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.hot import DeferredCluster

CONV = "c1"
TURNS = ["the launch moved to friday", "who signs off?", "dana signs off"]
BUDGET = 500  # tokens: every turn fits


def _fill(data: Path, embedder: FastEmbedder) -> None:
    """The conversation in the log only: the CLI command under test is the first to meet Redis."""
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        for i, text in enumerate(TURNS):
            mem.append(CONV, {"role": "user" if i % 2 == 0 else "assistant", "content": text})


def test_memory_opens_degrades_and_recovers_when_the_cluster_comes_up(
        tmp_path: Path, embedder: FastEmbedder, caplog: pytest.LogCaptureFixture) -> None:
    ports = free_cluster_ports(3)  # nobody listens yet; the cluster comes up on them later
    url = f"redis+cluster://127.0.0.1:{ports[0]}"
    cfg = Config(data_dir=tmp_path / "data", redis_url=url)
    with caplog.at_level(logging.WARNING, logger="tiermem"), \
            Memory(cfg, embedder=embedder, background_indexing=False) as mem:  # before: raised
        assert isinstance(mem.hot.client, DeferredCluster) and not mem.hot.client.built
        for i, text in enumerate(TURNS):
            mem.append(CONV, {"role": "user" if i % 2 == 0 else "assistant", "content": text})
        ctx = mem.context(CONV, "who signs off?", BUDGET)
        assert ctx.plan.degraded  # served from the cold log
        assert [m["content"] for m in ctx.messages if m["content"] in TURNS] == TURNS
        hot = mem.stats()["hot"]
        assert hot["healthy"] is False and hot["misconfigured"] is None, hot
        assert "RedisClusterUnreachableError" in (hot["last_error"] or ""), hot
        warned = [r.getMessage() for r in caplog.records if "serving from the cold log" in r.getMessage()]
        assert len(warned) == 1, [r.getMessage() for r in caplog.records]  # one warning, not one per call
        assert not any(r.levelno >= logging.ERROR for r in caplog.records if r.name.startswith("tiermem"))

        cluster = start_local_cluster(tmp_path / "cluster", ports=ports)
        try:
            ctx = mem.context(CONV, "who signs off?", BUDGET)
            assert not ctx.plan.degraded  # recovered at the first call the cluster answered
            assert mem.hot.client.built
            assert [m["content"] for m in ctx.messages if m["content"] in TURNS] == TURNS
            assert mem.stats()["hot"]["healthy"] is True
            # the set was rebuilt from the log into the cluster: its keys are on a master
            assert any(any(True for _ in node.scan_iter(match="{*", count=1000)) for node in cluster.nodes)
            mem.append(CONV, {"role": "user", "content": "and after?"})  # an append admitted live
            ctx = mem.context(CONV, "and after?", BUDGET)
            assert not ctx.plan.degraded and ctx.messages[-1]["content"] == "and after?"
        finally:
            cluster.stop()


# (command, its arguments) each read or write path the review ran against an unreachable URL
COMMANDS = [
    ("context", [CONV, "-q", "who signs off?"]),  # a read: served from the cold log
    ("stats", []),  # stats: the hot tier reported down
    ("pin", [CONV, "0"]),  # a write: the log's pin committed, the hot set waits
]


@pytest.mark.parametrize("scheme", [
    "redis",  # a single Redis: the behaviour the cluster now matches
    "redis+cluster",  # before: exit 1, RedisClusterUnreachableError
])
@pytest.mark.parametrize(("command", "args"), COMMANDS)
def test_cli_answers_from_the_log_while_redis_is_unreachable(
        tmp_path: Path, embedder: FastEmbedder, scheme: str, command: str, args: list[str]) -> None:
    url = f"{scheme}://127.0.0.1:{free_cluster_ports(1)[0]}"  # nobody listens
    data = tmp_path / "data"
    _fill(data, embedder)
    res = CliRunner().invoke(cli_group, ["--data-dir", str(data), command, *args], obj=CliState(embedder=embedder),
                             env={"TIERMEM_REDIS_URL": url})
    assert res.exit_code == 0, (res.output, res.exception)
    if command == "context":
        assert "dana signs off" in res.stdout
