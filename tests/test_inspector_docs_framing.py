"""`/docs` and `/redoc` may not be framed by another site (a security review, 2026-12-06).

Swagger UI's "Try it out" sends real requests to the API, and on a `--no-auth` server it
needs no token at all: a page of any other site could frame `/docs` and have a visitor
click through it (clickjacking). Before, both pages were sent without X-Frame-Options or
a frame-ancestors policy (and without nosniff or a referrer policy), unlike every `/ui`
page. FastAPI's TestClient on the real app, real SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("docs-framing") / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_refuse_framing_and_sniffing(mem: Memory, page: str) -> None:
    # a --no-auth server: the one whose framed "Try it out" needs no credential
    app = create_app(mem.config, mem, auth=False, namespace="acme", start_scheduler=False)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        r = c.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert r.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"
