"""The inspector behind the API's tokens (issue 21): a token typed once into /ui/login,
kept in an HttpOnly SameSite=Strict cookie, never in a URL; scopes are the API's walls
(a conversation outside the token's prefix answers exactly like a missing one, 404; a
namespace page outside it 403, the same for every outside namespace); POSTs need htmx's
header and a JSON body. FastAPI's TestClient on the real app, real SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from inspector_helpers import CONV, OTHER, SECRET, TOKEN_ACME, TOKEN_GLOBEX, TOKENS, trip_messages

from tiermem import Config, Memory
from tiermem.inspector.routes import COOKIE
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

HX = {"HX-Request": "true"}


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("inspector-auth") / "data", auth_tokens=TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        m.append_many(CONV, trip_messages()[:6], namespace="acme")
        m.append("alice-notes", {"role": "user", "content": "alice's own note"}, namespace="acme/alice")
        m.append(OTHER, {"role": "user", "content": SECRET}, namespace="globex")
        yield m


@pytest.fixture
def client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        yield c


def login(c: TestClient, token: str = TOKEN_ACME) -> None:
    r = c.post("/ui/login", json={"token": token}, headers=HX)
    assert r.status_code == 200 and r.headers["hx-redirect"] == "/ui/", r.text


# pages that need a login; each answers 303 to the login page without one
PAGES = ["/ui/", f"/ui/c/{CONV}", f"/ui/c/{CONV}/plan", f"/ui/c/{CONV}/plans", f"/ui/c/{CONV}/views",
         f"/ui/c/{CONV}/turns?positions=0", "/ui/metrics"]


@pytest.mark.parametrize("path", PAGES)
def test_without_a_login_every_page_sends_to_the_login_form(client: TestClient, path: str) -> None:
    r = client.get(path, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"
    r = client.get(path, headers=HX, follow_redirects=False)  # an htmx request: told where to go
    assert r.status_code == 401 and r.headers["hx-redirect"] == "/ui/login"


def test_login_keeps_the_token_in_an_httponly_strict_cookie(client: TestClient) -> None:
    r = client.post("/ui/login", json={"token": TOKEN_ACME}, headers=HX)
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={TOKEN_ACME};")
    parts = {p.strip().lower() for p in cookie.split(";")}
    assert {"httponly", "path=/ui", "samesite=strict"} <= parts
    assert "secure" not in parts  # plain http here; https adds it
    page = client.get("/ui/")
    assert page.status_code == 200 and TOKEN_ACME not in page.text, "the token is never echoed into a page"
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store" and page.headers["referrer-policy"] == "no-referrer"
    out = client.post("/ui/logout", json={}, headers=HX)
    assert out.headers["hx-redirect"] == "/ui/login" and 'max-age=0' in out.headers["set-cookie"].lower()
    assert client.get("/ui/", follow_redirects=False).status_code == 303


# (body, status, what the answer names) -- bad logins
BAD_LOGINS = [
    ({"token": "not-a-token-0123456789abcdef"}, 401, "not valid"),  # unknown token
    ({"token": ""}, 422, "token"),  # empty: names the field
    ({"token": "x" * 5000}, 422, "token"),  # over MAX_TOKEN_CHARS
    ({"password": TOKEN_ACME}, 422, "token"),  # the wrong field: the missing one is named
]


@pytest.mark.parametrize(("body", "status", "named"), BAD_LOGINS)
def test_bad_logins_set_no_cookie(client: TestClient, body: dict[str, str], status: int, named: str) -> None:
    r = client.post("/ui/login", json=body, headers=HX)
    assert r.status_code == status and named in r.text
    assert "set-cookie" not in r.headers


def test_posts_need_the_htmx_header_and_json(client: TestClient) -> None:
    login(client)
    # a cross-site form can send neither the header nor JSON
    r = client.post(f"/ui/c/{CONV}/pins", json={"position": 1, "pinned": True})
    assert r.status_code == 403
    r = client.post(f"/ui/c/{CONV}/pins", content=b"position=1&pinned=true", headers={
        **HX, "Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 415  # the service's guard: JSON bodies only
    r = client.post("/ui/login", json={"token": TOKEN_ACME})
    assert r.status_code == 403 and "set-cookie" not in r.headers


def test_a_conversation_of_another_namespace_answers_like_a_missing_one(client: TestClient) -> None:
    login(client)
    answers = {}
    for path in (f"/ui/c/{OTHER}?ns=globex", f"/ui/c/{OTHER}", "/ui/c/never-was?ns=globex",
                 f"/ui/c/{OTHER}/plan?ns=globex", f"/ui/c/{OTHER}/views?ns=globex",
                 f"/ui/c/{OTHER}/plans?ns=globex", f"/ui/c/{OTHER}/turns?ns=globex&positions=0"):
        r = client.get(path)
        assert r.status_code == 404 and SECRET not in r.text
        answers[path] = r.text
    # byte for byte the page of a conversation that never existed (the id aside)
    assert answers[f"/ui/c/{OTHER}?ns=globex"] == answers[f"/ui/c/{OTHER}"]
    assert answers["/ui/c/never-was?ns=globex"] == answers[f"/ui/c/{OTHER}"].replace(OTHER, "never-was")
    for path, body in ((f"/ui/c/{OTHER}/pins?ns=globex", {"position": 0, "pinned": True}),
                       (f"/ui/c/{OTHER}/plan?ns=globex", {"query": "vault?", "budget": 500})):
        r = client.post(path, json=body, headers=HX)
        assert r.status_code == 404 and SECRET not in r.text
    assert [t.pinned_priority for t in client.app.state.runtime.memory.cold.turns(  # type: ignore[attr-defined]
        client.app.state.runtime.memory.cold.key_of("globex", OTHER))] == [None], "nothing was pinned"  # type: ignore[attr-defined]


def test_namespace_pages_outside_the_prefix_answer_403_alike(client: TestClient) -> None:
    login(client)
    bodies = set()
    for ns in ("globex", "nobody-here", "acme2"):
        for page in ("/ui/", "/ui/metrics"):
            r = client.get(page, params={"ns": ns})
            assert r.status_code == 403 and SECRET not in r.text
            bodies.add(r.text.replace(ns, "NS"))
    assert len(bodies) == 1  # one answer, whatever the outside namespace holds


def test_a_tenant_token_reaches_its_sub_namespaces(client: TestClient) -> None:
    login(client)
    r = client.get("/ui/", params={"ns": "acme/alice"})
    assert r.status_code == 200 and "alice-notes" in r.text
    assert client.get("/ui/c/alice-notes", params={"ns": "acme/alice"}).status_code == 200
    assert client.get("/ui/c/alice-notes").status_code == 404  # not in acme itself


def test_the_other_tenant_sees_its_own_and_not_acme(client: TestClient) -> None:
    login(client, TOKEN_GLOBEX)
    assert OTHER in client.get("/ui/").text
    assert client.get(f"/ui/c/{CONV}", params={"ns": "acme"}).status_code == 404


# (path, what the 422 page names) -- malformed input in URLs
BAD_URLS = [
    ("/ui/?ns=a//b", "ns"),  # an empty namespace segment
    ("/ui/c/..evil", "conversation_id"),  # an id starting with a dot
    (f"/ui/c/{CONV}?page=x", "page"),  # FastAPI's own check
]


@pytest.mark.parametrize(("path", "named"), BAD_URLS)
def test_bad_urls_are_named(client: TestClient, path: str, named: str) -> None:
    login(client)
    r = client.get(path)
    assert r.status_code == 422 and named in r.text


def test_no_auth_needs_no_login(mem: Memory, tmp_path: Path) -> None:
    with TestClient(create_app(mem.config, mem, auth=False, namespace="acme", start_scheduler=False), base_url="http://127.0.0.1") as c:
        r = c.get("/ui/")
        assert r.status_code == 200 and CONV in r.text and "Sign out" not in r.text
        assert c.get(f"/ui/c/{OTHER}", params={"ns": "globex"}).status_code == 200  # every namespace
