"""`/redoc` makes the browser ask no other host for anything (a security review, 2026-12-06).

The ReDoc bundle we serve from the `fastapi-offline` package draws its footer logo from
https://cdn.redoc.ly/redoc/logo-mini.svg: before, every visit to `/redoc` fetched it,
telling Redocly the visitor's address and when the docs were read, on a service that
promises nothing is fetched at run time. Now the page's policy (`img-src`) refuses it
before any request is made. Debian's Chromium against a real `tiermem serve`, with every
host but loopback unresolvable: a request to another host shows in the browser's log as a
failed network load (source "network"), a refusal by the policy as "security".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from inspector_helpers import TOKENS, WAIT_S, chromium, chromium_missing
from reliability_helpers import serving

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("redoc-offline")
    with serving(tmp / "data", tmp / "serve.log", env={"TIERMEM_AUTH_TOKENS": json.dumps(TOKENS)}) as srv:
        yield srv.url


def test_redoc_renders_and_fetches_nothing_from_another_host(server: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with chromium() as browser:
        browser.get(server + "/redoc")
        # the menu footer, where the logo is, renders with the rest of the spec
        WebDriverWait(browser, WAIT_S, poll_frequency=0.1).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "a[href*='redocly.com']")
            and d.find_elements(By.CSS_SELECTOR, "h1"))
        assert "tiermem" in browser.find_element(By.CSS_SELECTOR, "h1").text
        log = browser.get_log("browser")
    fetched = [e["message"] for e in log if e.get("source") == "network" and not e["message"].startswith(server)]
    assert fetched == [], "the browser asked another host for something"
