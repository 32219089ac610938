"""`/healthz` on a stopped PostgreSQL answers 503 "down" within a few seconds (its own
wait for a connection, HEALTH_CONNECTION_WAIT_S), while a request still waits the
pool's `cold_pool_wait_s` (503, nothing written). Before: the probe waited the pool's wait (30 s by default), past most
probes' own timeouts. A server of the test's own, stopped and started."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from pg_server import StoppableServer, stoppable_pg  # noqa: F401  (pytest fixture)
from service_helpers import TOKEN_ACME, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.service.routes.ops import HEALTH_CONNECTION_WAIT_S
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import WRITTEN_FIELD

SLACK_S = 3.0  # on top of a wait: a busy test machine
# a request's wait for a connection: past the probe's bound (its wait plus SLACK_S), so a
# probe that waited the pool's wait fails that bound, and no longer (the test waits it out;
# it was 10 s)
POOL_WAIT_S = HEALTH_CONNECTION_WAIT_S + SLACK_S + 1.0


def test_healthz_says_down_soon_while_requests_wait_the_pools_wait(
        tmp_path: Path, stoppable_pg: StoppableServer, embedder: FastEmbedder) -> None:  # noqa: F811
    cfg = Config(data_dir=tmp_path / "data", cold_url=stoppable_pg.url, cold_pool_wait_s=POOL_WAIT_S,
                 auth_tokens={TOKEN_ACME: "acme"})
    path = "/v1/conversations/c/messages"
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url, httpx.Client(base_url=url, timeout=60) as http:
        h = bearer(TOKEN_ACME)
        assert http.post(path, json={"role": "user", "content": "before"}, headers=h).status_code == 201
        assert http.get("/healthz").json()["tiers"]["cold"] == "ok"
        stoppable_pg.stop()
        started = time.monotonic()
        r = http.get("/healthz")
        took = time.monotonic() - started
        assert r.status_code == 503 and r.json()["status"] == "down", r.text
        assert took < HEALTH_CONNECTION_WAIT_S + SLACK_S, took  # before: POOL_WAIT_S
        started = time.monotonic()
        r = http.post(path, json={"role": "user", "content": "during"}, headers=h)
        took = time.monotonic() - started
        assert r.status_code == 503 and r.json()[WRITTEN_FIELD] is False, r.text
        assert POOL_WAIT_S <= took < POOL_WAIT_S + SLACK_S, took  # the requests' wait is unchanged
