"""Signing in to the inspector works with every token the service takes (a security review,
2026-12-06), and a session signed in before an upgrade stays signed in. The inspector keeps
the token in a cookie. A configured token is visible ASCII (tests/test_auth_token_charset.py),
and of those `"` `;` `,` `\\` are no cookie-octets (RFC 6265): a browser keeps a cookie
value holding them only in part, or not at all. So the cookie holds the token
percent-encoded (as 66dbccc did, and df045a0 dropped when it took b64tokens only), which
reads back exactly, a `%` of the token included. A cookie set as the token itself, as
df045a0's server did for the b64tokens it took, reads back as that token. The cookie is
sent back here as a browser does: the Set-Cookie header's name=value, verbatim. FastAPI's
TestClient on the real app, real SQLite.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from starlette.responses import Response

from tiermem import Config, Memory
from tiermem.inspector.routes import COOKIE, COOKIE_PATH
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

HX = {"HX-Request": "true"}
# RFC 6265's cookie-value: cookie-octets (visible ASCII but " , ; \), optionally in quotes
COOKIE_OCTETS = r"[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*"
COOKIE_VALUE = re.compile(rf'{COOKIE_OCTETS}|"{COOKIE_OCTETS}"')
# token -> its namespace prefix; each a token an operator may configure
TOKENS = {
    "a:b@c!": "colon",  # : @ ! (cookie-octets, short: taken with a warning)
    "x*y#z$": "star",  # * # $
    '"q;,\\%': "quote",  # " ; , \: no cookie-octets; %: the encoding's own escape
    "tok-100%41-percent-0123456789": "pct",  # %41 stays %41 (a cookie read as a raw token would be A)
    "tok+plus/slash-0123456789ab==": "base64",  # + / and = padding
    "tok-plain-0123456789abcdefAB": "plain",  # letters, digits, hyphens
}
# b64tokens, the only tokens df045a0 took, whose cookie it set as the token itself
OLD_SESSION_TOKENS = ["tok-plain-0123456789abcdefAB", "tok+plus/slash-0123456789ab=="]


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("login-any-token") / "data", auth_tokens=TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        for ns in TOKENS.values():
            m.append(f"{ns}-chat", {"role": "user", "content": f"hello from {ns}"}, namespace=ns)
        yield m


def _name_value(set_cookie: str) -> str:
    """What a browser sends back of a Set-Cookie: its name=value pair, verbatim."""
    return set_cookie.split(";", 1)[0]


@pytest.mark.parametrize("token", list(TOKENS))
def test_every_configured_token_signs_in_and_reaches_its_namespace(mem: Memory, token: str) -> None:
    ns = TOKENS[token]
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        r = c.post("/ui/login", json={"token": token}, headers=HX)
        assert r.status_code == 200 and r.headers["hx-redirect"] == "/ui/", r.text
        set_cookie = r.headers["set-cookie"]
        assert "HttpOnly" in set_cookie and "SameSite=strict" in set_cookie
        pair = _name_value(set_cookie)
        name, _, value = pair.partition("=")
        assert name == COOKIE and COOKIE_VALUE.fullmatch(value), set_cookie  # a browser keeps it whole
        c.cookies.clear()
        r = c.get("/ui/", headers={"Cookie": pair}, follow_redirects=False)
        assert r.status_code == 200 and f"{ns}-chat" in r.text
        others = [n for n in TOKENS.values() if n != ns]
        assert all(c.get("/ui/", params={"ns": n}, headers={"Cookie": pair}).status_code == 403 for n in others)


@pytest.mark.parametrize("token", OLD_SESSION_TOKENS)
def test_a_session_signed_in_before_the_upgrade_stays_signed_in(mem: Memory, token: str) -> None:
    old = Response()
    old.set_cookie(COOKIE, token, path=COOKIE_PATH, httponly=True, samesite="strict")  # as df045a0 set it
    pair = _name_value(old.headers["set-cookie"])
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        r = c.get("/ui/", headers={"Cookie": pair}, follow_redirects=False)
        assert r.status_code == 200 and f"{TOKENS[token]}-chat" in r.text, pair
