"""HEAD on every path of the running app answers what GET answers there, status and
headers, without a body: not only the documented /v1 routes (test_service_head.py) but
every route the app holds, enumerated from the app itself, so a route added later is
checked too: the inspector's pages (/ui, /ui/, /ui/login, /ui/c/{cid}/...), the API docs
(/docs, /redoc), /openapi.json, the static files under /ui/static and /docs/static, and
the POST-only paths (GET's 405 and its Allow, HEAD's the same). A 405 on such a path
names HEAD in `Allow` next to GET.

Fails on the code before (98aa7ca made HEAD work on the service's documented routes only):
HEAD /docs, /redoc and every /ui page answered 405 `Allow: GET` where GET answered 200,
303 or 307; `PUT /docs` said `Allow: GET` without HEAD.

The real app (create_app, with its inspector, docs and /v1/mcp) served by uvicorn on
loopback, real sockets, a real SQLite store holding one conversation."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hash_embedder import HashEmbedder
from service_helpers import READ_TIMEOUT_S, TOKEN_ACME, TOKEN_METRICS, serve_in_thread
from starlette.routing import Mount

from tiermem import Config, Memory
from tiermem.inspector.routes import COOKIE, _cookie_value
from tiermem.service import create_app

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
CID = "trip"
PARAM = re.compile(r"\{[^}]+\}")
# a file served under each static mount (a mount not listed here fails the enumeration)
MOUNT_FILES = {"/ui/static": "inspector.css", "/docs/static": "swagger-ui.css"}
# headers that say something about the answer; those that differ between two answers in
# a row (date, a page's fresh CSRF token in its length or cookie) are left out
DESCRIBING = ("content-type", "location", "allow", "www-authenticate", "retry-after", "cache-control",
              "content-security-policy", "x-frame-options", "x-content-type-options", "referrer-policy",
              "hx-redirect", "etag", "last-modified", "accept-ranges")
# (who asks) -- the inspector answers a signed-in caller with pages, others with redirects
CALLERS = {
    "token": {"Authorization": f"Bearer {TOKEN_ACME}"},  # the /v1 routes' caller
    "signed in": {"Cookie": f"{COOKIE}={_cookie_value(TOKEN_ACME)}"},  # the inspector's
}


def _routes(routes: list[Any]) -> Iterator[Any]:
    """Every route of `routes`, descending into included routers (FastAPI keeps them as
    one entry with the router inside) but not into mounts (their files are one route)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None and not isinstance(route, Mount):
            yield from _routes(inner.routes)
        else:
            yield route


def app_paths(app: Any) -> tuple[list[str], set[str]]:
    """(a concrete path for each route of `app`, the templates of those that take GET)."""
    paths: list[str] = []
    gets: set[str] = set()
    for route in _routes(app.routes):
        path = route.path
        if isinstance(route, Mount):
            assert path in MOUNT_FILES, f"a static mount this test does not know: {path}"
            paths.append(f"{path}/{MOUNT_FILES[path]}")
            gets.add(path)
            continue
        if "GET" in (route.methods or ()):
            gets.add(path)
        concrete = PARAM.sub("0" if path.endswith("{position}") else CID, path)
        if concrete not in paths:
            paths.append(concrete)
    return paths, gets


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str], set[str]]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("head_all") / "data", auth_tokens={TOKEN_ACME: NS},
                 metrics_tokens=[TOKEN_METRICS])
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        mem.append(CID, {"role": "user", "content": "We fly to Lisbon on Friday."}, namespace=NS)
        paths, gets = app_paths(create_app(cfg, mem, start_scheduler=False))
        with serve_in_thread(cfg, mem) as url:
            yield url, paths, gets


def test_the_enumeration_finds_the_pages_head_missed(served: tuple[str, list[str], set[str]]) -> None:
    # the walk reaches into the included routers and the mounts: the pages that were 405
    _, paths, gets = served
    assert {"/docs", "/redoc", "/ui", "/ui/", "/ui/login", "/ui/c/{cid}", "/ui/metrics", "/openapi.json",
            "/v1/limits", "/ui/static", "/docs/static"} <= gets
    assert "/v1/mcp" in paths and f"/v1/conversations/{CID}/messages" in paths  # POST-only paths too


@pytest.mark.parametrize("caller", list(CALLERS))
def test_head_answers_as_get_on_every_path(served: tuple[str, list[str], set[str]], caller: str) -> None:
    url, paths, _ = served
    wrong = []
    with httpx.Client(base_url=url, headers=CALLERS[caller], timeout=READ_TIMEOUT_S) as client:
        for path in paths:
            got, head = client.get(path), client.head(path)
            got_headers = {h: got.headers.get(h) for h in DESCRIBING}
            head_headers = {h: head.headers.get(h) for h in DESCRIBING}
            if head.status_code != got.status_code or head_headers != got_headers or head.content:
                wrong.append((path, got.status_code, head.status_code, head.headers.get("allow")))
            # a body's length is announced as GET's (a page's CSRF token makes it vary: present)
            assert ("content-length" in head.headers) == ("content-length" in got.headers), path
    assert not wrong, wrong  # was: /docs, /redoc, /ui... 405 "Allow: GET" where GET was 200/303/307


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/ui/login"])
def test_a_405_on_a_page_names_head(served: tuple[str, list[str], set[str]], path: str) -> None:
    url, _, _ = served
    r = httpx.put(url + path, timeout=READ_TIMEOUT_S)
    assert r.status_code == 405
    allowed = [m.strip() for m in r.headers["allow"].split(",")]
    assert "GET" in allowed and "HEAD" in allowed, allowed  # was "GET"
