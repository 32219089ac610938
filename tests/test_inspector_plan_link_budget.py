"""A saved link's `budget` plans as it did before the forms turned strict (a review of
1f4ad9b, 2026-12-07): `GET /ui/c/<id>/plan?budget=...` reads the text as pydantic's lax
integer (Python's int() text: a sign, leading zeros, `_` between digits, spaces around; and
a float's text with no fraction), a number out of range is refused naming the limit however
many digits it has, and the form's JSON body stays strict (a number alone).

Before the fix, 1f4ad9b answered 422 "Input should be a valid integer" to links that had
planned (`+1500`, `01500`, `1500.0`, ` 1500`, `1_500`) and to a number of 23 digits, which
had been refused naming the limit. FastAPI's TestClient on the real app, real SQLite.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape

import pytest
from fastapi.testclient import TestClient
from inspector_helpers import CONV, TOKEN_ACME, TOKENS

from tiermem import Config, Memory
from tiermem.memory import MAX_BUDGET_TOKENS
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

HX = {"HX-Request": "true"}
PLAN = f"/ui/c/{CONV}/plan"
ERROR = re.compile(r'<p class="error" role="alert"[^>]*>(.*?)</p>', re.S)
OVER = f"budget: Input should be less than or equal to {MAX_BUDGET_TOKENS}"
UNDER = "budget: Input should be greater than or equal to 1"
NO_INTEGER = "budget: Input should be a valid integer"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[TestClient]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("link-budget") / "data", auth_tokens=TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append(CONV, {"role": "user", "content": "I need a flight to Oslo under 300 euros."}, namespace="acme")
        with TestClient(create_app(cfg, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
            assert c.post("/ui/login", json={"token": TOKEN_ACME}, headers=HX).status_code == 200
            yield c


# (a link's budget text, the budget it plans at)
PLANNED = [
    ("1500", 1500),  # plain digits
    ("+1500", 1500),  # a plus sign
    ("01500", 1500),  # a leading zero
    ("1500.0", 1500),  # a float's text with no fraction
    ("1500.00", 1500),  # more zeros of fraction
    (" 1500", 1500),  # a space before (%201500)
    ("1500 ", 1500),  # a space after
    ("1_500", 1500),  # `_` between digits, as int() reads it
    (str(MAX_BUDGET_TOKENS), MAX_BUDGET_TOKENS),  # the limit itself
]


@pytest.mark.parametrize(("text", "budget"), PLANNED)
def test_a_link_budget_plans_as_before(client: TestClient, text: str, budget: int) -> None:
    r = client.get(PLAN, params={"q": "flight?", "budget": text})
    assert r.status_code == 200 and not ERROR.search(r.text), r.text[:300]
    assert f'data-budget="{budget}"' in r.text


# (a link's budget text, the refusal it shows)
REFUSED = [
    ("99999999999999999999999", OVER),  # 23 digits: past the limit, said as such
    ("9" * 5000, OVER),  # more digits than any integer parses: still past the limit
    (str(MAX_BUDGET_TOKENS + 1), OVER),  # one past the limit
    ("-99999999999999999999999", UNDER),  # a large negative: under 1
    ("0", UNDER),  # zero
    ("-0", UNDER),  # signed zero
    ("1500.5", NO_INTEGER),  # a fraction
    ("1e3", NO_INTEGER),  # an exponent
    ("lots", NO_INTEGER),  # no number
    ("", NO_INTEGER),  # empty
]


@pytest.mark.parametrize(("text", "said"), REFUSED)
def test_a_link_budget_refused_says_why(client: TestClient, text: str, said: str) -> None:
    r = client.get(PLAN, params={"q": "flight?", "budget": text})
    assert r.status_code == 422 and 'id="plan"' not in r.text, r.text[:300]
    shown = [unescape(m) for m in ERROR.findall(r.text)]
    assert len(shown) == 1 and shown[0].startswith(said), shown


# (a JSON body's budget): the form's POST stays strict, whatever a link takes
STRICT_BODIES = [
    "1500",  # digits as text
    "+1500",  # a signed text
    1500.0,  # a float, even with no fraction
    True,  # a boolean
]


@pytest.mark.parametrize("budget", STRICT_BODIES)
def test_the_form_body_stays_strict(client: TestClient, budget: object) -> None:
    r = client.post(PLAN, json={"query": "flight?", "budget": budget, "timezone": ""}, headers=HX)
    assert r.status_code == 422 and 'id="plan"' not in r.text, r.text[:300]
    assert unescape(ERROR.search(r.text).group(1)).startswith("budget: "), r.text  # type: ignore[union-attr]
