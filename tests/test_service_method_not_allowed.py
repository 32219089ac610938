"""A method a path does not take (PUT on /v1/limits, GET on /v1/prune, PATCH on
/v1/search, ...) is answered 405, and the OpenAPI document declares it: on every
operation of the path, in the service's error shape (`{"detail": ...}`, JSON, /metrics
too), with `Allow` listing every method the path takes, the document's own.

Fails on the code before (review of the HTTP contract, 2026-12-07, base 1a248cb): no
route but /v1/mcp declared 405, though the router answered it on every path; and a path
served by two operations (/v1/search: GET and POST) answered `Allow: GET`, the first
route's method only, and the detail named no method. (2026-12-07, base 1be59d0) HEAD was
answered 405 on every path that takes GET, and Allow named no HEAD (test_service_head.py).

The real app served by uvicorn, real sockets; each documented path is sent each method
it does not take, with the token the path needs (so the guard lets it through)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hash_embedder import HashEmbedder
from service_helpers import READ_TIMEOUT_S, TOKEN_ACME, TOKEN_METRICS, serve_in_thread

from tiermem import Config, Memory

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
METHOD_NOT_ALLOWED = 405
# the methods sent to each path (those it does not take); HEAD answers no body
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
# a concrete value for each path parameter the document names
PATH_VALUES = {"{conversation_id}": "trip", "{position}": "0"}
# /v1/mcp answers its other methods itself, as a JSON-RPC error (tests/test_mcp_http_post_only.py)
OWN_405_PATHS = {"/v1/mcp"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("method-not-allowed") / "data", auth_tokens={TOKEN_ACME: NS},
                 metrics_tokens=[TOKEN_METRICS])
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url:
        yield url, httpx.get(url + "/openapi.json", timeout=READ_TIMEOUT_S).json()


def _paths() -> list[str]:
    """The document's paths (read from a fresh app: parametrize runs before the fixture)."""
    from tiermem.service import create_app

    spec = create_app(Config(auth_tokens={TOKEN_ACME: NS}), start_scheduler=False).openapi()
    return [p for p in spec["paths"] if p not in OWN_405_PATHS]


def _concrete(template: str) -> str:
    for name, value in PATH_VALUES.items():
        template = template.replace(name, value)
    return template


@pytest.mark.parametrize("template", _paths())
def test_every_other_method_is_a_declared_405_naming_the_paths_methods(served: tuple[str, dict[str, Any]],
                                                                       template: str) -> None:
    url, spec = served
    operations = spec["paths"][template]
    takes = sorted(m.upper() for m in operations)
    token = TOKEN_METRICS if template == "/metrics" else TOKEN_ACME
    sent = [m for m in METHODS if m not in takes]
    assert sent  # every path leaves some method out
    for method in sent:
        r = httpx.request(method, url + _concrete(template), headers={"Authorization": f"Bearer {token}"},
                          timeout=READ_TIMEOUT_S)
        assert r.status_code == METHOD_NOT_ALLOWED, (method, template, r.status_code, r.text)
        # Allow: every method the document gives the path (was the first route's only)
        assert sorted(m.strip() for m in r.headers["allow"].split(",")) == takes, (method, template)
        assert r.headers["content-type"].startswith("application/json"), (method, template)
        if method != "HEAD":
            detail = r.json()["detail"]
            assert all(m in detail for m in takes), (method, template, detail)
        # declared on each operation of the path, as JSON (HEAD's without a body), with the Allow header
        for op_method, operation in operations.items():
            declared = operation["responses"].get(str(METHOD_NOT_ALLOWED))
            assert declared is not None, (op_method, template)
            assert "Allow" in declared["headers"], (op_method, template)
            if op_method == "head":
                assert "content" not in declared, template
            else:
                assert "application/json" in declared["content"], (op_method, template)
    # a path that takes GET takes HEAD (tiermem.service.head), and only such a path
    assert ("GET" in takes) == ("HEAD" in takes), (template, takes)
