"""The inspector's what-if plan in a time zone of the form's (`timezone`, empty: the
server's setting): the dentist, told at 05:00 UTC on Saturday, is Friday evening for a user
in Los Angeles. A bad zone is the form's error naming the field (never a 5xx), and what-if
plans still record nothing. Before, the form had no zone: every what-if was in UTC."""

from __future__ import annotations

from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from zone_helpers import BAD_ZONE, BUDGET, HEADINGS, LA, QUESTION, seed

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed import Embedder
from tiermem.tiers.zones import MAX_ZONE_NAME_CHARS

TOKEN = "tok-acme-inspector-zone-0123456789"
HX = {"HX-Request": "true"}
CONV = "c"


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN: "acme"}, store_plans=True)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        seed(m.namespaced("acme"), CONV)
        yield m


@pytest.fixture
def client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        assert c.post("/ui/login", json={"token": TOKEN}, headers=HX).status_code == 200
        yield c


@pytest.mark.parametrize("zone", [
    LA,  # the form's zone: Friday evening in Los Angeles, with its offset
    None,  # the field left empty: the server's zone (UTC), as before
])
def test_the_what_if_plan_is_in_the_forms_zone(client: TestClient, zone: str | None) -> None:
    posted = client.post(f"/ui/c/{CONV}/plan", json={"query": QUESTION, "budget": BUDGET, "timezone": zone or ""},
                         headers=HX)
    assert posted.status_code == 200 and HEADINGS[zone] in unescape(posted.text), posted.text
    page = client.get(f"/ui/c/{CONV}/plan", params={"q": QUESTION, "budget": BUDGET, "timezone": zone or ""})
    assert page.status_code == 200 and HEADINGS[zone] in unescape(page.text)
    assert f'name="timezone" type="text" value="{zone or ""}"' in page.text  # the form keeps it


@pytest.mark.parametrize(("zone", "status"), [
    (BAD_ZONE, 422),  # not an IANA name: the planner's refusal, as a budget too small is
    ("../../etc/passwd", 422),  # a path, not a zone key
    ("A" * (MAX_ZONE_NAME_CHARS + 1), 422),  # past the longest name the form takes
])
def test_a_bad_zone_is_the_forms_error_naming_the_field(client: TestClient, mem: Memory, zone: str,
                                                          status: int) -> None:
    plans = len(mem.cold.plans(mem.cold.key_of("acme", CONV) or ""))
    r = client.post(f"/ui/c/{CONV}/plan", json={"query": QUESTION, "budget": BUDGET, "timezone": zone}, headers=HX)
    assert r.status_code == status and 'role="alert"' in r.text and "timezone" in r.text, r.text
    page = client.get(f"/ui/c/{CONV}/plan", params={"q": QUESTION, "timezone": zone})
    # the page refuses what the form refuses (tests/test_inspector_plan_get_checks.py)
    assert page.status_code == status and 'role="alert"' in page.text and "timezone" in page.text
    assert len(mem.cold.plans(mem.cold.key_of("acme", CONV) or "")) == plans
