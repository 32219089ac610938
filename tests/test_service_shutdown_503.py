"""After the service's shutdown, every route that needs the Memory answers 503 with
Retry-After saying the service is shutting down (the shape and Retry-After of /v1/mcp's
503 at shutdown, 4c21c76), never that it is starting, whoever owns the Memory: the app
(handed over, closed by the lifespan) or the caller (passed to create_app, left open for
it); /healthz says "stopping"; the inspector's pages say so too. An app started again
serves again.

Fails on the code before (review of the HTTP contract, 2026-12-07, base 1be59d0): with
the app's Memory each answered 503 "the service is starting" (/healthz `"status":
"starting"`), though the service had started and was stopping. With the caller's, until
this stop's fix, each was still served (200/201, /healthz "ok") by the stopped service,
whose scheduler was gone, while /v1/mcp answered the same app 503 "shutting down".

The real app (`create_app`, its middlewares, `hand_over` as `tiermem serve` does) over a
real SQLite store, driven through its ASGI interface with Starlette's TestClient: a
request after the lifespan cannot reach uvicorn, which closes its sockets first, but can
reach the app (an ASGI server that shuts down around in-flight connections, a harness)."""

from __future__ import annotations

from collections.abc import Iterator
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


# who owns the Memory: the app (handed over as `tiermem serve` does, closed by the
# lifespan: was "starting") or the caller (passed to create_app, open after the
# lifespan: was served as if the service still ran)
OWNERS = ["app", "caller"]


@pytest.fixture(params=OWNERS)
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FastAPI]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: NS})
    mem = Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False)
    try:
        if request.param == "caller":
            yield create_app(cfg, mem, start_scheduler=False)
            mem.conversations(NS)  # the caller's Memory stays open: it still answers
        else:
            served = create_app(cfg, start_scheduler=False)
            hand_over(served, mem)
            yield served
    finally:
        mem.close()


@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_after_the_shutdown_a_route_says_shutting_down(app: FastAPI, method: str, path: str,
                                                       body: dict[str, str] | None) -> None:
    client = TestClient(app, base_url=BASE, raise_server_exceptions=False)
    with client:
        assert client.request(method, path, json=body, headers=HEADERS).status_code < 500
    r = client.request(method, path, json=body, headers=HEADERS)
    assert r.status_code == 503, r.text
    assert r.json() == {"detail": SHUTTING_DOWN}  # was "the service is starting" (app), a 2xx (caller)
    assert r.headers["retry-after"] == str(STARTING_RETRY_AFTER_S)
    assert app.state.runtime.registry.get_sample_value("tiermem_http_unhandled_errors_total") == 0


def test_healthz_and_the_inspector_say_stopping_then_an_app_started_again_serves(app: FastAPI) -> None:
    client = TestClient(app, base_url=BASE, raise_server_exceptions=False)
    with client:
        assert client.get("/healthz").json()["status"] != "starting"
    health = client.get("/healthz")
    # was "starting" (app), 200 "ok" (caller)
    assert health.status_code == 503 and health.json()["status"] == "stopping", health.text
    assert health.headers["retry-after"] == str(STARTING_RETRY_AFTER_S)
    client.cookies.set(COOKIE, _cookie_value(TOKEN_ACME))  # signed in, as the login form leaves it
    page = client.get("/ui/")  # an HTML page: its text
    assert page.status_code == 503 and SHUTTING_DOWN in page.text and STARTING not in page.text, page.text
    # started again (the app's closed Memory handed over anew): not shutting down any more
    runtime = app.state.runtime
    again = None
    if runtime.memory is None:
        again = Memory(runtime.config, embedder=HashEmbedder(), hot=False, background_indexing=False)
        hand_over(app, again)
    with client:
        assert client.get("/v1/stats", headers=HEADERS).status_code == 200
    if again is not None:
        again.close()
