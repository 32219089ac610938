"""Every refusal under /ui is the inspector's HTML, never the API's JSON (a review,
2026-12-07).

Before, a page's typed query parameter that is no integer in range (`?page=abc`,
`/plans?turn=-1`, `/views?version=-1`) answered FastAPI's JSON 422, and a form body the
service's guard refuses (bytes that are not UTF-8, a lone surrogate) the guard's JSON 422:
a browser showed raw JSON, and htmx put JSON where a row or a plan goes. Now a page's
refusal is the inspector's error page (status 422, the parameter named), a form's its
refusal fragment; the API's answers stay JSON.
FastAPI's TestClient on the real app (the guard middleware included), real SQLite.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape

import pytest
from fastapi.testclient import TestClient
from inspector_helpers import CONV, TOKEN_ACME, TOKENS
from service_helpers import bearer

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

HX = {"HX-Request": "true"}
JSON_BODY = {"Content-Type": "application/json"}
ERROR = re.compile(r'<p class="error" role="alert"[^>]*>(.*?)</p>', re.S)


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("refusal-pages") / "data", auth_tokens=TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        m.append_many(CONV, [{"role": "user", "content": "A flight to Oslo, please."},
                             {"role": "assistant", "content": "Looking."}], namespace="acme")
        yield m


@pytest.fixture
def app_client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        yield c


@pytest.fixture
def client(app_client: TestClient) -> TestClient:
    assert app_client.post("/ui/login", json={"token": TOKEN_ACME}, headers=HX).status_code == 200
    return app_client


def _refusal(r: object) -> str:
    """The one refusal an HTML answer shows."""
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html"), r.text  # type: ignore[attr-defined]
    assert r.headers["content-security-policy"].startswith("default-src 'none'")  # type: ignore[attr-defined]
    shown = [unescape(m) for m in ERROR.findall(r.text)]  # type: ignore[attr-defined]
    assert len(shown) == 1, shown
    return shown[0]


# (a page's URL with a parameter that is no integer in range, the parameter)
BAD_PARAMS = [
    (f"/ui/c/{CONV}?page=abc", "page"),  # the reviewer's
    (f"/ui/c/{CONV}?page=1.5", "page"),  # a fraction
    (f"/ui/c/{CONV}/plans?turn=-1", "turn"),  # the reviewer's: below 0
    (f"/ui/c/{CONV}/plans?turns_before=x", "turns_before"),  # no integer
    (f"/ui/c/{CONV}/plans?after_plan=-3", "after_plan"),  # below 0
    (f"/ui/c/{CONV}/views?kind=rolling&version=-1", "version"),  # the reviewer's: below 0
]


@pytest.mark.parametrize(("url", "named"), BAD_PARAMS)
def test_a_bad_page_parameter_is_the_inspectors_error_page(client: TestClient, url: str, named: str) -> None:
    r = client.get(url)
    assert _refusal(r).startswith(f"{named}: ")
    assert 'href="/ui/?ns=acme"' in r.text  # the signed-in nav, as the inspector's other error pages
    # an htmx request gets the refusal alone, for where its answer goes
    frag = client.get(url, headers=HX)
    assert _refusal(frag).startswith(f"{named}: ") and "<nav" not in frag.text


def test_before_the_sign_in_the_refusal_shows_no_nav(app_client: TestClient) -> None:
    r = app_client.get(f"/ui/c/{CONV}?page=abc", follow_redirects=False)
    assert _refusal(r).startswith("page: ") and 'href="/ui/metrics' not in r.text


# (route, raw body, the start of the refusal): bodies the service's guard refuses
BAD_BODIES = [
    (f"/ui/c/{CONV}/pins", b"\xff\xfe", "body: request body is not valid UTF-8"),  # the reviewer's
    (f"/ui/c/{CONV}/plan", b'{"query": "\\ud800"}', "query: contains a lone UTF-16 surrogate"),  # JSON 422 before
    ("/ui/login", b'{"token": "\\ud800"}', "token: contains a lone UTF-16 surrogate"),  # likewise
    (f"/ui/c/{CONV}/pins", b'{"position": 1,', "body.15: invalid JSON"),  # not JSON
]


@pytest.mark.parametrize(("route", "raw", "starts"), BAD_BODIES)
def test_a_body_the_guard_refuses_is_the_forms_refusal(client: TestClient, mem: Memory, route: str, raw: bytes,
                                                       starts: str) -> None:
    key = mem.cold.key_of("acme", CONV) or ""
    before = [t.pinned_priority for t in mem.cold.turns(key)]
    assert _refusal(client.post(route, content=raw, headers={**HX, **JSON_BODY})).startswith(starts)
    assert [t.pinned_priority for t in mem.cold.turns(key)] == before


def test_the_apis_refusals_stay_json(client: TestClient) -> None:
    auth = bearer(TOKEN_ACME)
    r = client.get("/v1/conversations", params={"limit": "abc"}, headers=auth)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "limit"]
    r = client.post(f"/v1/conversations/{CONV}/messages", content=b"\xff\xfe", headers={**auth, **JSON_BODY})
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "unicode_error"
