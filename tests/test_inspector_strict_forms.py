"""The inspector's form bodies are strict, as the API's (tiermem.service.schemas): a number
field takes a JSON number alone, a boolean field true/false alone (a review, 2026-12-07).

Before, `PinIn` and `PlanIn` read their bodies in pydantic's lax mode: `{"pinned": "yes"}`
pinned, `{"budget": true}` planned at budget 1 and `{"budget": "12"}` at 12. Now each is
refused with a 422 naming the field, and nothing is pinned or planned. The plan form sends
its budget as a JSON number (typed by static/inspector.js; the browser tests drive the slider).
FastAPI's TestClient on the real app, real SQLite.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from typing import Any

import pytest
from fastapi.testclient import TestClient
from inspector_helpers import CONV, TOKEN_ACME, TOKENS

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

HX = {"HX-Request": "true"}
ERROR = re.compile(r'<p class="error" role="alert"[^>]*>(.*?)</p>', re.S)
PINS, PLAN, LOGIN = f"/ui/c/{CONV}/pins", f"/ui/c/{CONV}/plan", "/ui/login"
TURNS = 4


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("strict-forms") / "data", auth_tokens=TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        m.append_many(CONV, [{"role": "user" if i % 2 == 0 else "assistant", "content": f"flight note {i}"}
                             for i in range(TURNS)], namespace="acme")
        yield m


@pytest.fixture
def client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        assert c.post(LOGIN, json={"token": TOKEN_ACME}, headers=HX).status_code == 200
        yield c


# (route, body, the field the refusal names)
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    (PINS, {"position": 1, "pinned": "yes"}, "pinned"),  # the reviewer's: pinned before
    (PINS, {"position": 1, "pinned": 1}, "pinned"),  # a number is no boolean
    (PINS, {"position": "1", "pinned": True}, "position"),  # text is no position
    (PINS, {"position": 1.0, "pinned": True}, "position"),  # nor a fraction, even a whole one
    (PINS, {"position": True, "pinned": True}, "position"),  # true was position 1
    (PINS, {"position": 1, "pinned": True, "priority": "80"}, "priority"),  # text is no priority
    (PLAN, {"budget": True}, "budget"),  # the reviewer's: planned at budget 1 before
    (PLAN, {"budget": "12"}, "budget"),  # the reviewer's: planned at 12 before
    (PLAN, {"budget": 500.0}, "budget"),  # a fraction, even a whole one
    (PLAN, {"query": 5}, "query"),  # a number is no query
    (PLAN, {"timezone": 0}, "timezone"),  # nor a zone
    (LOGIN, {"token": 5}, "token"),  # nor a token
]


@pytest.mark.parametrize(("route", "body", "named"), REFUSED)
def test_a_field_of_another_type_is_refused_naming_it(client: TestClient, mem: Memory, route: str,
                                                      body: dict[str, Any], named: str) -> None:
    key = mem.cold.key_of("acme", CONV) or ""
    pins_before = [t.pinned_priority for t in mem.cold.turns(key)]
    r = client.post(route, json=body, headers=HX)
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html"), r.text
    shown = [unescape(m) for m in ERROR.findall(r.text)]
    assert len(shown) == 1 and shown[0].startswith(f"{named}: "), shown
    assert 'id="plan"' not in r.text  # nothing planned
    assert [t.pinned_priority for t in mem.cold.turns(key)] == pins_before  # nothing pinned


def test_fields_of_their_own_types_are_taken(client: TestClient, mem: Memory) -> None:
    key = mem.cold.key_of("acme", CONV) or ""
    r = client.post(PINS, json={"position": 1, "pinned": True, "priority": 80}, headers=HX)
    assert r.status_code == 200 and 'data-pinned="true"' in r.text, r.text
    assert mem.cold.turns(key)[1].pinned_priority == 80
    r = client.post(PINS, json={"position": 1, "pinned": False}, headers=HX)
    assert r.status_code == 200 and mem.cold.turns(key)[1].pinned_priority is None
    r = client.post(PLAN, json={"query": "which flight?", "budget": 600, "timezone": ""}, headers=HX)
    assert r.status_code == 200 and 'data-budget="600"' in r.text, r.text


def test_the_plan_form_keeps_no_budget_beside_its_slider(client: TestClient) -> None:
    """The budget goes as a JSON number, typed from the slider as the request is built
    (static/inspector.js; tests/test_inspector_browser_back.py drives it): the form keeps
    no copy in `hx-vals`, which the page's HTML would bring back stale after Back."""
    page = client.get(PLAN, params={"budget": "750"})
    form = re.search(r'<form id="plan-form"[^>]*>', page.text, re.S)
    assert form is not None and "hx-vals" not in form.group(0), form
    assert re.search(r'<input id="budget" name="budget" type="range"[^>]*value="750"', page.text)
