"""A read behind a lock on the cold log (an operator's `LOCK TABLE`, an erasure's
VACUUM FULL) is 503 busy after one busy_timeout_ms, and the hot tier is not blamed.
Before: the hot link's read of the log inside the hot path (its generation, its rows)
timed out, was taken for a failure of the Redis set ("hot set of ... failed
unexpectedly", logged at ERROR with a traceback), the set was dropped and rebuilt from
the log (a second wait), that failed as "hot tier unavailable" (the link marked
degraded, /healthz hot "degraded" with Redis healthy, until the next hot write), and
the context fell back to the log (a third wait): 3 x busy_timeout_ms before its 503.
Real PostgreSQL, a real Redis, a real second connection holding the lock, real HTTP."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from hot_fixtures import own_redis
from pg_server import fresh_schema
from service_helpers import TOKEN_ACME, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import WRITTEN_FIELD

BUSY_TIMEOUT_MS = 1500  # each statement's wait for a lock
# the read's whole wait: one busy_timeout_ms and the machine's slack, under the two
# further waits it took before (a rebuild's, the fallback's)
ONE_WAIT_S = 2 * BUSY_TIMEOUT_MS / 1000
HUNG_S = 30.0  # the client's timeout
CONV = "locked-read"


# (the read, its request)
@pytest.mark.parametrize(("method", "path", "body"), [
    # the planner's read: the hot set first (the hot link reads the log), then the log
    ("POST", f"/v1/conversations/{CONV}/context", {"query": "where is the seat", "budget": 300}),
    # the log alone (no hot read): one wait before too, and the link not blamed; kept so
    ("GET", f"/v1/conversations/{CONV}/history", None),
])
def test_a_read_behind_a_cold_lock_is_503_busy_once_and_the_hot_tier_stays_ok(
        tmp_path: Path, pg_url: str, embedder: FastEmbedder, caplog: pytest.LogCaptureFixture,
        method: str, path: str, body: dict[str, object] | None) -> None:
    schema = fresh_schema()
    with own_redis(tmp_path / "redis") as srv:
        cfg = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=schema, redis_url=srv.url,
                     busy_timeout_ms=BUSY_TIMEOUT_MS, auth_tokens={TOKEN_ACME: "acme"})
        with Memory(cfg, embedder=embedder, background_indexing=False) as mem, \
                serve_in_thread(cfg, mem) as url, httpx.Client(base_url=url, timeout=HUNG_S) as http:
            h = bearer(TOKEN_ACME)
            assert http.post(f"/v1/conversations/{CONV}/messages", json={"role": "user", "content": "My seat is 12A."},
                             headers=h).status_code == 201
            assert http.request(method, path, json=body, headers=h).status_code == 200  # the set is built
            assert http.get("/healthz").json()["tiers"]["hot"] == "ok"
            caplog.clear()
            with caplog.at_level(logging.WARNING), psycopg.connect(pg_url) as operator:
                operator.execute(f'LOCK TABLE "{schema}".messages IN ACCESS EXCLUSIVE MODE')
                started = time.monotonic()
                r = http.request(method, path, json=body, headers=h)
                took = time.monotonic() - started
                operator.rollback()
            assert r.status_code == 503, r.text
            assert r.json()[WRITTEN_FIELD] is False and "busy" in r.json()["detail"]
            assert took < ONE_WAIT_S, took  # before (context): 3 waits
            # not Redis's failure: no ERROR, no "hot tier unavailable", the link not degraded
            assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR], caplog.text
            assert "hot tier unavailable" not in caplog.text
            assert mem.hot is not None and mem.hot.healthy
            assert http.get("/healthz").json()["tiers"]["hot"] == "ok"  # before: "degraded"
            assert http.request(method, path, json=body, headers=h).status_code == 200
