"""The plan page's budget slider shows the budget a link asks for (a review, 2026-12-07).

A range input snaps its value to min + k * step. The slider was min=100 step=50 whatever
the budget, so `/ui/c/<id>/plan?budget=525` drew the slider at 550 and `budget=75` at 100
while the label and the plan said 525 / 75; editing the query and pressing Enter then
re-planned at the slider's value. Now the grid is moved to pass through the budget
(`slider_range`): the rendered input's value is on its own grid, within min..max, and
equals the label and the plan; the arrow keys still move by 50. FastAPI's TestClient on
the real app, real SQLite (the browser side: test_inspector_browser).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from inspector_helpers import CONV, TOKEN_ACME, TOKENS

from tiermem import Config, Memory
from tiermem.inspector.routes import SLIDER_MAX_FLOOR, SLIDER_MIN, SLIDER_STEP, slider_range
from tiermem.memory import MAX_BUDGET_TOKENS
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

HX = {"HX-Request": "true"}
SLIDER = re.compile(r'<input id="budget"[^>]*>', re.S)
OUTPUT = re.compile(r'<output id="budget-value"[^>]*>(\d+)</output>')
PLAN_BUDGET = re.compile(r'<section id="plan"[^>]*data-budget="(\d+)"')
TOO_SMALL = re.compile(r'id="plan-error">budget: (\d+) tokens cannot hold')


def attrs(tag: str) -> dict[str, str]:
    return dict(re.findall(r'(\w[\w-]*)="([^"]*)"', tag))


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("slider-grid") / "data", auth_tokens=TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        m.append(CONV, {"role": "user", "content": "I need a hotel in Oslo under 120 euros a night."},
                 namespace="acme")
        yield m


@pytest.fixture(scope="module")
def client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        assert c.post("/ui/login", json={"token": TOKEN_ACME}, headers=HX).status_code == 200
        yield c


# budgets a link may carry
BUDGETS = [
    525,  # off the 50-token grid: the slider showed 550
    75,  # under SLIDER_MIN: the slider showed 100
    1,  # the smallest the form takes (too small to plan: the refusal names it): showed 100
    149,  # off the grid by 49: showed 150
    600,  # on the usual grid: min stays SLIDER_MIN
    2000,  # the form's first value
    SLIDER_MAX_FLOOR + 25,  # past the usual top and off the grid: max widens to it
    MAX_BUDGET_TOKENS - 1,  # the largest off-grid budget the form takes
]


@pytest.mark.parametrize("budget", BUDGETS)
def test_the_slider_stands_on_the_budget_the_link_asks_for(client: TestClient, budget: int) -> None:
    r = client.get(f"/ui/c/{CONV}/plan", params={"q": "hotel", "budget": str(budget)})
    # 1 token: the planner refuses it, a 422 (tests/test_inspector_plan_refusals.py)
    assert r.status_code == (422 if budget == 1 else 200), r.text[:300]
    s = attrs(SLIDER.search(r.text).group())  # type: ignore[union-attr]
    lo, hi, step, value = int(s["min"]), int(s["max"]), int(s["step"]), int(s["value"])
    assert step == SLIDER_STEP, "the arrow keys still move by 50"
    assert value == budget and lo <= value <= hi
    assert (value - lo) % step == 0, f"{value} is off the slider's grid from {lo}: a browser snaps it"
    assert (hi - lo) % step == 0, "the top is on the grid: the arrow keys reach it"
    assert hi <= MAX_BUDGET_TOKENS and hi >= min(SLIDER_MAX_FLOOR, MAX_BUDGET_TOKENS)
    assert SLIDER_MIN - SLIDER_STEP < lo <= SLIDER_MIN or lo == budget, "the bottom stays near the usual one"
    assert OUTPUT.search(r.text).group(1) == str(budget)  # type: ignore[union-attr]
    # the plan at this budget, or (1 token) the planner's refusal naming it
    planned = PLAN_BUDGET.search(r.text) or TOO_SMALL.search(r.text)
    assert planned is not None and planned.group(1) == str(budget), r.text[-600:]


# (budget, the usual top, the (min, max) the slider gets)
RANGES = [
    (600, 16000, (100, 16000)),  # on the grid: the slider as it always was
    (525, 16000, (75, 16025)),  # 25 off: both ends move by 25
    (75, 16000, (75, 16025)),  # under the minimum: it is the minimum
    (1, 16000, (1, 16001)),  # the smallest budget
    (99, 16000, (99, 16049)),  # one under the minimum, 49 off the grid
    (20000, 16000, (100, 20000)),  # past the top, on the grid: the top widens to it (as before)
    (20025, 16000, (75, 20025)),  # past the top, off the grid
    (MAX_BUDGET_TOKENS - 1, 16000, (99, MAX_BUDGET_TOKENS - 1)),  # the top one step down from the limit
    (600, MAX_BUDGET_TOKENS * 2, (100, MAX_BUDGET_TOKENS)),  # a hot budget past what the form takes
    (625, MAX_BUDGET_TOKENS * 2, (75, MAX_BUDGET_TOKENS - 25)),  # ... and off its grid: stays under it
]


@pytest.mark.parametrize(("budget", "top", "expected"), RANGES)
def test_slider_range(budget: int, top: int, expected: tuple[int, int]) -> None:
    assert slider_range(budget, top) == expected
