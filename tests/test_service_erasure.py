"""Erasure on request over HTTP (issue 13, "Erasure on request"):
`DELETE /v1/conversations/{id}` and `DELETE /v1/namespace`, on top of the library's
`Memory.delete_conversation` / `Memory.delete_namespace` (ErasureReport in tiers.cold).

Until the library methods are merged, the tests that reach Memory answer 500 here; the
scope tests (outside the prefix, the required header, the spec) already pass, because
they are answered before Memory is called.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, TOKEN_ALICE, TOKEN_GLOBEX, Served, bearer, served_store

from tiermem import Config
from tiermem.service import NAMESPACE_HEADER
from tiermem.tiers.embed_onnx import FastEmbedder

CANARY = "canary-5f1e-erase-me-9c2d"


@pytest.fixture
def served(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Served]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens=SCOPED_TOKENS)
    with served_store(cfg, embedder) as served:
        yield served


def put(http: httpx.Client, token: str, ns: str, conv: str, *texts: str) -> None:
    for t in texts:
        r = http.post(f"/v1/conversations/{conv}/messages", headers=bearer(token, ns), json={"role": "user", "content": t})
        assert r.status_code == 201, r.text


def count(http: httpx.Client, token: str, ns: str, conv: str) -> int:
    r = http.get(f"/v1/conversations/{conv}/history", headers=bearer(token, ns))
    assert r.status_code in (200, 404), r.text
    return 0 if r.status_code == 404 else len(r.json()["messages"])


def test_delete_a_conversation(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=60) as http:
        put(http, TOKEN_ALICE, "acme/alice", "trip", "book the flight", f"my passport is {CANARY}", "thanks")
        put(http, TOKEN_ALICE, "acme/alice", "keep", "this one stays")
        r = http.delete("/v1/conversations/trip", headers=bearer(TOKEN_ALICE))
        assert r.status_code == 200, r.text
        report = r.json()
        assert (report["conversations"], report["messages"]) == (1, 3)
        assert "bytes_reclaimed" not in report  # the store's figure counts other tenants' writes
        assert len(report["tombstones"]) == 1 and CANARY not in r.text
        assert count(http, TOKEN_ALICE, "acme/alice", "trip") == 0
        assert count(http, TOKEN_ALICE, "acme/alice", "keep") == 1
        # gone is missing: a second erase answers exactly what a never-seen id answers
        again = http.delete("/v1/conversations/trip", headers=bearer(TOKEN_ALICE))
        never = http.delete("/v1/conversations/never", headers=bearer(TOKEN_ALICE))
        assert again.status_code == never.status_code == 404
        assert again.text.replace("trip", "ID") == never.text.replace("never", "ID")
        # and no byte of it is left in the database file or its WAL
        for path in (served.db, served.db.with_name(served.db.name + "-wal")):
            if path.exists():
                assert CANARY.encode() not in path.read_bytes(), path


def test_delete_a_namespace_and_everything_below_it(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=60) as http:
        put(http, TOKEN_ACME, "acme", "tenant-ops", "acme's own")
        put(http, TOKEN_ALICE, "acme/alice", "a-1", "alice one", CANARY)
        put(http, TOKEN_ALICE, "acme/alice/travel", "a-2", "alice travel")
        put(http, TOKEN_ACME, "acme/bob", "b-1", "bob's")
        r = http.delete("/v1/namespace", headers=bearer(TOKEN_ACME, "acme/alice"))
        assert r.status_code == 200, r.text
        assert (r.json()["conversations"], r.json()["messages"]) == (2, 3)
        assert count(http, TOKEN_ALICE, "acme/alice", "a-1") == 0
        assert count(http, TOKEN_ALICE, "acme/alice/travel", "a-2") == 0
        # the parent and the sibling are untouched
        assert count(http, TOKEN_ACME, "acme", "tenant-ops") == 1
        assert count(http, TOKEN_ACME, "acme/bob", "b-1") == 1
        for path in (served.db, served.db.with_name(served.db.name + "-wal")):
            if path.exists():
                assert CANARY.encode() not in path.read_bytes(), path


def test_delete_namespace_needs_the_header(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=60) as http:
        put(http, TOKEN_ACME, "acme", "stays", "not erased by accident")
        r = http.delete("/v1/namespace", headers=bearer(TOKEN_ACME))  # no header: the token's prefix is NOT assumed
        assert r.status_code == 422, r.text
        (item,) = r.json()["detail"]
        assert item["loc"] == ["header", NAMESPACE_HEADER] and "explicitly" in item["msg"]
        assert count(http, TOKEN_ACME, "acme", "stays") == 1


# (token, namespace outside its prefix) -- erasure never reaches past the token's prefix
OUTSIDE = [(TOKEN_ALICE, "acme"), (TOKEN_ALICE, "acme/bob"), (TOKEN_GLOBEX, "acme"), (TOKEN_GLOBEX, "acme/alice")]


@pytest.mark.parametrize(("token", "ns"), OUTSIDE)
def test_erasure_outside_the_prefix_erases_nothing(served: Served, token: str, ns: str) -> None:
    with httpx.Client(base_url=served.url, timeout=60) as http:
        owner = TOKEN_ACME
        put(http, owner, ns, "target", "must survive")
        r = http.delete("/v1/conversations/target", headers=bearer(token, ns))
        missing = http.delete("/v1/conversations/none-such", headers=bearer(token, ns))
        assert r.status_code == missing.status_code == 404
        assert r.text.replace("target", "ID") == missing.text.replace("none-such", "ID")
        r = http.delete("/v1/namespace", headers=bearer(token, ns))
        assert r.status_code == 403 and r.json() == {"detail": f"namespace {ns!r} is outside this token's scope"}
        assert count(http, owner, ns, "target") == 1


def test_erasure_routes_are_documented(served: Served) -> None:
    spec = httpx.get(f"{served.url}/openapi.json").json()
    conv = spec["paths"]["/v1/conversations/{conversation_id}"]["delete"]
    ns = spec["paths"]["/v1/namespace"]["delete"]
    for op in (conv, ns):
        assert op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErasureOut")
        assert any(p["name"] == NAMESPACE_HEADER for p in op["parameters"])
    assert "404" in conv["responses"] and "403" in ns["responses"]
    assert "tombstone" in conv["description"]
