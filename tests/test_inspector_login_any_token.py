"""Signing in to the inspector works with every configured token, whatever its characters
(a security review, 2026-12-06). A token is any text the operator chose; the inspector
keeps it in a cookie, and a Set-Cookie header carries Latin-1 only. Before, signing in
with a valid token holding a character past Latin-1 (Ω, a CJK letter, an emoji) answered
500 and set no cookie, so that token's user could not sign in at all. Now the cookie
holds the token percent-encoded. FastAPI's TestClient on the real app, real SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

HX = {"HX-Request": "true"}
# token -> its namespace prefix; each a token an operator may configure
TOKENS = {
    "tok-Ω-omega-0123456789abcdef": "omega",  # past Latin-1: the 500 before
    "tok-東京-🔑-0123456789abcdef": "tokyo",  # CJK and an emoji (outside the BMP)
    "tok-é-latin1-0123456789abcd": "latin",  # Latin-1 (SimpleCookie's octal escape worked)
    'tok "quoted; semi" 0123456789': "quoted",  # a quote, a semicolon and spaces
    "tok-100%-percent-0123456789": "percent",  # a percent sign: the encoding's own escape
}


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("login-any-token") / "data", auth_tokens=TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        for ns in TOKENS.values():
            m.append(f"{ns}-chat", {"role": "user", "content": f"hello from {ns}"}, namespace=ns)
        yield m


@pytest.mark.parametrize("token", list(TOKENS))
def test_every_configured_token_signs_in_and_reaches_its_namespace(mem: Memory, token: str) -> None:
    ns = TOKENS[token]
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        r = c.post("/ui/login", json={"token": token}, headers=HX)
        assert r.status_code == 200 and r.headers["hx-redirect"] == "/ui/", r.text
        set_cookie = r.headers["set-cookie"]
        assert "HttpOnly" in set_cookie and "SameSite=strict" in set_cookie
        r = c.get("/ui/", follow_redirects=False)
        assert r.status_code == 200 and f"{ns}-chat" in r.text
        others = [n for n in TOKENS.values() if n != ns]
        assert all(c.get("/ui/", params={"ns": n}).status_code == 403 for n in others)
