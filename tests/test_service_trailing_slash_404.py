"""A documented path spelt with a trailing slash (`GET /v1/limits/`, `POST /v1/prune/`) is
a plain 404 in the service's error shape (`{"detail": "Not Found"}`, JSON), never a
redirect: the OpenAPI document declares no 3xx, and a client that follows a 307 of an
authenticated POST may resend it without its body (or, behind a proxy that terminates
TLS, to an http:// URL). `/v1/mcp/` is the MCP endpoint itself (test_mcp_trailing_slash.py),
and `/ui` the inspector's own redirect to its page `/ui/`.

Fails on the code before (review of the HTTP contract, 2026-12-07, base 1be59d0):
Starlette's `redirect_slashes` answered every one of them 307 with a Location header.

The real app served by uvicorn, real sockets, the token each path needs."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from hash_embedder import HashEmbedder
from service_helpers import READ_TIMEOUT_S, TOKEN_ACME, TOKEN_METRICS, serve_in_thread

from tiermem import Config, Memory

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
NOT_FOUND = 404
# a concrete value for each path parameter the document names
PATH_VALUES = {"{conversation_id}": "trip", "{position}": "0"}
SERVED_IN_PLACE = {"/v1/mcp"}  # answered at its slashed spelling too


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("trailing-slash") / "data", auth_tokens={TOKEN_ACME: NS},
                 metrics_tokens=[TOKEN_METRICS])
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as base:
        yield base


def _operations() -> list[tuple[str, str]]:
    """(method, path) of each documented operation (a fresh app: parametrize runs first)."""
    from tiermem.service import create_app

    spec = create_app(Config(auth_tokens={TOKEN_ACME: NS}), start_scheduler=False).openapi()
    return [(m.upper(), p) for p, item in spec["paths"].items() if p not in SERVED_IN_PLACE for m in item]


def _concrete(template: str) -> str:
    for name, value in PATH_VALUES.items():
        template = template.replace(name, value)
    return template


@pytest.mark.parametrize(("method", "template"), _operations(), ids=[f"{m} {p}" for m, p in _operations()])
def test_a_trailing_slash_is_a_plain_404_never_a_redirect(url: str, method: str, template: str) -> None:
    token = TOKEN_METRICS if template == "/metrics" else TOKEN_ACME
    body = {} if method in ("POST", "PUT", "PATCH") else None
    r = httpx.request(method, url + _concrete(template) + "/", json=body,
                      headers={"Authorization": f"Bearer {token}"}, timeout=READ_TIMEOUT_S, follow_redirects=False)
    assert r.status_code == NOT_FOUND, (method, template, r.status_code, r.headers.get("location"))
    assert "location" not in r.headers
    if method != "HEAD":
        assert r.headers["content-type"].startswith("application/json")
        assert r.json() == {"detail": "Not Found"}


def test_the_inspector_still_leads_from_ui_to_its_page(url: str) -> None:
    # its own route (`/ui` -> `/ui/`), not the router's slash redirect
    r = httpx.get(url + "/ui", timeout=READ_TIMEOUT_S, follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/ui/"
