"""Shared machinery of the inspector tests (tests/test_inspector_*.py).

- `seed`: one conversation per tenant written through the public HTTP API, with what the
  inspector must show: tool calls with results, load-bearing constraints, a correction
  that supersedes one, two sessions; and another tenant's secret that must stay invisible.
- `chromium`: the system Chromium (Debian's `chromium` + `chromium-driver`) driven by
  Selenium, headless, with every host name but loopback unresolvable: a page that needs a
  CDN fails, and the failure shows in the browser log the tests read. Skips, with the
  reason, where the packages are not installed (`make install` installs them as root).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from service_helpers import bearer

TOKEN_ACME = "tok-acme-inspector-0123456789"
TOKEN_GLOBEX = "tok-globex-inspector-0123456789"
TOKEN_METRICS = "tok-metrics-inspector-0123456789"
TOKENS = {TOKEN_ACME: "acme", TOKEN_GLOBEX: "globex"}
CONV = "trip-7"  # acme's
OTHER = "globex-plan"  # globex's
SECRET = "the globex vault code is 7-4-1"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 30.0  # for a page or an htmx swap (the machine is shared and slow)


def trip_messages() -> list[dict[str, Any]]:
    """A support conversation of 26 turns: constraints, a correction, tool calls and results."""
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "I need a flight from Lisbon to Oslo in March. I am allergic to peanuts.",
         "session_id": "s1"},
        {"role": "assistant", "content": "Understood: Lisbon to Oslo in March, and no peanuts on board.",
         "session_id": "s1"},
        {"role": "user", "content": "My budget is at most 400 euros and I never fly with Ryanair.",
         "session_id": "s1"},
    ]
    for i in range(8):
        msgs.append({"role": "assistant", "content": None, "session_id": "s1",
                     "tool_calls": [{"id": f"call_{i}", "type": "function",
                                     "function": {"name": "search_flights",
                                                  "arguments": f'{{"day": {i + 1}, "from": "LIS", "to": "OSL"}}'}}]})
        msgs.append({"role": "tool", "tool_call_id": f"call_{i}", "session_id": "s1",
                     "content": f"TAP {100 + i}: March {i + 1}, 08:{10 + i} to 13:{20 + i}, {250 + 10 * i} EUR"})
    msgs += [
        {"role": "user", "content": "Actually my budget is at most 300 euros, not 400.", "session_id": "s2"},
        {"role": "assistant", "content": "Noted: at most 300 euros. TAP 100 on March 1 fits.", "session_id": "s2"},
        {"role": "user", "content": "Please also keep a window seat for me.", "session_id": "s2"},
        {"role": "assistant", "content": "A window seat is requested.", "session_id": "s2"},
        {"role": "user", "content": "What hotels are near Oslo central station?", "session_id": "s2"},
        {"role": "assistant", "content": "Three hotels are within 300 m of Oslo S: Thon, Comfort and Citybox.",
         "session_id": "s2"},
        {"role": "user", "content": "Which one is cheapest?", "session_id": "s2"},
    ]
    return msgs


SMALL = {
    "billing-12": ["My invoice for May is wrong: I was charged twice.", "I see two charges of 49 EUR; one is refunded.",
                   "Always email me, never call."],
    "onboarding-3": ["How do I invite my team?", "Settings, Members, Invite: paste their e-mail addresses."],
}


def seed(url: str) -> None:
    with httpx.Client(base_url=url, timeout=120) as c:
        r = c.post(f"/v1/conversations/{CONV}/messages:batch", headers=bearer(TOKEN_ACME),
                   json={"messages": trip_messages()})
        assert r.status_code == 201, r.text
        for name, texts in SMALL.items():  # a few more of acme's, for a list worth looking at
            r = c.post(f"/v1/conversations/{name}/messages:batch", headers=bearer(TOKEN_ACME),
                       json={"messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": t}
                                          for i, t in enumerate(texts)]})
            assert r.status_code == 201, r.text
        r = c.post(f"/v1/conversations/{OTHER}/messages", headers=bearer(TOKEN_GLOBEX),
                   json={"role": "user", "content": SECRET})
        assert r.status_code == 201, r.text
        for q, budget in (("what is my budget?", 600), ("which hotel is cheapest?", 600), ("any allergies?", 300)):
            r = c.post(f"/v1/conversations/{CONV}/context", headers=bearer(TOKEN_ACME),
                       json={"query": q, "budget": budget})
            assert r.status_code == 200, r.text


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    for path, pkg in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if shutil.which(path) is None:
            return f"{path} is not installed (apt-get install -y {pkg}; `make install` does it as root)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


@contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    why = chromium_missing()
    if why:
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--no-first-run", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update",
                # offline: only loopback resolves, so any CDN request fails (and is logged)
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(WAIT_S * 2)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver: Any) -> list[str]:
    """SEVERE entries of the browser log since the last read (the log is drained)."""
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
