"""Erasure and Redis: keys that could not be deleted because Redis was unreachable are
deleted when it answers again (and by the next Memory to open), without anyone calling
`purge_deferred`; and a hot-set rebuild or a warm-view cache fill that read the log just
before an erasure does not write the erased conversation back into Redis after it. On the
code before (an audit, 2026-12-03) the deferred keys stayed until someone called
`purge_deferred()` by hand (the hot set's key has no expiry), and both writes recreated
keys of the erased incarnation."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from hot_fixtures import own_redis

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

NS = "acme/alice"
CANARY = "zq7canary4471kumquat"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis server of the test's own, reached by URL (tiermem neither owns nor restarts it)."""
    with own_redis(tmp_path / "redis") as srv:
        yield srv


def _keys_of(client: redis.Redis, key: str) -> list[bytes]:
    return sorted(client.scan_iter(match=f"{{tm:{key}}}*", count=1000))


def _seed(mem: Memory) -> str:
    turns = [{"role": "user", "content": f"Line {i} of the support thread about the router."} for i in range(12)]
    turns[5] = {"role": "user", "content": f"Never share my recovery code {CANARY} with anyone."}
    mem.append_many("secret", turns, namespace=NS)
    mem.consolidate("secret", namespace=NS)
    mem.context("secret", "what is my recovery code?", 2000, namespace=NS)
    mem.append("other", {"role": "user", "content": "another thread"}, namespace=NS)
    key = mem.cold.key_of(NS, "secret")
    assert key is not None
    return key


def _erase_while_stalled(mem: Memory, server: EmbeddedRedis) -> None:
    """Erase the seeded conversation while the server is stopped (SIGSTOP: unreachable,
    its data kept), then let it answer again."""
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    try:
        mem.delete_conversation("secret", namespace=NS)
    finally:
        os.kill(server.pid, signal.SIGCONT)


def test_keys_deferred_while_redis_was_unreachable_are_deleted_when_it_answers(
        tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url)
    probe = redis.Redis.from_url(server.url)
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        key = _seed(mem)
        assert _keys_of(probe, key)
        _erase_while_stalled(mem, server)
        assert mem.cold.deferred_purges() == [key]
        assert _keys_of(probe, key)  # still there: Redis did not answer the erasure
        # the service carries on: the first call that finds Redis answering again purges
        mem.append("other", {"role": "user", "content": "more"}, namespace=NS)
        mem.context("other", "more", 1000, namespace=NS)
        assert mem.cold.deferred_purges() == []
        assert _keys_of(probe, key) == []


def test_a_memory_that_opens_purges_what_an_earlier_process_deferred(
        tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url)
    probe = redis.Redis.from_url(server.url)
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        key = _seed(mem)
        _erase_while_stalled(mem, server)
    # that process ended before Redis answered it again (nothing it did afterwards hit Redis)
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem2:
        assert mem2.cold.deferred_purges() == []
    assert _keys_of(probe, key) == []


def _erase_from_another_process(cfg: Config, embedder: FastEmbedder) -> None:
    with Memory(cfg, embedder=embedder, background_indexing=False) as other:
        assert other.delete_conversation("secret", namespace=NS).messages == 12


@pytest.mark.parametrize("read", ["turns", "latest_summaries"], ids=["hot-set rebuild", "warm-view cache fill"])
def test_a_read_just_before_an_erasure_does_not_write_it_back(
        tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder, read: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url)
    probe = redis.Redis.from_url(server.url)
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        key = _seed(mem)
        probe.flushdb()  # Redis lost everything: the next read rebuilds and refills from the log
        real = getattr(mem.cold, read)
        erased: list[bool] = []

        def read_then_erased(*args: Any, **kw: Any) -> Any:
            rows = real(*args, **kw)
            if args and args[0] == key and not erased:
                # the log was read; another process erases the conversation before the write
                _erase_from_another_process(cfg, embedder)
                erased.append(True)
            return rows

        monkeypatch.setattr(mem.cold, read, read_then_erased)
        try:
            mem.context("secret", "what is my recovery code?", 2000, namespace=NS)
        except Exception:
            pass  # the call under way may fail or answer: it began before the erasure
        assert erased
        assert _keys_of(probe, key) == []
