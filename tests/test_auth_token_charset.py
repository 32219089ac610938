"""A configured token is an RFC 6750 bearer token (b64token: ASCII letters, digits and
- . _ ~ + /, then optional = padding), refused at startup otherwise (a security review,
2026-12-06). A request's `Authorization` header is read as Latin-1 and a space ends the
token, so a token past ASCII (Ω, é, an emoji) could never authenticate over the API: its
user only found out from 401s. Before, `TokenAuth` took any non-blank text; now it raises
`ServiceConfigError` naming the field and the rule (never the token), which `tiermem
config --check` and `serve` report. Every token it takes authenticates over the API and
signs in to the inspector. Real app (TestClient), real SQLite, the real CLI.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.cli import CliState, cli
from tiermem.service import ServiceConfigError, create_app
from tiermem.service.auth import TokenAuth
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

ERROR_EXIT = 1
HX = {"HX-Request": "true"}

# tokens no bearer header can carry, each refused at startup
REFUSED = [
    "tok-Ω-omega-0123456789abcdef",  # past Latin-1: a header cannot even send it
    "tok-東京-🔑-0123456789abcdef",  # CJK and an emoji (outside the BMP)
    "tok-café-0123456789abcdef",  # Latin-1 but not ASCII: read as Latin-1, never the UTF-8 configured
    "tok with-space-0123456789ab",  # a space ends a bearer token
    " tok-leading-space-01234567",  # a leading space
    "tok-tab\t-0123456789abcdef",  # a control character
    'tok-"quoted"-0123456789abcd',  # a quote (no b64token character)
    "tok;semicolon-0123456789abc",  # a semicolon (would end a cookie value)
    "tok-100%-percent-0123456789",  # a percent sign
    "tok-x:y@z-0123456789abcdef",  # visible ASCII outside b64token (: and @)
    "tok-pad=inside-0123456789ab",  # = only as padding at the end
    "====",  # padding without a token
]

# tokens RFC 6750 allows: each must authenticate over the API and in the inspector
ALLOWED = {
    "tok-0123456789abcdefABCDEF": "plain",  # letters, digits, a hyphen
    "tok.under_score~tilde-012345": "punct",  # . _ ~
    "tok+plus/slash-0123456789ab==": "base64",  # + / and padding (a cookie value gets quoted)
    "0123456789abcdefghij=": "onepad",  # one = of padding
}


def _auth(tokens: dict[str, str], metrics: list[str] | None = None) -> TokenAuth:
    return TokenAuth(tokens, enabled=True, default_namespace="default", max_id_chars=128,
                     metrics_tokens=metrics or [])


@pytest.mark.parametrize("token", REFUSED)
def test_an_auth_token_outside_b64token_is_refused_at_startup(token: str) -> None:
    with pytest.raises(ServiceConfigError) as info:
        _auth({token: "acme"})
    msg = str(info.value)
    assert msg.startswith("auth_tokens:") and "'acme'" in msg and "RFC 6750" in msg, msg
    assert token.strip() not in msg  # a secret is never printed


@pytest.mark.parametrize("token", REFUSED)
def test_a_metrics_token_outside_b64token_is_refused_at_startup(token: str) -> None:
    with pytest.raises(ServiceConfigError) as info:
        _auth({"tok-0123456789abcdefABCDEF": "acme"}, ["tok-metrics-0123456789abcd", token])
    msg = str(info.value)
    assert msg.startswith("metrics_tokens: token 2 of the list") and "RFC 6750" in msg, msg
    assert token.strip() not in msg


def test_every_allowed_token_is_taken() -> None:
    a = _auth(ALLOWED, ["tok+metrics/0123456789=="])
    assert all(a.namespace(f"Bearer {t}") == ns for t, ns in ALLOWED.items())
    assert a.metrics_token("Bearer tok+metrics/0123456789==")


@pytest.mark.parametrize(("token", "field"), [("tok-Ω-omega-0123456789abcdef", "auth_tokens"),
                                              ("tok with-space-0123456789ab", "metrics_tokens")])
def test_config_check_and_serve_refuse_it_alike(token: str, field: str, tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    if field == "auth_tokens":
        f.write_text(f'auth_tokens = {{"{token}" = "acme"}}\n', encoding="utf-8")
    else:
        f.write_text(f'auth_tokens = {{"tok-0123456789abcdefABCDEF" = "acme"}}\nmetrics_tokens = ["{token}"]\n',
                     encoding="utf-8")
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "d"), "config", "--check", str(f)], obj=CliState())
    assert res.exit_code == ERROR_EXIT and len(res.stderr.strip().splitlines()) == 1, res.output
    assert field in res.stderr and "RFC 6750" in res.stderr and token not in res.stderr, res.stderr
    with pytest.raises(ServiceConfigError) as served:
        create_app(Config.load(f, data_dir=tmp_path / "d"))
    assert str(served.value) in res.stderr


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("token-charset") / "data", auth_tokens=ALLOWED)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        for ns in ALLOWED.values():
            m.append(f"{ns}-chat", {"role": "user", "content": f"hello from {ns}"}, namespace=ns)
        yield m


@pytest.mark.parametrize("token", list(ALLOWED))
def test_an_allowed_token_authenticates_over_the_api_and_signs_in(mem: Memory, token: str) -> None:
    ns = ALLOWED[token]
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        r = c.get("/v1/conversations", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and r.json()["conversations"] == [f"{ns}-chat"], r.text
        r = c.post("/ui/login", json={"token": token}, headers=HX)
        assert r.status_code == 200 and r.headers["hx-redirect"] == "/ui/", r.text
        r = c.get("/ui/", follow_redirects=False)
        assert r.status_code == 200 and f"{ns}-chat" in r.text
