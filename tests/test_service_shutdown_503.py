"""After a shutdown that closed the app's own Memory, every route that needs it answers
503 with Retry-After saying the service is shutting down (the shape and Retry-After of
/v1/mcp's 503 at shutdown, 4c21c76), never that it is starting; /healthz says
"stopping"; the inspector's pages say so too. An app started again serves again.

Fails on the code before (review of the HTTP contract, 2026-12-07, base 1be59d0): each
answered 503 "the service is starting" (/healthz `"status": "starting"`), though the
service had started and was stopping.

The real app (`create_app`, its middlewares, `hand_over` as `tiermem serve` does) over a
real SQLite store, driven through its ASGI interface with Starlette's TestClient: a
request after the lifespan cannot reach uvicorn, which closes its sockets first, but can
reach the app (an ASGI server that shuts down around in-flight connections, a harness)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hash_embedder import HashEmbedder
from service_helpers import TOKEN_ACME

from tiermem import Config, Memory
from tiermem.inspector.routes import COOKIE, _cookie_value
from tiermem.service import create_app
from tiermem.service.app import hand_over
from tiermem.service.runtime import STARTING_RETRY_AFTER_S

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
BASE = "http://127.0.0.1"  # a loopback name: the guard's Host check passes
SHUTTING_DOWN = "the service is shutting down"  # the 503's detail (runtime.SHUTTING_DOWN)
STARTING = "the service is starting"  # ... while it starts (runtime.STARTING)
HEADERS = {"Authorization": f"Bearer {TOKEN_ACME}"}
C = "/v1/conversations/trip"

# (method, path, JSON body) of routes that need the Memory, one per area
ROUTES = [
    ("GET", "/v1/conversations", None),  # admin: the namespace's listing
    ("GET", "/v1/stats", None),  # admin: counts
    ("POST", "/v1/search", {"q": "lisbon"}),  # recall
    ("GET", f"{C}/history", None),  # one conversation's read
    ("POST", f"{C}/messages", {"role": "user", "content": "hi"}),  # a write
]


def _app(tmp_path: Path) -> FastAPI:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: NS})
    app = create_app(cfg, start_scheduler=False)
    # as `tiermem serve`: the lifespan owns it and closes it at shutdown
    hand_over(app, Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False))
    return app


@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_after_an_app_owned_shutdown_a_route_says_shutting_down(tmp_path: Path, method: str, path: str,
                                                                 body: dict[str, str] | None) -> None:
    app = _app(tmp_path)
    client = TestClient(app, base_url=BASE, raise_server_exceptions=False)
    with client:
        assert client.request(method, path, json=body, headers=HEADERS).status_code < 500
    r = client.request(method, path, json=body, headers=HEADERS)
    assert r.status_code == 503, r.text
    assert r.json() == {"detail": SHUTTING_DOWN}  # was "the service is starting"
    assert r.headers["retry-after"] == str(STARTING_RETRY_AFTER_S)
    assert app.state.runtime.registry.get_sample_value("tiermem_http_unhandled_errors_total") == 0


def test_healthz_and_the_inspector_say_stopping_then_an_app_started_again_serves(tmp_path: Path) -> None:
    app = _app(tmp_path)
    client = TestClient(app, base_url=BASE, raise_server_exceptions=False)
    with client:
        assert client.get("/healthz").json()["status"] != "starting"
    health = client.get("/healthz")
    assert health.status_code == 503 and health.json()["status"] == "stopping", health.text  # was "starting"
    assert health.headers["retry-after"] == str(STARTING_RETRY_AFTER_S)
    client.cookies.set(COOKIE, _cookie_value(TOKEN_ACME))  # signed in, as the login form leaves it
    page = client.get("/ui/")  # an HTML page: its text
    assert page.status_code == 503 and SHUTTING_DOWN in page.text and STARTING not in page.text, page.text
    # started again (a Memory handed over anew): not shutting down any more
    cfg = app.state.runtime.config
    hand_over(app, Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False))
    with client:
        assert client.get("/v1/stats", headers=HEADERS).status_code == 200
