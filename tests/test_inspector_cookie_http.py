"""With `ui_cookie_secure = "always"` (the compose files' default) a browser that opens the
inspector over plain http at an address other than loopback (http://192.0.2.2:8080/ui from
another machine) drops the Secure login cookie. The login page says so before the token is
typed, and the sign-in answers with that message (the two ways out: https through the
proxy, or TIERMEM_UI_COOKIE_SECURE=auto on a trusted network) instead of a redirect back
into the login page; the cookie stays Secure whatever the page says.

Before (a review, 2026-12-07, /tmp/rv_session/cookie/lan.py): the sign-in answered 200 with
HX-Redirect to /ui/ and a Secure cookie the browser refused; /ui/ sent it back to
/ui/login, a loop with no word said. The cases marked "fails before" below did.

A real `tiermem serve` child per setting. What the browser sees is the page's host: the
client sends the Host a browser on another machine sends (192.0.2.2, a name), admitted by
http_allowed_hosts, from 127.0.0.5 (any loopback address but 127.0.0.1, whose forwarded
headers uvicorn believes by default, stands for another host, as in
test_inspector_cookie_secure.py); a TLS proxy that is not in http_forwarded_allow_ips is
such a client sending X-Forwarded-Proto or Forwarded as proxies do.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from ports import free_port
from service_helpers import NO_HOT_TIER_URL, serve_process

pytestmark = pytest.mark.usefixtures("clean_env")

TOKEN = "tok-cookie-http-0123456789"
LOGIN_HEADERS = {"HX-Request": "true", "Content-Type": "application/json"}
LAN_IP, LAN_NAME = "192.0.2.2", "inspector.lan"  # the service's address and name on a LAN
ALLOWED_HOSTS = f'["{LAN_IP}", "{LAN_NAME}", "app.localhost"]'
CLIENT = "127.0.0.5"  # another host: uvicorn takes its X-Forwarded-Proto for nothing
MESSAGE = "your browser will not keep the sign-in cookie"  # in both the page and the sign-in answer
WAY_OUT_ENV = "TIERMEM_UI_COOKIE_SECURE=auto"
WAY_OUT_HTTPS = "over https, through the TLS proxy"

ALWAYS = {"TIERMEM_UI_COOKIE_SECURE": "always"}
AUTO: dict[str, str] = {}

# settings -> [(Host the page is open at, proxy headers, message said?, cookie Secure?)]
CASES = [
    pytest.param(ALWAYS, [
        (LAN_IP, {}, True, True),  # the finding: plain http at the LAN address (fails before)
        (LAN_NAME, {}, True, True),  # at a LAN name, the same (fails before)
        # behind a TLS proxy that is not listed: the page is https, no loop; Secure as always
        (LAN_IP, {"X-Forwarded-Proto": "https"}, False, True),
        (LAN_NAME, {"Forwarded": 'for=192.0.2.9;proto="https"'}, False, True),  # RFC 7239's form
        # a proxy's http is still http: the message stays (fails before)
        (LAN_IP, {"X-Forwarded-Proto": "http"}, True, True),
        # browsers keep a Secure cookie over http on these: no message, as before
        ("localhost", {}, False, True),
        ("127.0.0.1", {}, False, True),
        ("[::1]", {}, False, True),
        ("app.localhost", {}, False, True),
    ], id="always"),
    # auto: over plain http the cookie is not Secure, so kept: no message anywhere
    pytest.param(AUTO, [(LAN_IP, {}, False, False), ("localhost", {}, False, False)], id="auto"),
]


def _child_env(settings: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_") and k != "FORWARDED_ALLOW_IPS"}
    env.update({"TIERMEM_REDIS_URL": NO_HOT_TIER_URL, "TIERMEM_SCHEDULER_ENABLED": "false",
                "TIERMEM_AUTH_TOKENS": f'{{"{TOKEN}": "acme"}}', "TIERMEM_HTTP_ALLOWED_HOSTS": ALLOWED_HOSTS,
                **settings})
    return env


@pytest.mark.parametrize(("settings", "checks"), CASES)
def test_login_says_when_browser_drops_cookie(tmp_path: Path, settings: dict[str, str],
                                              checks: list[tuple[str, dict[str, str], bool, bool]]) -> None:
    with serve_process(tmp_path / "data", free_port(), tmp_path / "serve.log", env=_child_env(settings)) as url:
        port = url.rsplit(":", 1)[1]
        with httpx.Client(base_url=url, timeout=60, transport=httpx.HTTPTransport(local_address=CLIENT)) as c:
            for host, proxy, said, secure in checks:
                headers = {"Host": f"{host}:{port}", **proxy}
                case = (host, proxy)
                page = c.get("/ui/login", headers=headers)
                assert page.status_code == 200, (case, page.text)
                # the page says it before the token is typed, with both ways out
                assert (MESSAGE in page.text) is said, case
                assert (WAY_OUT_ENV in page.text and WAY_OUT_HTTPS in page.text) is said, case
                r = c.post("/ui/login", headers={**headers, **LOGIN_HEADERS}, json={"token": TOKEN})
                c.cookies.clear()  # each case a fresh browser
                assert r.status_code == 200, (case, r.text)
                cookie = r.headers["set-cookie"]
                # the cookie is set either way, and Secure exactly as the setting says
                assert cookie.startswith("tiermem_ui=") and ("; Secure" in cookie) is secure, (case, cookie)
                if said:  # no redirect into the loop: the message, and a way on if it is https after all
                    assert "HX-Redirect" not in r.headers and MESSAGE in r.text and WAY_OUT_ENV in r.text, case
                    assert 'href="/ui/"' in r.text and r.headers["content-security-policy"], case
                else:
                    assert r.headers["HX-Redirect"] == "/ui/" and MESSAGE not in r.text, case
                # a wrong token is refused as ever, with no word of the cookie
                bad = c.post("/ui/login", headers={**headers, **LOGIN_HEADERS}, json={"token": "tok-wrong-0123456789"})
                assert bad.status_code == 401 and "not valid" in bad.text and MESSAGE not in bad.text, case
                assert "set-cookie" not in bad.headers, case


def test_loop_ends_at_a_page_that_says_why(tmp_path: Path) -> None:
    """The reviewer's walk with a standard cookie jar (like a browser, it never sends a
    Secure cookie over http): sign in, open /ui/, land on the login page; it now says why."""
    with serve_process(tmp_path / "data", free_port(), tmp_path / "serve.log", env=_child_env(ALWAYS)) as url:
        port = url.rsplit(":", 1)[1]
        lan = {"Host": f"{LAN_IP}:{port}"}
        with httpx.Client(base_url=url, timeout=60, headers=lan,
                          transport=httpx.HTTPTransport(local_address=CLIENT)) as c:
            r = c.post("/ui/login", headers=LOGIN_HEADERS, json={"token": TOKEN})
            assert r.status_code == 200 and "; Secure" in r.headers["set-cookie"], r.headers
            home = c.get("/ui/")
            assert "tiermem_ui" not in home.request.headers.get("cookie", "")  # the jar kept it back
            assert home.status_code == 303 and home.headers["location"] == "/ui/login", home.headers
            login = c.get("/ui/login")
            assert login.status_code == 200 and MESSAGE in login.text and WAY_OUT_ENV in login.text, login.text
