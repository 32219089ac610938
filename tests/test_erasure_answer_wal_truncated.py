"""The three erasure answers (`DELETE /v1/conversations/{id}`, `DELETE /v1/namespace`,
`POST /v1/prune`) say whether the WAL was truncated (`wal_truncated`), as the library's
`ErasureReport` does, and `tiermem.client.Client` reads it. While another process holds a
read transaction on the SQLite WAL, the erased rows' old pages stay there: both the HTTP
answer and the client's report say `wal_truncated` false. A service older than the field
answers nothing: the client says "not known" (None), not the report's default True.

Fails on the code before (2026-12-07): no erasure answer carried `wal_truncated`, so the
client reported the default True, a truncation it knew nothing about, while the WAL still
held the erased pages.

The real app served by uvicorn, a real SQLite file, a real reader process."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from hash_embedder import HashEmbedder
from pg_server import fresh_schema
from service_helpers import TOKEN_ACME, Served, bearer, serve_app, serve_in_thread, served_store
from wal_reader import read_transaction

from tiermem import Config, Memory
from tiermem.client import Client
from tiermem.tiers.models import ErasureReport

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
CONV = "old"
IDLE_S = 0.2  # a conversation idle this long is pruned by `older_than_seconds=IDLE_S`
HTTP_TIMEOUT_S = 60.0

# route name -> (method, path, JSON body, extra headers) of the HTTP erasure
HTTP_ROUTES: dict[str, tuple[str, str, dict[str, Any] | None, dict[str, str]]] = {
    # one conversation, by name
    "delete_conversation": ("DELETE", f"/v1/conversations/{CONV}", None, {}),
    # the whole namespace, named by the header (required)
    "delete_namespace": ("DELETE", "/v1/namespace", None, bearer(TOKEN_ACME, NS)),
    # the namespace's idle conversations
    "prune": ("POST", "/v1/prune", {"older_than_seconds": IDLE_S}, {}),
}

# route name -> the client's call of it
CLIENT_CALLS: dict[str, Callable[[Client], ErasureReport]] = {
    "delete_conversation": lambda c: c.delete_conversation(CONV),
    "delete_namespace": lambda c: c.delete_namespace(NS),
    "prune": lambda c: c.prune(IDLE_S),
}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: NS})
    with served_store(cfg) as served:
        served.memory.append(CONV, {"role": "user", "content": "the old thread"}, namespace=NS)
        time.sleep(2 * IDLE_S)  # idle: the prune takes it
        yield served


@pytest.fixture(params=[True, False], ids=["reader", "no_reader"])
def held(request: pytest.FixtureRequest, served: Served) -> Iterator[bool]:
    """True: another process holds a read transaction on the WAL for the test."""
    if not request.param:
        yield False
        return
    with read_transaction(served.db) as read:
        assert int(read) > 0
        yield True


@pytest.mark.parametrize("route", list(HTTP_ROUTES))
def test_the_http_answer_says_whether_the_wal_was_truncated(served: Served, held: bool, route: str) -> None:
    method, path, body, headers = HTTP_ROUTES[route]
    r = httpx.request(method, served.url + path, json=body, headers=headers or bearer(TOKEN_ACME),
                      timeout=HTTP_TIMEOUT_S)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["conversations"] == 1  # the erasure happened either way
    assert answer["wal_truncated"] is (not held)  # was absent
    assert answer["scrubbed"] is (not held)  # the WAL's pages are the unscrubbed bytes


@pytest.mark.parametrize("route", list(CLIENT_CALLS))
def test_the_client_reports_what_the_service_answered(served: Served, held: bool, route: str) -> None:
    with Client(served.url, token=TOKEN_ACME, namespace=NS) as client:
        report = CLIENT_CALLS[route](client)
    assert report.conversations == 1
    assert report.wal_truncated is (not held)  # was True under the reader: the default


@pytest.mark.parametrize("route", list(HTTP_ROUTES))
def test_on_postgresql_the_answer_says_false(tmp_path: Path, pg_url: str, route: str) -> None:
    """What the library reports there: PostgreSQL's WAL (pg_wal/, its archives and
    replicas) keeps the erased records until its segments are recycled."""
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: NS}, cold_url=pg_url,
                 cold_schema=fresh_schema())
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url:
        mem.append(CONV, {"role": "user", "content": "the old thread"}, namespace=NS)
        time.sleep(2 * IDLE_S)
        method, path, body, headers = HTTP_ROUTES[route]
        r = httpx.request(method, url + path, json=body, headers=headers or bearer(TOKEN_ACME), timeout=HTTP_TIMEOUT_S)
        assert r.status_code == 200, r.text
        assert r.json()["conversations"] == 1
        assert r.json()["wal_truncated"] is False  # was absent, and the client said True


def test_the_openapi_document_declares_it_on_every_erasure(served: Served) -> None:
    spec = httpx.get(served.url + "/openapi.json", timeout=HTTP_TIMEOUT_S).json()
    for method, path, _, _ in HTTP_ROUTES.values():
        ok = spec["paths"][path.replace(f"/{CONV}", "/{conversation_id}")][method.lower()]["responses"]["200"]
        ref = ok["content"]["application/json"]["schema"]["$ref"]
        schema = spec["components"]["schemas"][ref.rsplit("/", 1)[1]]
        assert "wal_truncated" in schema["required"], (method, path)
        assert schema["properties"]["wal_truncated"]["type"] == "boolean"


# what a service before `wal_truncated` answered each erasure
OLDER_ERASURE: dict[str, Any] = {"conversations": 1, "messages": 1, "scrubbed": True,
                                 "tombstones": [{"id": CONV, "namespace": NS, "messages": 1}]}
OLDER_PRUNE: dict[str, Any] = {**OLDER_ERASURE, "conversation_ids": [CONV]}


@pytest.mark.parametrize("route", list(CLIENT_CALLS))
def test_the_client_against_an_older_service_says_not_known(route: str) -> None:
    older = FastAPI()

    @older.delete(f"/v1/conversations/{CONV}")
    @older.delete("/v1/namespace")
    def erase() -> dict[str, Any]:
        return OLDER_ERASURE

    @older.post("/v1/prune")
    def prune() -> dict[str, Any]:
        return OLDER_PRUNE

    with serve_app(older) as url, Client(url, token=TOKEN_ACME, namespace=NS) as client:
        report = CLIENT_CALLS[route](client)
    assert report.conversations == 1 and report.scrubbed is True
    assert report.wal_truncated is None  # was True: a truncation the client knew nothing about
