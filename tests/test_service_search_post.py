"""Search text stays out of URLs and out of the server's log.

`GET /v1/search?q=...` put the query in the URL, and `tiermem serve` wrote every request
line, query string included, to its access log: the text of a search ("passport number
X1234567") outlived the erasure of the conversation it found. Invariants:
- `POST /v1/search` takes the query in a JSON body (pydantic: errors name the field), with
  the GET's scope rules (with `conversation_id` a conversation route: outside the prefix
  404 like a missing conversation; without, a namespace route: 403) and its answers;
- the access log of `tiermem serve` (the real CLI, a subprocess) holds paths, never a
  query string.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from edge_server import edge_port
from fastapi.testclient import TestClient
from service_helpers import serve_process

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

ACME = "tok-acme-0123456789abcdef"
GLOBEX = "tok-globex-0123456789abcdef"
TOKENS = {ACME: "acme", GLOBEX: "globex"}
CANARY = "X1234567"


@pytest.fixture
def client(tmp_path: Path, embedder: FastEmbedder) -> Iterator[TestClient]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens=TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("trip", {"role": "user", "content": f"my passport number is {CANARY}"}, namespace="acme")
        mem.append("other", {"role": "user", "content": "the launch is on friday"}, namespace="acme")
        mem.append("g", {"role": "user", "content": "globex's passport"}, namespace="globex")
        with TestClient(create_app(cfg, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
            yield c


def _auth(token: str = ACME, ns: str | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **({"X-Tiermem-Namespace": ns} if ns else {})}


def test_post_search_answers_as_the_get(client: TestClient) -> None:
    for params in ({"q": "passport number"}, {"q": "passport number", "conversation_id": "trip", "k": 1}):
        got = client.get("/v1/search", params=params, headers=_auth())
        posted = client.post("/v1/search", json=params, headers=_auth())
        assert posted.status_code == got.status_code == 200, posted.text
        assert posted.json() == got.json() and posted.json()["hits"]
    assert {h["conversation_id"] for h in client.post("/v1/search", json={"q": "passport"}, headers=_auth())
            .json()["hits"]} <= {"trip", "other"}  # never globex's


# (body, the field the 422 names)
BAD = [
    ({}, ["body", "q"]),
    ({"q": "x", "k": 0}, ["body", "k"]),
    ({"q": "x", "k": 10_000}, ["body", "k"]),
    ({"q": "x", "conversation_id": "a b"}, ["body", "conversation_id"]),
    ({"q": "x", "surprise": 1}, ["body", "surprise"]),
    ({"q": 7}, ["body", "q"]),
]


@pytest.mark.parametrize(("body", "loc"), BAD)
def test_post_search_errors_name_the_field(client: TestClient, body: dict[str, object], loc: list[str]) -> None:
    r = client.post("/v1/search", json=body, headers=_auth())
    assert r.status_code == 422, r.text
    assert [e["loc"] for e in r.json()["detail"]] == [loc]


def test_post_search_keeps_the_walls(client: TestClient) -> None:
    # a conversation outside the prefix: byte for byte a missing conversation
    outside = client.post("/v1/search", json={"q": "passport", "conversation_id": "g"}, headers=_auth(ns="globex"))
    missing = client.post("/v1/search", json={"q": "passport", "conversation_id": "nope"}, headers=_auth())
    assert outside.status_code == missing.status_code == 404
    assert outside.json() == {"detail": "conversation 'g' not found"}
    assert missing.json() == {"detail": "conversation 'nope' not found"}
    # the namespace outside the prefix: 403, whatever the body
    for body in ({"q": "passport"}, {}):
        r = client.post("/v1/search", json=body, headers=_auth(ns="globex"))
        assert r.status_code == 403 and r.json() == {"detail": "namespace 'globex' is outside this token's scope"}
    assert client.post("/v1/search", json={"q": "passport"}).status_code == 401


def test_the_access_log_holds_no_query_string(tmp_path: Path) -> None:
    port = edge_port()
    env = {**os.environ, "TIERMEM_AUTH_TOKENS": f'{{"{ACME}": "acme"}}', "TIERMEM_REDIS_URL": "redis://127.0.0.1:1/0",
           "TIERMEM_SCHEDULER_ENABLED": "false"}
    log = tmp_path / "serve.log"
    with serve_process(tmp_path / "data", port, log, env=env) as url:
        httpx.get(url + "/v1/search", params={"q": f"passport number {CANARY}"})  # no token: 401, still logged
        httpx.get(url + "/v1/stats", params={"q": CANARY}, headers=_auth())
        time.sleep(0.5)
    text = log.read_text()
    assert '"GET /v1/search HTTP/1.1" 401' in text and '"GET /v1/stats HTTP/1.1" 200' in text, text[-2000:]
    assert CANARY not in text
