"""The OpenAPI document of a server without auth (`tiermem serve --no-auth`) says what that
server does: no security scheme, no 401 on any route, and a description that says no
call needs a token and which namespace a request acts in. Before, its description said
"Every /v1 call needs `Authorization: Bearer <token>`" and every /v1 route declared
"401: missing or invalid bearer token", which such a server never answers. A server with
tokens keeps its bearer scheme, 401s and description.

The real app served by uvicorn on loopback, real requests (httpx)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from hash_embedder import HashEmbedder
from service_helpers import READ_TIMEOUT_S, TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory

pytestmark = pytest.mark.usefixtures("clean_env")

NAMESPACE = "lab"  # the namespace `--no-auth` serves (serve's --namespace)
UNAUTHORIZED = "401"


def _spec(tmp_path: Path, auth: bool) -> tuple[dict[str, Any], int]:
    """The served document, and what a /v1 call without a token is answered."""
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: "acme"})
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem, auth=auth, namespace=NAMESPACE) as url:
        spec = httpx.get(url + "/openapi.json", timeout=READ_TIMEOUT_S).json()
        again = httpx.get(url + "/openapi.json", timeout=READ_TIMEOUT_S).json()  # the cached document
        assert again == spec
        status = httpx.get(url + "/v1/conversations", timeout=READ_TIMEOUT_S).status_code
    return spec, status


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, method, op) for path, ops in spec["paths"].items() for method, op in ops.items()
            if isinstance(op, dict)]


def test_no_auth_documents_no_token(tmp_path: Path) -> None:
    spec, status = _spec(tmp_path, auth=False)
    assert status == 200  # what the document now says: no token needed
    assert "securitySchemes" not in spec.get("components", {})
    assert [p for p, _, op in _operations(spec) if "security" in op] == []
    assert [f"{m} {p}" for p, m, op in _operations(spec) if UNAUTHORIZED in op.get("responses", {})] == []
    description = spec["info"]["description"]
    assert "Bearer <token>" not in description and "needs a token from" not in description, description
    assert "without authentication" in description and "no /v1 call needs a token" in description, description
    assert f"`{NAMESPACE}`" in description, description


def test_with_tokens_the_bearer_scheme_stays(tmp_path: Path) -> None:
    spec, status = _spec(tmp_path, auth=True)
    assert status == 401
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    v1 = [(p, op) for p, _, op in _operations(spec) if p.startswith("/v1/") and not p.startswith("/v1/mcp")]
    assert v1 and all(UNAUTHORIZED in op["responses"] and op.get("security") for _, op in v1), \
        [p for p, op in v1 if UNAUTHORIZED not in op["responses"] or not op.get("security")]
    assert "Every /v1 call needs `Authorization: Bearer <token>`" in spec["info"]["description"]
