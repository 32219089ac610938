"""Every HTML answer of the inspector carries the page headers, not only the full pages
(a security review, 2026-12-06): a refusal or an htmx fragment is a page to a browser
sent to its URL, or to a site that frames it. Before, every case below came without
X-Frame-Options, the Content-Security-Policy, nosniff, no-store and the referrer policy
that the full pages send. FastAPI's TestClient on the real app, real SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from inspector_helpers import CONV, TOKEN_ACME, TOKENS

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

HX = {"HX-Request": "true"}
# what every HTML answer must say (tiermem.inspector.routes.PAGE_HEADERS)
WANTED = {"x-frame-options": "DENY", "x-content-type-options": "nosniff", "referrer-policy": "no-referrer",
          "cache-control": "no-store"}


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("fragment-headers") / "data", auth_tokens=TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        m.append(CONV, {"role": "user", "content": "I need a flight to Oslo."}, namespace="acme")
        yield m


@pytest.fixture
def client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        yield c


# (method, path, JSON body, headers, signed in, the status) -- each an HTML answer that is no full page
ANSWERS: list[tuple[str, str, Any, dict[str, str], bool, int]] = [
    ("POST", "/ui/login", {"token": TOKEN_ACME}, {}, False, 403),  # no HX-Request: the CSRF refusal
    ("POST", "/ui/login", {"token": "not-a-token"}, HX, False, 401),  # a token that is not valid here
    ("POST", "/ui/login", {"token": ""}, HX, False, 422),  # the login form's model refuses it
    ("GET", f"/ui/c/{CONV}/turns?positions=x", None, {}, True, 422),  # positions that are no integers
    ("POST", f"/ui/c/{CONV}/pins", {"position": 0}, HX, True, 422),  # the pin form's model: no `pinned`
    ("POST", f"/ui/c/{CONV}/pins", {"position": 9, "pinned": True}, HX, True, 422),  # past the log's end
    ("GET", f"/ui/c/{CONV}/turns?positions=0", None, {}, True, 200),  # a view's source turns (a fragment)
    ("POST", f"/ui/c/{CONV}/plan", {"query": "flight?", "budget": 500}, HX, True, 200),  # a re-plan
]


@pytest.mark.parametrize(("method", "path", "body", "headers", "signed_in", "status"), ANSWERS)
def test_every_html_answer_sends_the_page_headers(client: TestClient, method: str, path: str, body: Any,
                                                  headers: dict[str, str], signed_in: bool, status: int) -> None:
    if signed_in:
        assert client.post("/ui/login", json={"token": TOKEN_ACME}, headers=HX).status_code == 200
    r = client.request(method, path, json=body, headers=headers)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("text/html")
    assert {k: r.headers.get(k) for k in WANTED} == WANTED
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
