"""`GET /ui/c/<id>/plan` (a link to a what-if plan) refuses exactly what the form's POST
refuses, with the same message (a security review, 2026-12-06). Before, the GET planned a
query of any length (the POST caps it at MAX_QUERY_CHARS), clamped a budget out of range
where the POST refuses it, took a time zone name of any length, and answered a budget that
is no integer with FastAPI's JSON 422 instead of a page. Now both run the form's own check
(`PlanIn`): the GET answers the plan page with status 422 and the refusal where the plan
would be, and plans nothing. FastAPI's TestClient on the real app, real SQLite.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape

import pytest
from fastapi.testclient import TestClient
from inspector_helpers import CONV, TOKEN_ACME, TOKENS

from tiermem import Config, Memory
from tiermem.inspector.routes import MAX_QUERY_CHARS
from tiermem.memory import MAX_BUDGET_TOKENS
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.zones import MAX_ZONE_NAME_CHARS

pytestmark = pytest.mark.usefixtures("clean_env")

HX = {"HX-Request": "true"}
ERROR = re.compile(r'<p class="error" role="alert"[^>]*>(.*?)</p>', re.S)


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("plan-get") / "data", auth_tokens=TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        m.append(CONV, {"role": "user", "content": "I need a flight to Oslo under 300 euros."}, namespace="acme")
        yield m


@pytest.fixture
def client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        assert c.post("/ui/login", json={"token": TOKEN_ACME}, headers=HX).status_code == 200
        yield c


# (the GET's query parameters, the field the refusal names)
REFUSED = [
    ({"q": "x" * (MAX_QUERY_CHARS + 1)}, "query"),  # one past the form's cap: planned before
    ({"q": "flight?", "budget": str(MAX_BUDGET_TOKENS + 1)}, "budget"),  # past the limit: clamped before
    ({"q": "flight?", "budget": "0"}, "budget"),  # below 1: clamped to 1 before
    ({"q": "flight?", "budget": "-500"}, "budget"),  # negative: clamped before
    ({"q": "flight?", "budget": "lots"}, "budget"),  # no integer: a JSON 422, no page, before
    ({"q": "flight?", "budget": "9" * 5000}, "budget"),  # digits past any int: refused naming the limit
    ({"q": "flight?", "timezone": "E" * (MAX_ZONE_NAME_CHARS + 1)}, "timezone"),  # past the zone name cap
]


@pytest.mark.parametrize(("params", "named"), REFUSED)
def test_the_get_refuses_what_the_post_refuses_with_its_message(client: TestClient, mem: Memory,
                                                                params: dict[str, str], named: str) -> None:
    key = mem.cold.key_of("acme", CONV)
    plans_before = mem.cold.plans(key)
    # the form sends its budget as a JSON number (its slider's), a link's is text: the same
    # number where the text is an integer in digits (digits past any integer: a number past
    # the limit, as the link reads them), else the text itself
    budget = params.get("budget", "2000")
    sent: int | str = budget
    if re.fullmatch(r"-?[0-9]+", budget):
        sent = int(budget) if len(budget) < 20 else MAX_BUDGET_TOKENS + 1
    body = {"query": params.get("q", ""), "budget": sent, "timezone": params.get("timezone", "")}
    posted = client.post(f"/ui/c/{CONV}/plan", json=body, headers=HX)
    assert posted.status_code == 422, posted.text
    message = unescape(ERROR.search(posted.text).group(1))  # type: ignore[union-attr]
    assert message.startswith(f"{named}:"), message

    r = client.get(f"/ui/c/{CONV}/plan", params=params)
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html"), r.text[:300]
    shown = [unescape(m) for m in ERROR.findall(r.text)]
    assert shown == [message]  # the POST's very message, once, where the plan would be
    assert 'id="plan"' not in r.text and 'id="plan-form"' in r.text  # nothing planned, the form kept
    assert len(r.text) < MAX_QUERY_CHARS * 4  # the refused input is not echoed whole
    assert mem.cold.plans(key) == plans_before


# (the GET's query parameters) at the limits: planned, as the POST plans them
ACCEPTED = [
    {"q": "x" * MAX_QUERY_CHARS, "budget": "500"},  # a query of exactly the cap
    {"q": "flight?", "budget": str(MAX_BUDGET_TOKENS)},  # the largest budget
    {"q": "", "budget": "300"},  # no query: a plan from the log alone
    {},  # no parameters: the form's defaults
]


@pytest.mark.parametrize("params", ACCEPTED)
def test_the_get_plans_what_the_post_plans(client: TestClient, params: dict[str, str]) -> None:
    r = client.get(f"/ui/c/{CONV}/plan", params=params)
    assert r.status_code == 200 and 'id="plan"' in r.text and not ERROR.search(r.text), r.text[:300]
    budget = params.get("budget", "2000")
    assert f'data-budget="{budget}"' in r.text  # planned at the budget asked for, not a clamped one
