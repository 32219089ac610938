"""Signing in to the inspector works with every token the service takes (a security review,
2026-12-06). The inspector keeps the token in a cookie. Before 66dbccc a configured token
holding a character past Latin-1 answered 500 at /ui/login (a Set-Cookie header carries
Latin-1 only); such a token, which no API request could carry either, is now refused at
startup (tests/test_auth_token_charset.py), and every token that is taken, an RFC 6750
b64token, is a valid cookie value as it is: / and = are sent in a quoted value, and read
back as the token. FastAPI's TestClient on the real app, real SQLite.
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
    "tok-plain-0123456789abcdefAB": "plain",  # letters, digits, hyphens: the cookie holds it as it is
    "tok.dot_under~tilde-0123456789": "punct",  # . _ ~
    "tok+plus/slash-0123456789ab==": "base64",  # + / and = padding: a quoted cookie value
    "dG9rLWJhc2U2NC0wMTIzNDU2Nzg5YQ=": "padded",  # a base64 token with one = of padding
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
