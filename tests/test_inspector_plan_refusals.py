"""A what-if plan the planner refuses answers 422, as one the form refuses (a review,
2026-12-07): the plan page and the form's POST answered 200 with the refusal shown for a
time zone that is no IANA name or a budget too small for the latest message, while a
query too long or a budget out of range answered 422. Now every refusal is a 422 with the
refusal where the plan would be, and a plan the planner makes is a 200.
FastAPI's TestClient on the real app, real SQLite.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape

import pytest
from fastapi.testclient import TestClient
from inspector_helpers import CONV, TOKEN_ACME, TOKENS

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

HX = {"HX-Request": "true"}
ERROR = re.compile(r'<p class="error" role="alert"[^>]*>(.*?)</p>', re.S)
PLAN = f"/ui/c/{CONV}/plan"


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("plan-refusals") / "data", auth_tokens=TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        m.append(CONV, {"role": "user", "content": "I need a flight to Oslo under 300 euros."}, namespace="acme")
        yield m


@pytest.fixture
def client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        assert c.post("/ui/login", json={"token": TOKEN_ACME}, headers=HX).status_code == 200
        yield c


# (query, budget, time zone, the status, the field a refusal names or None)
CASES = [
    ("flight?", 1, "", 422, "budget"),  # the reviewer's: too small for the latest message, 200 before
    ("flight?", 5, "", 422, "budget"),  # likewise
    ("flight?", 2000, "Mars/Base", 422, "timezone"),  # the reviewer's: no IANA zone, 200 before
    ("flight?", 2000, "../../etc/passwd", 422, "timezone"),  # a path, no zone key
    ("flight?", 2000, "Europe/Oslo", 200, None),  # a plan
    ("", 300, "", 200, None),  # a plan from the log alone
]


@pytest.mark.parametrize(("query", "budget", "zone", "status", "named"), CASES)
def test_the_planners_refusal_is_a_422_on_the_page_and_the_form(client: TestClient, query: str, budget: int,
                                                                 zone: str, status: int, named: str | None) -> None:
    posted = client.post(PLAN, json={"query": query, "budget": budget, "timezone": zone}, headers=HX)
    page = client.get(PLAN, params={"q": query, "budget": str(budget), "timezone": zone})
    for r in (posted, page):
        assert r.status_code == status and r.headers["content-type"].startswith("text/html"), r.text[:300]
        shown = [unescape(m) for m in ERROR.findall(r.text)]
        if named is None:
            assert shown == [] and 'id="plan"' in r.text
        else:  # the refusal once, where the plan would be
            assert len(shown) == 1 and shown[0].startswith(f"{named}: ") and 'id="plan"' not in r.text, shown
    assert [unescape(m) for m in ERROR.findall(posted.text)] == [unescape(m) for m in ERROR.findall(page.text)]
