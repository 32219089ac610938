"""A configured token (`auth_tokens`, `metrics_tokens`) is visible ASCII, 0x21-0x7E, what
an HTTP header carries as text; any other is refused at startup (a security review,
2026-12-06). A request's `Authorization` header is read as Latin-1, so a token past ASCII
(Ω, é, an emoji) never matched the UTF-8 configured one, and whitespace or a control
character is trimmed at the ends or no part of a credential parsers agree on: such a token
was taken and its user only found out from 401s. `TokenAuth` raises `ServiceConfigError`
naming the field and the rule (never the token), which `tiermem config --check` and `serve`
report.

df045a0 refused more: everything outside RFC 6750's b64token, so tokens that every client
sends and that authenticated before (`:`, `@`, `!`, `*`, `#`, `$`, `"`, `;`, `%`, `=`
inside...) stopped `serve` on upgrade. Those are taken again, and each authenticates over
real HTTP (uvicorn on loopback, the header as a client sends it) and signs in to the
inspector. Real app, real SQLite, the real CLI.
"""

from __future__ import annotations

import string
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from service_helpers import serve_in_thread

from tiermem import Config, Memory
from tiermem.cli import CliState, cli
from tiermem.service import ServiceConfigError, create_app
from tiermem.service.auth import TokenAuth
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

ERROR_EXIT = 1
HX = {"HX-Request": "true"}
RULE = "visible ASCII"  # the rule's words in every refusal

# tokens no request can be relied on to carry, each refused at startup
REFUSED = [
    "tok-Ω-omega-0123456789abcdef",  # past Latin-1: a header cannot even send it
    "tok-東京-🔑-0123456789abcdef",  # CJK and an emoji (outside the BMP)
    "tok-🔑-0123456789abcdef",  # an emoji alone
    "tok-café-0123456789abcdef",  # é: Latin-1 but not ASCII, read as Latin-1, never the UTF-8 configured
    "tok with-space-0123456789ab",  # a space inside: no part of a token68 credential
    " tok-leading-space-01234567",  # a leading space: trimmed from every header
    "tok-trailing-space-0123456 ",  # a trailing space: the same
    "tok-tab\t-0123456789abcdef",  # a tab
    "tok-nul\x00-0123456789abcdef",  # NUL: no HTTP parser takes it
    "tok-newline\n-0123456789abcd",  # a line break would end the header
    "tok-del\x7f-0123456789abcdef",  # DEL (0x7F): a control character, just past visible ASCII
    "tok-nbsp\xa0-0123456789abcdef",  # a no-break space (Latin-1, not ASCII)
]

# tokens every client sends: each is taken, authenticates over the API and signs in
ALLOWED = {
    "a:b@c!": "colon",  # : @ ! (short: taken with a warning); refused by df045a0
    "x*y#z$": "star",  # * # $; refused by df045a0
    '"q;,\\%': "quote",  # " ; , \ %: no cookie-octets but % (the cookie percent-encodes them)
    "tok-pad=inside-0123456789ab": "padin",  # = inside, not only as padding
    "tok-100%41-percent-0123456789": "pct",  # %41 is no escape of the token: it must stay %41, not A
    "tok+plus/slash-0123456789ab==": "base64",  # + / and = padding: a b64token, taken before and after
    "tok-0123456789abcdefABCDEF": "plain",  # letters, digits, a hyphen
    string.punctuation + string.digits + string.ascii_letters: "every",  # every visible ASCII character
}
METRICS_TOKEN = "tok-metrics:#!@*;0123456789"  # a metrics token with punctuation


def _auth(tokens: dict[str, str], metrics: list[str] | None = None) -> TokenAuth:
    return TokenAuth(tokens, enabled=True, default_namespace="default", max_id_chars=128,
                     metrics_tokens=metrics or [])


@pytest.mark.parametrize("token", REFUSED)
def test_an_auth_token_outside_visible_ascii_is_refused_at_startup(token: str) -> None:
    with pytest.raises(ServiceConfigError) as info:
        _auth({token: "acme"})
    msg = str(info.value)
    assert msg.startswith("auth_tokens:") and "'acme'" in msg and RULE in msg, msg
    assert token.strip() not in msg  # a secret is never printed


@pytest.mark.parametrize("token", REFUSED)
def test_a_metrics_token_outside_visible_ascii_is_refused_at_startup(token: str) -> None:
    with pytest.raises(ServiceConfigError) as info:
        _auth({"tok-0123456789abcdefABCDEF": "acme"}, ["tok-metrics-0123456789abcd", token])
    msg = str(info.value)
    assert msg.startswith("metrics_tokens: token 2 of the list") and RULE in msg, msg
    assert token.strip() not in msg


@pytest.mark.parametrize(("field", "token"), [
    ("auth_tokens", ""),  # empty
    ("auth_tokens", " \t "),  # whitespace only
    ("metrics_tokens", ""),  # an empty metrics token
])
def test_an_empty_token_is_refused_at_startup(field: str, token: str) -> None:
    with pytest.raises(ServiceConfigError) as info:
        if field == "auth_tokens":
            _auth({token: "acme"})
        else:
            _auth({"tok-0123456789abcdefABCDEF": "acme"}, [token])
    assert str(info.value) == f"{field}: a token is empty"


def test_every_allowed_token_is_taken() -> None:
    a = _auth(ALLOWED, [METRICS_TOKEN])
    assert all(a.namespace(f"Bearer {t}") == ns for t, ns in ALLOWED.items())
    assert a.metrics_token(f"Bearer {METRICS_TOKEN}")


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
    assert field in res.stderr and RULE in res.stderr and token not in res.stderr, res.stderr
    with pytest.raises(ServiceConfigError) as served:
        create_app(Config.load(f, data_dir=tmp_path / "d"))
    assert str(served.value) in res.stderr


def test_config_check_takes_a_token_with_punctuation(tmp_path: Path) -> None:
    # what an operator upgrading finds: the config that served before still checks out
    f = tmp_path / "c.toml"
    f.write_text("auth_tokens = {'tok-a:b@c!x*y#z$-0123456789' = 'acme'}\n"
                 "metrics_tokens = ['tok-metrics:#!@*;0123456789']\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "d"), "config", "--check", str(f)], obj=CliState())
    assert res.exit_code == 0, res.output


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("token-charset") / "data", auth_tokens=ALLOWED,
                 metrics_tokens=[METRICS_TOKEN])
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        for ns in ALLOWED.values():
            m.append(f"{ns}-chat", {"role": "user", "content": f"hello from {ns}"}, namespace=ns)
        with serve_in_thread(cfg, m) as url:
            yield url


@pytest.mark.parametrize("token", list(ALLOWED))
def test_an_allowed_token_authenticates_over_the_api_and_signs_in(served: str, token: str) -> None:
    ns = ALLOWED[token]
    with httpx.Client(base_url=served) as c:
        r = c.get("/v1/conversations", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and r.json()["conversations"] == [f"{ns}-chat"], r.text
        r = c.post("/ui/login", json={"token": token}, headers=HX)
        assert r.status_code == 200 and r.headers["hx-redirect"] == "/ui/", r.text
        r = c.get("/ui/", follow_redirects=False)  # the cookie as httpx's jar sends it back
        assert r.status_code == 200 and f"{ns}-chat" in r.text


def test_a_metrics_token_with_punctuation_reads_metrics(served: str) -> None:
    r = httpx.get(served + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert r.status_code == 200 and "tiermem_" in r.text, r.text
