"""The statuses the OpenAPI document declares for each route, as a table: what a client
generated from the document handles. Each group says why it answers what it answers, so
a status dropped or added by accident fails here (test_openapi_guard_statuses.py sends
the guard's refusals to every route; this pins the whole set per route).

Fails on the code before (review of the HTTP contract, 2026-12-07, base 7298b5a): no
route declared 408 or 421, the conversation routes no 403, /v1/limits only 401,
/metrics no 400/413/415/422, /healthz only 503, and /v1/mcp was absent; (2026-12-07,
base 1a248cb) no route but /v1/mcp declared the 405 of a method its path does not take
(tests/test_service_method_not_allowed.py sends them); (2026-12-07, base 1be59d0) no
path had a HEAD operation, though HEAD is answered wherever GET is (test_service_head.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tiermem import Config
from tiermem.service import create_app

pytestmark = pytest.mark.usefixtures("clean_env")

# what the guard answers before any route runs: a header twice, a body that never
# arrives, too large, not JSON, not valid JSON (/healthz too)
BODY = {"400", "408", "413", "415", "422"}
# ... a foreign Origin or Host (every route but /healthz, which probes reach by any name)
HOST = {"403", "421"}
# ... and no valid token (/v1)
GUARD = BODY | HOST | {"401"}
# a /v1 route that reaches the storage: busy, read-only, failing (503) or full (507)
STORAGE = GUARD | {"503", "507"}
# a conversation route: no such conversation, or outside the token's prefix (404)
CONV = STORAGE | {"404"}
C = "/v1/conversations/{conversation_id}"
# every path: a method it does not take (405, `Allow`), declared on each of its operations
METHOD = {"405"}

ROUTES: dict[tuple[str, str], set[str]] = {
    ("GET", "/healthz"): {"200", "503"} | BODY,  # 503: the cold tier down, or starting
    ("GET", "/metrics"): {"200"} | GUARD,  # 401/403 its own: a metrics token
    ("GET", "/v1/limits"): {"200"} | GUARD,  # no storage read
    # the appends: 409 a conditional append that found the log elsewhere
    ("POST", f"{C}/messages"): {"201", "409"} | CONV,
    ("POST", f"{C}/messages:batch"): {"201", "409"} | CONV,
    ("GET", f"{C}/history"): {"200"} | CONV,
    ("GET", f"{C}/facts"): {"200"} | CONV,
    ("GET", f"{C}/active"): {"200"} | CONV,
    ("POST", f"{C}/fork"): {"201"} | CONV,
    ("POST", f"{C}/pins"): {"200"} | CONV,
    ("DELETE", f"{C}/pins/{{position}}"): {"200"} | CONV,
    ("POST", f"{C}/checkpoints"): {"201"} | CONV,
    ("POST", f"{C}/context"): {"200"} | CONV,
    ("DELETE", C): {"200"} | CONV,  # an erasure: its 503/507 say it may be partly done
    # search: in a conversation (404) or the namespace (403 outside the prefix)
    ("GET", "/v1/search"): {"200"} | CONV,
    ("POST", "/v1/search"): {"200"} | CONV,
    # the namespace routes: 403 outside the token's prefix
    ("POST", "/v1/prune"): {"200"} | STORAGE,
    ("DELETE", "/v1/namespace"): {"200"} | STORAGE,
    ("GET", "/v1/conversations"): {"200"} | STORAGE,
    ("GET", "/v1/stats"): {"200"} | STORAGE,
}
# HEAD wherever GET (tiermem.service.head): the GET's statuses, without a body
HEADS = {("HEAD", path): statuses for (method, path), statuses in ROUTES.items() if method == "GET"}
EXPECTED = {route: statuses | METHOD for route, statuses in {**ROUTES, **HEADS}.items()}
# with the mcp extra: JSON-RPC over POST; 202 a notification, 405 any other method,
# 503 the MCP server starting; no 404 or 507 (a tool's failure is a JSON-RPC result)
MCP: dict[tuple[str, str], set[str]] = {("POST", "/v1/mcp"): {"200", "202", "405", "503"} | GUARD}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return create_app(Config(auth_tokens={"tok-acme-0123456789abcdef": "acme"}), start_scheduler=False).openapi()


def test_the_document_has_exactly_these_routes(spec: dict[str, Any]) -> None:
    documented = {(m.upper(), p) for p, item in spec["paths"].items() for m in item}
    mcp = set(MCP) if ("POST", "/v1/mcp") in documented else set()
    assert documented == set(EXPECTED) | mcp


@pytest.mark.parametrize(("method", "path"), [*EXPECTED, *MCP], ids=[f"{m} {p}" for m, p in [*EXPECTED, *MCP]])
def test_each_route_declares_its_statuses(spec: dict[str, Any], method: str, path: str) -> None:
    if path == "/v1/mcp":
        pytest.importorskip("mcp")
    expected = {**EXPECTED, **MCP}[(method, path)]
    responses = spec["paths"][path][method.lower()]["responses"]
    assert set(responses) == expected, (sorted(set(responses) - expected), sorted(expected - set(responses)))
    for status, entry in responses.items():
        assert entry.get("description"), (method, path, status)  # every status says when it comes
