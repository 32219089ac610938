"""Several services, one store: two real `tiermem serve` processes (each with its own
data dir for its embedded bits) on one PostgreSQL schema and one Redis, serving the same
namespace. Concurrent appends through both to ONE conversation: every acknowledged append
is stored exactly once at the position it was told, positions are dense from 0 (the
counter row, not MAX + 1), nothing appears that nobody sent. Each process's turn cache and
pinned-block cache follow the other's writes, and an erasure through one is seen by the
other (404, then a new incarnation from position 0)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from pg_server import fresh_schema
from ports import free_port
from reliability_helpers import A, Server, stop_server, wait_ready

from tiermem.tiers.redis_server import EmbeddedRedis

WRITERS_PER_SERVER = 3  # client threads per server, all appending to the same conversation
APPENDS_PER_WRITER = 40
CONV = "shared"


@pytest.fixture
def servers(tmp_path: Path, pg_url: str) -> Iterator[list[Server]]:
    """Two `tiermem serve` processes on one PostgreSQL schema and one Redis."""
    import subprocess

    from reliability_helpers import TIERMEM, server_env

    redis = EmbeddedRedis(tmp_path / "redis")
    redis_url = redis.ensure()
    env = {"TIERMEM_COLD_URL": pg_url, "TIERMEM_COLD_SCHEMA": fresh_schema(), "TIERMEM_REDIS_URL": redis_url}
    started: list[Server] = []
    try:
        for name in ("a", "b"):  # both start at once: the model loads overlap
            data, log, port = tmp_path / name, tmp_path / f"{name}.log", free_port()
            with log.open("ab") as out:
                proc = subprocess.Popen([TIERMEM, "--data-dir", str(data), "serve", "--port", str(port),
                                         "--log-level", "warning"], stdout=out, stderr=subprocess.STDOUT,
                                        env=server_env(env))
            started.append(Server(data, port, log, proc, proc.pid))
        for srv in started:
            assert srv.proc is not None
            proc = srv.proc
            wait_ready(srv.url, lambda p=proc: p.poll() is None, srv.log)
        yield started
    finally:
        for srv in started:
            stop_server(srv)
        redis.stop()


def append(http: httpx.Client, text: str) -> int:
    r = http.post(f"/v1/conversations/{CONV}/messages", json={"role": "user", "content": text}, headers=A)
    assert r.status_code == 201, r.text
    return int(r.json()["position"])


def context(http: httpx.Client, query: str) -> dict[str, Any]:
    r = http.post(f"/v1/conversations/{CONV}/context", json={"query": query, "budget": 1500}, headers=A)
    assert r.status_code == 200, r.text
    return dict(r.json())


def texts(ctx: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in ctx["messages"])


def test_two_services_on_one_postgres_agree(servers: list[Server]) -> None:
    a, b = (srv.client() for srv in servers)
    # both processes read the conversation first: their caches hold it before the race
    append(a, "Opening line of the shared thread about invoices.")
    context(a, "what about invoices?")
    context(b, "what about invoices?")

    acked: dict[str, int] = {}
    lock = threading.Lock()

    def writer(http: httpx.Client, tag: str) -> None:
        for i in range(APPENDS_PER_WRITER):
            text = f"{tag} line {i} about invoices"
            pos = append(http, text)
            with lock:
                acked[text] = pos

    with ThreadPoolExecutor(2 * WRITERS_PER_SERVER) as pool:
        futures = [pool.submit(writer, http, f"{name}{w}") for name, http in (("a", a), ("b", b))
                   for w in range(WRITERS_PER_SERVER)]
        for f in futures:
            f.result()

    total = 1 + 2 * WRITERS_PER_SERVER * APPENDS_PER_WRITER
    for http in (a, b):  # each process reads the same log
        hist = http.get(f"/v1/conversations/{CONV}/history", headers=A).json()["messages"]
        assert [m["position"] for m in hist] == list(range(total))  # dense, no duplicates, none lost
        stored = {m["message"]["content"]: m["position"] for m in hist[1:]}
        assert stored == acked  # each at the position its writer was told; nothing nobody sent

    # B's cached copy follows A's writes: a new instruction and a pin, then B's context
    instruction = append(a, "From now on always answer in French.")
    r = a.post(f"/v1/conversations/{CONV}/pins", json={"position": 3, "priority": 90}, headers=A)
    assert r.status_code == 200 and r.json()["pinned"] is True
    ctx_b = context(b, "what about invoices?")
    assert "always answer in French" in texts(ctx_b)
    assert any(3 in it["positions"] for it in ctx_b["plan"]["items"]), ctx_b["plan"]["items"]
    assert instruction == total
    # and A's follows B's
    append(b, "The invoice number is INV-7731.")
    assert "INV-7731" in texts(context(a, "what is the invoice number?"))

    # an erasure through A is seen by B at once, and the name starts again from 0
    r = a.delete(f"/v1/conversations/{CONV}", headers=A)
    assert r.status_code == 200 and r.json()["messages"] == total + 2
    assert b.get(f"/v1/conversations/{CONV}/history", headers=A).status_code == 404
    assert b.post(f"/v1/conversations/{CONV}/context", json={"query": "invoices?", "budget": 500},
                  headers=A).status_code == 404
    assert append(b, "a new beginning") == 0
    ctx_a = context(a, "what is the invoice number?")
    assert "INV-7731" not in texts(ctx_a) and "French" not in texts(ctx_a)
    assert [m["position"] for m in a.get(f"/v1/conversations/{CONV}/history", headers=A).json()["messages"]] == [0]
