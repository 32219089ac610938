"""The plan form after the browser's Back button (a review of 1f4ad9b, 2026-12-07), in
real headless Chromium against a real `tiermem serve` (as tests/test_inspector_browser.py).

The pages are no-store, so Back reloads the plan page from its link, and Chrome restores
the slider the user had moved. Invariant: the number beside the slider and the budget the
form plans are the slider's own, whatever the page's HTML said. Before the fix the form
kept a copy of the budget in `hx-vals`, which came back from the HTML (the link's 2000)
while the slider showed 1500, and Plan planned 2000; the `<output>` beside the slider
showed 2000 too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from inspector_helpers import CONV, TOKEN_METRICS, TOKENS, chromium, chromium_missing, console_errors, seed
from reliability_helpers import serving
from test_inspector_browser import attr, login, wait

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))

LINK_BUDGET = 2000  # tokens: the budget the link (and so the page's HTML) names
PRESSES = 10  # ArrowLeft presses on the slider: 10 steps of 50 tokens, to 1500


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("inspector-back")
    env = {"TIERMEM_AUTH_TOKENS": json.dumps(TOKENS), "TIERMEM_METRICS_TOKENS": json.dumps([TOKEN_METRICS]),
           "TIERMEM_HOT_BUDGET_TOKENS": "400"}
    with serving(tmp / "data", tmp / "serve.log", env=env) as srv:
        seed(srv.url)
        yield srv.url


def replan(driver: Any, act: Any) -> str | None:
    """The budget of the plan that `act` brings: the plan shown now is marked, `act` runs,
    and the new plan is read once htmx has swapped it in (whatever budget it has)."""
    driver.execute_script("document.getElementById('plan').dataset.old = '1'")
    act()
    wait(driver, lambda d: attr(d, "plan", "data-old") is None and attr(d, "plan", "data-budget") is not None)
    return attr(driver, "plan", "data-budget")


def shown(driver: Any) -> tuple[str, str]:
    """The slider's value and the number beside it."""
    from selenium.webdriver.common.by import By

    return (driver.find_element(By.ID, "budget").get_attribute("value"),
            driver.find_element(By.ID, "budget-value").text)


def test_after_back_the_form_plans_the_budget_the_slider_shows(server: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    with chromium() as b:
        login(b, server)
        b.get(server + f"/ui/c/{CONV}/plan?q=hotels&budget={LINK_BUDGET}")
        slider = b.find_element(By.ID, "budget")
        step = int(slider.get_attribute("step"))
        moved = LINK_BUDGET - PRESSES * step
        slider.send_keys(*([Keys.ARROW_LEFT] * PRESSES))
        wait(b, lambda d: attr(d, "plan", "data-budget") == str(moved))

        b.get(server + f"/ui/c/{CONV}")  # another page, then Back to the plan
        b.back()
        wait(b, lambda d: d.find_elements(By.ID, "plan-form") and d.execute_script(
            "return document.readyState") == "complete")
        # the case this test is for: Chrome gave the slider back its moved value, though the
        # page (no-store) was loaded again from the link naming 2000
        assert shown(b)[0] == str(moved), "Chrome restores the slider after Back"
        assert shown(b) == (str(moved), str(moved)), "the number beside the slider is the slider's"

        # the Plan button plans what the slider shows
        button = b.find_element(By.CSS_SELECTOR, "#plan-form button[type=submit]")
        assert replan(b, button.click) == str(moved)
        # Enter in the query field too
        query = b.find_element(By.ID, "query")
        query.clear()
        assert replan(b, lambda: query.send_keys("flights", Keys.ENTER)) == str(moved)
        # and moving the slider from there plans from the slider's value, not the link's
        slider = b.find_element(By.ID, "budget")
        assert replan(b, lambda: slider.send_keys(Keys.ARROW_RIGHT)) == str(moved + step)
        assert shown(b) == (str(moved + step),) * 2
        assert console_errors(b) == []
