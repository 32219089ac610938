"""A PostgreSQL that takes a connection's query and never answers (every process of the
server stopped with SIGSTOP: the kernel still ACKs, so neither TCP nor the server's own
timeouts end the wait) costs an operation its timeout, then its connection is cut
(StoreStalled, 503 without "written": false: a COMMIT in flight may have landed), and
`/healthz` answers 503 "down" within HEALTH_CONNECTION_WAIT_S. Before: both waited for
ever (a worker lost per request; the probe's client timed out). A server of the test's
own, stopped with SIGSTOP and given SIGCONT at the end, after which the store serves
again."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from frozen_server import frozen, in_thread
from pg_server import StoppableServer, fill_pool, fresh_schema, stoppable_pg  # noqa: F401  (pytest fixture)
from service_helpers import TOKEN_ACME, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.service.routes.ops import HEALTH_CONNECTION_WAIT_S
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import WRITTEN_FIELD, StoreStalled
from tiermem.tiers.files import storage_problem
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

OPERATION_TIMEOUT_S = 1.0  # the store's, short for the test
LOCK_TIMEOUT_MS = 100  # added to it: an operation may spend its lock wait first
PROBE_WAIT_S = 0.5  # a connection_wait shorter than the operation timeout
SLACK_S = 5.0  # on top of a bound: a busy test machine
HUNG_S = 30.0  # how long the test waits for an answer the code before never gave
POOLED = 2  # idle connections when the server stops: an operation gets one at once


def probe(store: PostgresStore) -> object:
    """A read as /healthz makes it: under a connection_wait."""
    with store.connection_wait(PROBE_WAIT_S):
        return store.namespace_of("c")


@pytest.fixture
def store(stoppable_pg: StoppableServer) -> Iterator[PostgresStore]:  # noqa: F811
    opened = PostgresStore(stoppable_pg.url, tokens=BpeTokenCounter(), schema=fresh_schema(), pool_max=POOLED,
                           lock_timeout_ms=LOCK_TIMEOUT_MS)
    opened.operation_timeout_s = OPERATION_TIMEOUT_S  # as the service test sets it
    try:
        opened.append("c", Message(role="user", content="before"))
        fill_pool(opened, POOLED)
        yield opened
    finally:
        opened.close()


@pytest.mark.parametrize(("name", "call", "bound_s"), [
    # a read: cut after the operation timeout and the lock wait it may spend
    ("read", lambda s: s.get("c", [0]), OPERATION_TIMEOUT_S + LOCK_TIMEOUT_MS / 1000),
    # a write (its own transaction): the same, and the answer cannot say it was not written
    ("append", lambda s: s.append("c", Message(role="user", content="during")),
     OPERATION_TIMEOUT_S + LOCK_TIMEOUT_MS / 1000),
    # under a probe's connection_wait: cut at its end, sooner than the operation timeout
    ("probe", lambda s: probe(s), PROBE_WAIT_S),
], ids=["read", "append", "probe"])
def test_an_operation_on_a_silent_server_is_cut_at_its_deadline(
        store: PostgresStore, stoppable_pg: StoppableServer, name: str,  # noqa: F811
        call: Callable[[PostgresStore], object], bound_s: float) -> None:
    with frozen(stoppable_pg):
        thread, out = in_thread(lambda: call(store))
        thread.join(HUNG_S)
        assert not thread.is_alive(), f"{name}: no answer in {HUNG_S} s"  # before: waited for ever
    error = out.get("error")
    assert isinstance(error, StoreStalled), out
    assert bound_s <= float(out["took"]) < bound_s + SLACK_S, out  # type: ignore[arg-type]
    problem = storage_problem(error)
    assert problem is not None and problem.status == 503 and not problem.refused_unwritten
    # continued: the cut connection was discarded, the store serves again
    store.append("c", Message(role="user", content="after"))
    assert [m.text for m in store.get("c", [0])] == ["before"]


def test_healthz_and_a_request_answer_503_while_the_server_is_silent(
        tmp_path: Path, stoppable_pg: StoppableServer, embedder: FastEmbedder) -> None:  # noqa: F811
    cfg = Config(data_dir=tmp_path / "data", cold_url=stoppable_pg.url, cold_pool_size=POOLED,
                 busy_timeout_ms=LOCK_TIMEOUT_MS, cold_operation_timeout_s=OPERATION_TIMEOUT_S,
                 auth_tokens={TOKEN_ACME: "acme"})
    path = "/v1/conversations/c/messages"
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url, httpx.Client(base_url=url, timeout=HUNG_S) as http:
        assert isinstance(mem.cold, PostgresStore)
        h = bearer(TOKEN_ACME)
        assert http.post(path, json={"role": "user", "content": "before"}, headers=h).status_code == 201
        fill_pool(mem.cold, POOLED)
        with frozen(stoppable_pg):
            started = time.monotonic()
            try:
                r = http.get("/healthz")
            except httpx.TimeoutException:  # before: the probe never answered
                pytest.fail(f"/healthz gave no answer in {HUNG_S} s")
            took = time.monotonic() - started
            assert r.status_code == 503 and r.json()["status"] == "down", r.text
            assert took < HEALTH_CONNECTION_WAIT_S + SLACK_S, took
            started = time.monotonic()
            try:
                r = http.post(path, json={"role": "user", "content": "during"}, headers=h)
            except httpx.TimeoutException:
                pytest.fail(f"an append gave no answer in {HUNG_S} s")
            took = time.monotonic() - started
            # the pool's other idle connection: cut at the operation's deadline
            assert r.status_code == 503 and WRITTEN_FIELD not in r.json(), r.text
            assert took < OPERATION_TIMEOUT_S + LOCK_TIMEOUT_MS / 1000 + SLACK_S, took
        r = http.post(path, json={"role": "user", "content": "after"}, headers=h)
        assert r.status_code == 201, r.text
