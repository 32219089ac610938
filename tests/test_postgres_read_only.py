"""A PostgreSQL that refuses writes (a hot standby after a failover, a role or URL with
`default_transaction_read_only`): the store still opens for reads, `tiermem serve`
answers every read, and a write is 503 with Retry-After and `"written": false` (the
server refused the statement before it wrote anything, so a client may send it again).
Before: opening failed on `CREATE EXTENSION IF NOT EXISTS` (refused in a read-only
transaction even when the extension exists), and a write that reached a read-only
server was a 500 "internal error" (SQLSTATE 25006 was not recognised)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from pg_server import fresh_schema, with_options
from service_helpers import TOKEN_ACME, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.service.handlers import STORAGE_RETRY_AFTER_S
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import WRITTEN_FIELD
from tiermem.tiers.files import INCOMPLETE_REQUEST_TEXT

CONV = "standby-1"
LINES = ["The invoice for March is overdue.", "Please resend it to billing."]


def read_only(url: str) -> str:
    """`url` with every session of it read-only, as on a standby."""
    return with_options(url, "-c default_transaction_read_only=on")


@pytest.fixture
def configs(tmp_path: Path, pg_url: str) -> tuple[Config, Config]:
    writable = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=fresh_schema(),
                      auth_tokens={TOKEN_ACME: "acme"})
    return writable, writable.model_copy(update={"cold_url": read_only(pg_url)})


def test_a_read_only_database_serves_reads_and_refuses_writes_with_503_unwritten(
        configs: tuple[Config, Config], embedder: FastEmbedder) -> None:
    writable, standby = configs
    with Memory(writable, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many(CONV, [{"role": "user", "content": t} for t in LINES], namespace="acme")
        mem.catch_up()
    # before: this open failed with ReadOnlySqlTransaction (CREATE EXTENSION)
    with Memory(standby, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(standby, mem) as url, httpx.Client(base_url=url, timeout=60) as http:
        h = bearer(TOKEN_ACME)
        got = http.get(f"/v1/conversations/{CONV}/history", headers=h)
        assert got.status_code == 200, got.text
        assert [m["message"]["content"] for m in got.json()["messages"]] == LINES
        found = http.post("/v1/search", json={"q": "overdue invoice", "conversation_id": CONV}, headers=h)
        assert found.status_code == 200 and found.json()["hits"], found.text
        ctx = http.post(f"/v1/conversations/{CONV}/context", json={"query": "invoice", "budget": 500}, headers=h)
        assert ctx.status_code == 200, ctx.text
        writes = [
            # an append to an existing conversation (one autocommit statement)
            ("POST", f"/v1/conversations/{CONV}/messages", {"role": "user", "content": "one more"}, False),
            # the first append of a new conversation (an explicit transaction)
            ("POST", "/v1/conversations/standby-2/messages", {"role": "user", "content": "new"}, False),
            # an erasure: it commits in batches, so its refusal never says nothing was written
            # (8fa7778: it may be partly done and is safe to send again)
            ("DELETE", f"/v1/conversations/{CONV}", None, True),
        ]
        for method, path, body, several in writes:
            r = http.request(method, path, json=body, headers=h)
            # before: 500 {"detail": "internal error"}
            assert r.status_code == 503, (path, r.status_code, r.text)
            if several:
                assert WRITTEN_FIELD not in r.json(), r.text
                assert INCOMPLETE_REQUEST_TEXT in r.json()["detail"], r.text
            else:
                assert r.json()[WRITTEN_FIELD] is False, r.text
            assert "read-only" in r.json()["detail"]
            assert r.headers["retry-after"] == str(STORAGE_RETRY_AFTER_S)
        assert http.get("/healthz").json()["tiers"]["cold"] == "read-only"
    with Memory(writable, embedder=embedder, hot=False, background_indexing=False) as mem:
        assert [m.text for m in mem.history(CONV, namespace="acme")] == LINES  # nothing was written
