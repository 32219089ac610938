"""A cold store that is down while the hot path reads it (PostgreSQL stopped, or silent
under SIGSTOP, or the store closed) is the store's failure, not Redis's: a hot read
raises the store's own error (the caller's 503, as for the log busy, a84fab7), a hot
write after the log's (an append's admit) leaves the set to its next read, and the hot
tier stays ok. Before: StoreUnavailable (and StoreUnreachable, StoreStalled) is a
ConnectionError, hence an OSError, hence one of hotlink's REDIS_ERRORS: the call was
taken for a Redis outage ("hot tier unavailable" logged, the link degraded: /healthz
hot "degraded") with Redis healthy.

The hot link is called directly, as `Memory` calls it: every `Memory` call looks its
conversation up in the log first, so a store already down fails there; the hot link
meets the outage when it begins between that lookup and the hot path's own reads of the
log. Real PostgreSQL servers of the test's own, a real Redis."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from frozen_server import frozen
from hot_fixtures import own_redis
from pg_server import StoppableServer, fill_pool, stoppable_pg  # noqa: F401  (pytest fixture)

from tiermem import Config, Memory
from tiermem.hotlink import HotLink
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import StoreUnavailable
from tiermem.tiers.files import storage_problem
from tiermem.tiers.postgres import PostgresStore

POOL_WAIT_S = 1.0  # an operation's wait for a pooled connection (the server stopped)
OPERATION_TIMEOUT_S = 1.0  # an operation's wait for the server's answer (the server silent)
BUSY_TIMEOUT_MS = 100  # the lock wait added to it
POOLED = 2  # idle connections when the server goes: an operation gets one at once
CONV = "cold-down"
BACK_WITHIN_S = 30.0  # how long a restarted server's pool may take to serve again


@contextlib.contextmanager
def stopped(server: StoppableServer, mem: Memory) -> Iterator[None]:
    server.stop()
    try:
        yield
    finally:
        server.start()


@contextlib.contextmanager
def silent(server: StoppableServer, mem: Memory) -> Iterator[None]:
    with frozen(server):
        yield


@contextlib.contextmanager
def closed(server: StoppableServer, mem: Memory) -> Iterator[None]:
    mem.cold.close()
    yield


T = TypeVar("T")
Outage = Callable[[StoppableServer, Memory], contextlib.AbstractContextManager[None]]


# (how the store is down, what the message says)
OUTAGES = [
    # the server stopped (a restart, a failover): no connection in time (StoreUnreachable)
    (stopped, "no connection"),
    # the server silent (SIGSTOP): the connection cut at its deadline (StoreStalled)
    (silent, "did not answer"),
    # the store closed (a Memory closing while a call runs): StoreUnavailable itself
    (closed, "closed"),
]


def _memory(tmp_path: Path, server: StoppableServer, redis_url: str, embedder: FastEmbedder) -> Memory:
    cfg = Config(data_dir=tmp_path / "data", cold_url=server.url, redis_url=redis_url, cold_pool_size=POOLED,
                 cold_pool_wait_s=POOL_WAIT_S, busy_timeout_ms=BUSY_TIMEOUT_MS,
                 cold_operation_timeout_s=OPERATION_TIMEOUT_S)
    return Memory(cfg, embedder=embedder, background_indexing=False)


def _once_back(call: Callable[[], T]) -> T:
    """`call`'s result once the store serves again."""
    deadline = time.monotonic() + BACK_WITHIN_S
    while True:
        try:
            return call()
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(POOL_WAIT_S)


def _not_blamed(hot: HotLink, caplog: pytest.LogCaptureFixture) -> None:
    """The link not degraded, and no word of the hot tier being down or failing."""
    assert hot.healthy, hot.last_error  # before: degraded (/healthz hot "degraded")
    assert "hot tier unavailable" not in caplog.text, caplog.text
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR], caplog.text


@pytest.mark.parametrize(("outage", "says"), OUTAGES, ids=["stopped", "silent", "closed"])
def test_a_hot_read_on_a_cold_store_down_raises_its_error_and_the_hot_tier_stays_ok(
        tmp_path: Path, stoppable_pg: StoppableServer, embedder: FastEmbedder,  # noqa: F811
        caplog: pytest.LogCaptureFixture, outage: Outage, says: str) -> None:
    with own_redis(tmp_path / "redis") as srv, _memory(tmp_path, stoppable_pg, srv.url, embedder) as mem:
        mem.append(CONV, {"role": "user", "content": "My seat is 12A."})
        hot = mem.hot
        assert hot is not None and hot.read(CONV).hot is not None  # the set is built
        assert isinstance(mem.cold, PostgresStore)
        fill_pool(mem.cold, POOLED)
        caplog.clear()
        with caplog.at_level(logging.WARNING), outage(stoppable_pg, mem):
            with pytest.raises(StoreUnavailable, match=says) as raised:
                hot.read(CONV)  # before: HotRead(degraded=True)
            _not_blamed(hot, caplog)
        if outage is not closed:  # the store's own answer to the caller: 503
            problem = storage_problem(raised.value)
            assert problem is not None and problem.status == 503
            # the store back (once the pool has reconnected): the set read as it was, nothing dropped
            got = _once_back(lambda: hot.read(CONV))
            assert got.hot is not None and not got.degraded and not got.rebuilt


@pytest.mark.parametrize(("outage", "says"), OUTAGES, ids=["stopped", "silent", "closed"])
def test_an_admit_on_a_cold_store_down_leaves_the_set_to_its_next_read(
        tmp_path: Path, stoppable_pg: StoppableServer, embedder: FastEmbedder,  # noqa: F811
        caplog: pytest.LogCaptureFixture, outage: Outage, says: str) -> None:
    with own_redis(tmp_path / "redis") as srv, _memory(tmp_path, stoppable_pg, srv.url, embedder) as mem:
        mem.append(CONV, {"role": "user", "content": "My seat is 12A."})
        hot = mem.hot
        assert hot is not None and hot.read(CONV).hot is not None
        assert isinstance(mem.cold, PostgresStore)
        fill_pool(mem.cold, POOLED)
        caplog.clear()
        with caplog.at_level(logging.WARNING), outage(stoppable_pg, mem):
            # the append's log write committed; its admit reads the new turn from the log
            assert hot.on_append(CONV, [1]) is None  # never raises: the write was acknowledged
            _not_blamed(hot, caplog)
        assert says in caplog.text  # the store's error, named in the warning
