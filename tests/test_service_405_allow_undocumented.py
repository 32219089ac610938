"""A 405 on a path the OpenAPI document leaves out carries `Allow` naming every method the
path takes (RFC 9110, 15.5.6: a 405 MUST carry Allow listing the target's methods): the
inspector's static files (/ui/static, /docs/static) and its pages served by several
routes (/ui/login's GET page and POST form, /ui/c/{cid}/plan) as well as the documented
/v1 paths (test_service_method_not_allowed.py).

Fails on the code before (handlers.http_error took an undocumented path's Allow from the
refusing route's exception): `PUT /ui/login` said `Allow: GET, HEAD`, the first route's
methods, though POST /ui/login is the sign-in form (also `/ui/c/{cid}/plan`); and a POST,
PUT or DELETE to a static file answered 405 with an empty `Allow` under the Starlette
releases whose StaticFiles raised a bare 405 (`HTTPException(status_code=405)`, before it
sent "GET, HEAD" itself; `fastapi>=0.110` admits them): a StaticFiles refusing as they did
is served here next to the app's own (Starlette 1.10's sends Allow, so those pass before).

The real app (create_app, with its inspector, docs and /v1/mcp) served by uvicorn on
loopback, real sockets, a real SQLite store holding one conversation; the paths are
enumerated from the app (test_service_head_everywhere.app_paths), so a route added later
is checked too."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from hash_embedder import HashEmbedder
from service_helpers import READ_TIMEOUT_S, TOKEN_ACME, TOKEN_METRICS, serve_app, serve_in_thread
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope
from test_service_head_everywhere import CALLERS, CID, NS, app_paths

from tiermem import Config, Memory
from tiermem.service import create_app

pytestmark = pytest.mark.usefixtures("clean_env")

METHOD_NOT_ALLOWED = 405
# every method sent to each path (TRACE and CONNECT are no route's: left out)
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    """(the URL, a concrete path for each route the document leaves out)."""
    cfg = Config(data_dir=tmp_path_factory.mktemp("allow_undocumented") / "data", auth_tokens={TOKEN_ACME: NS},
                 metrics_tokens=[TOKEN_METRICS])
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        mem.append(CID, {"role": "user", "content": "We fly to Lisbon on Friday."}, namespace=NS)
        app = create_app(cfg, mem, start_scheduler=False)
        documented = app.openapi()["paths"]
        paths, _ = app_paths(app)
        undocumented = [p for p in paths if p not in documented and p.replace(CID, "{conversation_id}")
                        not in documented]
        with serve_in_thread(cfg, mem) as url:
            yield url, undocumented


def _allow(r: httpx.Response) -> list[str]:
    return [m.strip() for m in r.headers.get("allow", "").split(",") if m.strip()]


# (the request, the Allow its 405 names)
CASES = [
    ("POST", "/ui/static/inspector.css", ["GET", "HEAD"]),  # was "" (StaticFiles sends no Allow)
    ("PUT", "/ui/static/inspector.css", ["GET", "HEAD"]),  # ... every method but GET and HEAD
    ("DELETE", "/docs/static/swagger-ui.css", ["GET", "HEAD"]),  # the docs' assets alike
    ("POST", "/ui/static/no-such-file.css", ["GET", "HEAD"]),  # refused by method before the lookup
    ("PUT", "/ui/login", ["GET", "HEAD", "POST"]),  # was "GET, HEAD": the sign-in form's POST left out
    ("DELETE", f"/ui/c/{CID}/plan", ["GET", "HEAD", "POST"]),  # was "GET, HEAD"
    ("GET", "/ui/logout", ["POST"]),  # one route: as before
    ("PUT", "/docs", ["GET", "HEAD"]),  # one route, HEAD next to GET: as before
]


@pytest.mark.parametrize(("method", "path", "allow"), CASES)
def test_a_405_names_every_method_of_the_path(served: tuple[str, list[str]], method: str, path: str,
                                              allow: list[str]) -> None:
    url, _ = served
    r = httpx.request(method, url + path, headers=CALLERS["signed in"], timeout=READ_TIMEOUT_S)
    assert r.status_code == METHOD_NOT_ALLOWED, (r.status_code, r.text)
    assert _allow(r) == allow, r.headers.get("allow")
    assert all(m in r.json()["detail"] for m in allow), r.text


@pytest.mark.parametrize("caller", list(CALLERS))
def test_allow_is_what_the_path_answers(served: tuple[str, list[str]], caller: str) -> None:
    """On every undocumented path, every 405 names the same methods, and those are exactly
    the methods the path answers other than 405 (the Allow a client reads is true)."""
    url, paths = served
    assert {"/ui/login", "/ui/static/inspector.css", "/docs/static/swagger-ui.css", "/docs"} <= set(paths)
    wrong = []
    with httpx.Client(base_url=url, headers=CALLERS[caller], timeout=READ_TIMEOUT_S) as client:
        for path in paths:
            answers = {m: client.request(m, path) for m in METHODS}
            taken = [m for m in METHODS if answers[m].status_code != METHOD_NOT_ALLOWED]
            for m, r in answers.items():
                if r.status_code == METHOD_NOT_ALLOWED and _allow(r) != taken:
                    wrong.append((path, m, r.headers.get("allow"), taken))
    assert not wrong, wrong


class BareRefusalStaticFiles(StaticFiles):
    """StaticFiles refusing another method as Starlette's older releases did: a bare 405,
    no Allow header."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        if scope["method"] not in ("GET", "HEAD"):
            raise HTTPException(status_code=METHOD_NOT_ALLOWED)
        return await super().get_response(path, scope)


BARE_MOUNT = "/ui-static-bare"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_a_static_file_refusing_without_allow(tmp_path_factory: pytest.TempPathFactory, method: str) -> None:
    cfg = Config(data_dir=tmp_path_factory.mktemp("bare_static") / "data", auth_tokens={TOKEN_ACME: NS})
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        app = create_app(cfg, mem, start_scheduler=False)
        app.mount(BARE_MOUNT, BareRefusalStaticFiles(packages=[("tiermem.inspector", "static")]))
        with serve_app(app) as url:
            assert httpx.get(f"{url}{BARE_MOUNT}/inspector.css", timeout=READ_TIMEOUT_S).status_code == 200
            r = httpx.request(method, f"{url}{BARE_MOUNT}/inspector.css", timeout=READ_TIMEOUT_S)
    assert r.status_code == METHOD_NOT_ALLOWED
    assert _allow(r) == ["GET", "HEAD"], r.headers.get("allow")  # was "" (RFC 9110: MUST list them)
