"""The inspector's login cookie (it holds the API token itself) is `Secure` behind a TLS
proxy on another address than the service, when that proxy is listed in
`http_forwarded_allow_ips`, or always with `ui_cookie_secure = "always"`.

Before (a review, 2026-12-07): the cookie was Secure only when uvicorn took the request
for https, which it does from X-Forwarded-Proto only for a client at 127.0.0.1 (its own
default); behind an https proxy on another host (compose.yaml binds 0.0.0.0) the cookie
went without Secure and nothing could change that. The cases marked "fails before" below
did (a setting unknown to that code: the server ran on uvicorn's default, and always).

A real `tiermem serve` child per configuration; the "proxy" is a client whose source
address is 127.0.0.5 (any loopback address but 127.0.0.1 stands for another host), sending
X-Forwarded-Proto as nginx's `proxy_set_header X-Forwarded-Proto $scheme` does.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pydantic
import pytest
from ports import free_port
from service_helpers import NO_HOT_TIER_URL, serve_process

from tiermem import Config
from tiermem.config_sections import flatten

pytestmark = pytest.mark.usefixtures("clean_env")

TOKEN = "tok-cookie-secure-0123456789"
LOOPBACK = "127.0.0.1"  # uvicorn's own trusted proxy address
PROXY = "127.0.0.5"  # a proxy on "another host": not 127.0.0.1
HTTPS = {"X-Forwarded-Proto": "https"}
PLAIN: dict[str, str] = {}
LOGIN_HEADERS = {"HX-Request": "true", "Content-Type": "application/json"}

# settings (env) -> [(client source address, forwarded headers, cookie Secure?)]
CASES = [
    # uvicorn's own default (unset): X-Forwarded-Proto believed from 127.0.0.1 only; the
    # proxy on another address makes no cookie Secure (the finding, still the default)
    pytest.param({}, [(LOOPBACK, HTTPS, True), (PROXY, HTTPS, False), (PROXY, PLAIN, False)], id="default"),
    # the proxy listed: its https counts (fails before); plain http stays plain; the list
    # replaces the default, so 127.0.0.1 is no longer believed (fails before)
    pytest.param({"TIERMEM_HTTP_FORWARDED_ALLOW_IPS": f'["{PROXY}"]'},
                 [(PROXY, HTTPS, True), (PROXY, PLAIN, False), (LOOPBACK, HTTPS, False)], id="proxy-listed"),
    # a network in CIDR form takes in the proxy's address (fails before)
    pytest.param({"TIERMEM_HTTP_FORWARDED_ALLOW_IPS": '["127.0.0.0/29"]'},
                 [(PROXY, HTTPS, True), (PROXY, PLAIN, False)], id="proxy-network"),
    # always: Secure on a plain-http request too, whatever the proxy says (fails before)
    pytest.param({"TIERMEM_UI_COOKIE_SECURE": "always"},
                 [(PROXY, PLAIN, True), (PROXY, HTTPS, True), (LOOPBACK, PLAIN, True)], id="always"),
]


def _child_env(settings: dict[str, str]) -> dict[str, str]:
    # FORWARDED_ALLOW_IPS is uvicorn's own variable: the runner's must not decide the default
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_") and k != "FORWARDED_ALLOW_IPS"}
    env.update({"TIERMEM_REDIS_URL": NO_HOT_TIER_URL, "TIERMEM_SCHEDULER_ENABLED": "false",
                "TIERMEM_AUTH_TOKENS": f'{{"{TOKEN}": "acme"}}', **settings})
    return env


def _cookie(url: str, source: str, path: str, headers: dict[str, str]) -> str:
    """The Set-Cookie of a login or logout POST sent from `source`."""
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(base_url=url, transport=transport, timeout=60) as c:
        r = c.post(path, headers={**LOGIN_HEADERS, **headers}, json={"token": TOKEN} if path == "/ui/login" else {})
    assert r.status_code == 200, r.text
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("tiermem_ui=") and "HttpOnly" in cookie and "SameSite=strict" in cookie, cookie
    return cookie


@pytest.mark.parametrize(("settings", "checks"), CASES)
def test_login_cookie_secure(tmp_path: Path, settings: dict[str, str],
                             checks: list[tuple[str, dict[str, str], bool]]) -> None:
    with serve_process(tmp_path / "data", free_port(), tmp_path / "serve.log", env=_child_env(settings)) as url:
        for source, headers, secure in checks:
            for path in ("/ui/login", "/ui/logout"):  # logout's clearing cookie as its setting one
                cookie = _cookie(url, source, path, headers)
                assert ("; Secure" in cookie) is secure, (path, source, headers, cookie)


# (settings, the field the refusal names, a fragment of its message)
BAD = [
    # a host name: uvicorn compares addresses only, so it silently trusted nobody
    ({"http_forwarded_allow_ips": ["proxy.internal"]}, "http_forwarded_allow_ips", "not an IP address or a network"),
    # a prefix past 32 bits: uvicorn kept it as a literal no address equals
    ({"http_forwarded_allow_ips": ["10.0.0.0/33"]}, "http_forwarded_allow_ips", "not an IP address or a network"),
    # "*" with others: it is every client, so it must stand alone
    ({"http_forwarded_allow_ips": ["*", "10.0.0.1"]}, "http_forwarded_allow_ips", "must be the only entry"),
    # a bare string, not a list
    ({"http_forwarded_allow_ips": "10.0.0.1"}, "http_forwarded_allow_ips", "list"),
    # past the bound on entries
    ({"http_forwarded_allow_ips": [f"10.0.{i // 256}.{i % 256}" for i in range(257)]},
     "http_forwarded_allow_ips", "at most 256"),
    # an unknown policy ("never" is no policy: a Secure cookie is already left out over http)
    ({"ui_cookie_secure": "never"}, "ui_cookie_secure", "'auto' or 'always'"),
    ({"ui_cookie_secure": True}, "ui_cookie_secure", "'auto' or 'always'"),
]


@pytest.mark.parametrize(("settings", "field", "fragment"), BAD)
def test_bad_setting_refused_naming_it(settings: dict[str, object], field: str, fragment: str) -> None:
    with pytest.raises(pydantic.ValidationError) as err:
        Config(**settings)
    [e] = err.value.errors()
    assert e["loc"][0] == field and fragment in e["msg"], e


@pytest.mark.parametrize(("given", "kept"), [
    (["10.0.0.5", " 10.0.0.0/24", "[::1]"], ["10.0.0.5", "10.0.0.0/24", "::1"]),  # normalised as uvicorn reads them
    (["*"], ["*"]),  # every client's headers (only where nothing but the proxy reaches the port)
    (None, None),  # unset: uvicorn's own default
])
def test_good_addresses_normalised(given: list[str] | None, kept: list[str] | None) -> None:
    assert Config(http_forwarded_allow_ips=given).http_forwarded_allow_ips == kept


def test_service_section_and_env_names(monkeypatch: pytest.MonkeyPatch) -> None:
    # a config file's [service] keys name both settings ...
    assert flatten({"service": {"forwarded_allow_ips": ["10.1.2.3"], "ui_cookie_secure": "always"}}) == {
        "http_forwarded_allow_ips": ["10.1.2.3"], "ui_cookie_secure": "always"}
    # ... and so do the TIERMEM_ variables
    monkeypatch.setenv("TIERMEM_HTTP_FORWARDED_ALLOW_IPS", '["10.1.2.3/32"]')
    monkeypatch.setenv("TIERMEM_UI_COOKIE_SECURE", "always")
    cfg = Config()
    assert (cfg.http_forwarded_allow_ips, cfg.ui_cookie_secure) == (["10.1.2.3/32"], "always")
