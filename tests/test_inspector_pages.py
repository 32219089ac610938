"""What each inspector page shows (issue 21), against a full Memory: the SQLite log, the
embedded Redis hot tier, warm views refreshed for real. FastAPI's TestClient on the
real app; the browser tests (test_inspector_browser.py) drive the same pages in Chromium.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest
from conftest import full_memory
from fastapi.testclient import TestClient
from inspector_helpers import CONV, TOKEN_ACME, TOKENS, trip_messages

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

HX = {"HX-Request": "true"}
CORRECTION = 19  # "Actually my budget is at most 300 euros": supersedes #2


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("inspector-pages") / "data", auth_tokens=TOKENS,
                 store_plans=True, hot_budget_tokens=400, warm_max_turns_behind=2)
    with full_memory(cfg, embedder) as m:
        m.append_many(CONV, trip_messages(), namespace="acme")
        m.consolidate(CONV, namespace="acme")
        m.append(CONV, {"role": "assistant", "content": "Citybox is the cheapest."}, namespace="acme")
        m.append(CONV, {"role": "user", "content": "Book it."}, namespace="acme")
        yield m


@pytest.fixture
def client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        r = c.post("/ui/login", json={"token": TOKEN_ACME}, headers=HX)
        assert r.status_code == 200
        yield c


def row(html: str, position: int) -> str:
    m = re.search(rf'<tr id="turn-{position}".*?</tr>', html, re.S)
    assert m, f"no row for #{position}"
    return unescape(m.group(0))


def test_conversations_list_shows_turns_hot_set_pins_staleness_and_lag(client: TestClient, mem: Memory) -> None:
    r = client.get("/ui/")
    assert r.status_code == 200
    line = unescape(re.search(rf'<tr data-conversation="{CONV}">.*?</tr>', r.text, re.S).group(0))  # type: ignore[union-attr]
    hot = mem.hot.read(mem.cold.key_of("acme", CONV)).hot  # type: ignore[union-attr]
    assert hot is not None
    cells = [re.sub(r"<[^>]+>", " ", c).split() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", line, re.S)]
    assert cells[1] == ["28"]  # turns
    assert f"{hot.total_tokens} / {hot.budget}" in " ".join(cells[3])
    assert cells[4] == [str(sum(1 for t in hot.turns if t.pinned))]
    assert "2 turns" in " ".join(cells[5]) and "v1" in cells[5][0]  # two turns appended after the refresh
    # index lag: the two appends after consolidate wait for the (here disabled) background indexer
    assert cells[6][:2] == ["2", "pending"] and mem.cold.pending_embeddings(mem.cold.key_of("acme", CONV)) == 2  # type: ignore[arg-type]


def test_the_log_shows_labels_pins_supersession_tiers_and_tool_results(client: TestClient, mem: Memory) -> None:
    r = client.get(f"/ui/c/{CONV}", params={"page": 0})
    assert r.status_code == 200
    first = row(r.text, 0)
    assert "instruction" in first and "yes" in first and "priority" in first  # load-bearing, labelled
    assert "warm:rolling" in first and "cold" in first
    old = row(r.text, 2)
    assert f"superseded by #{CORRECTION}" in old and "valid" in old  # with its validity interval
    call = row(r.text, 3)
    assert 'search_flights({"day": 1, "from": "LIS", "to": "OSL"})' in call
    assert 'href="#turn-4"' in call and "TAP 100: March 1" in call  # the call with its result
    assert "result of call <code>call_0</code>" in row(r.text, 4)
    key = mem.cold.key_of("acme", CONV)
    hot = {t.position for t in mem.hot.read(key).hot.turns}  # type: ignore[union-attr]
    for p in range(0, 26):
        assert ("hot" in re.findall(r'class="tier tier-(\w+)"', row(r.text, p))) == (p in hot), p


def test_pin_and_unpin_from_the_log(client: TestClient, mem: Memory) -> None:
    r = client.post(f"/ui/c/{CONV}/pins", json={"position": 6, "pinned": True, "priority": 80}, headers=HX)
    assert r.status_code == 200 and 'data-pinned="true"' in r.text and "pinned (80)" in r.text
    key = mem.cold.key_of("acme", CONV)
    assert [t.pinned_priority for t in mem.cold.turns(key, start=6, end=6)] == [80]
    plan = client.get(f"/ui/c/{CONV}/plan", params={"q": "hotels", "budget": 1500}).text
    assert re.search(r'data-slice="pinned" data-positions="6"', plan)
    r = client.post(f"/ui/c/{CONV}/pins", json={"position": 6, "pinned": False}, headers=HX)
    assert 'data-pinned="false"' in r.text
    assert [t.pinned_priority for t in mem.cold.turns(key, start=6, end=6)] == [None]


# (body, what the 422 names) -- bad pin forms
BAD_PINS = [
    ({"position": -1, "pinned": True}, "position"),
    ({"position": 1, "pinned": True, "priority": 101}, "priority"),
    ({"position": 1}, "pinned"),
]


@pytest.mark.parametrize(("body", "named"), BAD_PINS)
def test_bad_pins_are_named_and_change_nothing(client: TestClient, mem: Memory, body: dict[str, int], named: str) -> None:
    key = mem.cold.key_of("acme", CONV)
    before = [t.pinned_priority for t in mem.cold.turns(key)]
    r = client.post(f"/ui/c/{CONV}/pins", json=body, headers=HX)
    assert r.status_code == 422 and named in r.text
    assert [t.pinned_priority for t in mem.cold.turns(key)] == before


def test_plan_shows_layers_left_out_cache_and_stays_under_budget(client: TestClient, mem: Memory) -> None:
    q = "what is my budget?"
    for budget in (300, 800, 3000):
        r = client.post(f"/ui/c/{CONV}/plan", json={"query": q, "budget": budget}, headers=HX)
        assert r.status_code == 200, r.text
        tokens = int(re.search(r'data-tokens="(\d+)" data-budget="(\d+)"', r.text).group(1))  # type: ignore[union-attr]
        assert tokens <= budget
        text = unescape(r.text)
        # the same plan as the library makes (a what-if changes nothing, so it is repeatable):
        # the agent's recorded call, previewed (tests/test_inspector_preview_first_call.py)
        plan = mem.context(CONV, q, budget, namespace="acme", preview=True).plan
        assert tokens == plan.tokens
        assert f"Tokens shared with the previous call</dt><dd id=\"cached-tokens\">{plan.cache.expected_cached_tokens} " in text
        assert "Boundary" in text and "Breakpoints" in text
        for it in plan.items:
            assert f'data-slice="{it.slice}" data-positions="{" ".join(map(str, it.positions))}"' in r.text
        left = re.search(r'<table id="left-out">.*?</table>', r.text, re.S)
        assert (left.group(0).count("<tr data-slice") if left else 0) == len(plan.left_out)
        for it in plan.left_out:
            assert it.reason in text
        assert f"{tokens} of {budget} tokens used" in text  # the chart says it in words


def test_a_budget_too_small_for_the_latest_message_says_so(client: TestClient) -> None:
    r = client.post(f"/ui/c/{CONV}/plan", json={"query": "x " * 400, "budget": 5}, headers=HX)
    # the planner's refusal is the form's: a 422 (tests/test_inspector_plan_refusals.py)
    assert r.status_code == 422 and 'role="alert"' in r.text and "budget" in r.text


def test_stored_plans_by_turn(client: TestClient, mem: Memory) -> None:
    mem.context(CONV, "what is my budget?", 700, namespace="acme")
    mem.context(CONV, "any allergies?", 500, namespace="acme")
    r = client.get(f"/ui/c/{CONV}/plans")
    assert r.status_code == 200
    last = mem.cold.last_position(mem.cold.key_of("acme", CONV))  # type: ignore[arg-type]
    assert f"turn {last}" in r.text and r.text.count('class="stored-plan"') >= 2
    assert 'data-budget="700"' in r.text and 'data-budget="500"' in r.text
    assert "no plans stored" not in r.text.lower()


def test_warm_views_with_provenance_versions_and_lag(client: TestClient, mem: Memory) -> None:
    r = client.get(f"/ui/c/{CONV}/views")
    assert r.status_code == 200
    text = unescape(r.text)
    for kind in ('data-kind="rolling"', 'data-kind="constraints"', 'data-kind="session"'):
        assert kind in r.text
    assert "over its freshness budget" not in text.split("session")[0] or "2 turns" in text
    link = re.search(r'hx-get="(/ui/c/[^"]+/turns\?[^"]+)"', r.text)
    assert link, "each sentence links to its source turns"
    src = client.get(unescape(link.group(1)))
    assert src.status_code == 200 and 'class="source" data-position="0"' in src.text
    assert "I need a flight from Lisbon" in src.text
    mem.consolidate(CONV, namespace="acme")  # a second version of the rolling view
    r = client.get(f"/ui/c/{CONV}/views")
    assert "v2" in r.text
    old = client.get(f"/ui/c/{CONV}/views", params={"kind": "rolling", "key": "", "version": 1})
    assert "Version 1 (latest: 2)" in unescape(old.text)


def test_metrics_page_counts_this_namespaces_calls(client: TestClient) -> None:
    before = client.get("/ui/metrics").text
    n0 = int(re.search(r'data-metric="calls">(\d+)<', before).group(1))  # type: ignore[union-attr]
    r = client.post(f"/v1/conversations/{CONV}/context", json={"query": "hotel?", "budget": 600},
                    headers={"Authorization": f"Bearer {TOKEN_ACME}"})
    assert r.status_code == 200
    client.post(f"/ui/c/{CONV}/plan", json={"query": "what-if", "budget": 600}, headers=HX)  # not traffic
    after = client.get("/ui/metrics").text
    assert int(re.search(r'data-metric="calls">(\d+)<', after).group(1)) == n0 + 1  # type: ignore[union-attr]
    assert "budget use per call" in after and "tokens per layer" in after


def test_docs_and_redoc_load_nothing_from_outside(client: TestClient) -> None:
    for page in ("/docs", "/redoc"):
        r = client.get(page)
        assert r.status_code == 200
        urls = re.findall(r'(?:src|href)=["\']([^"\']+)', r.text) + re.findall(r"url: '([^']+)'", r.text)
        assert urls and all(u.startswith("/") for u in urls), urls
        assert "cdn" not in r.text.lower() and "fonts.googleapis" not in r.text
        for u in urls:
            assert client.get(u).status_code == 200, u


def test_static_assets_are_served_from_the_package(client: TestClient, tmp_path: Path) -> None:
    for name, marker in (("htmx.min.js", "htmx"), ("json-enc.js", "json-enc"), ("inspector.css", "tiermem"),
                         ("inspector.js", "data-output")):
        r = client.get(f"/ui/static/{name}")
        assert r.status_code == 200 and marker in r.text


def test_listing_loads_nothing_into_redis(client: TestClient, mem: Memory) -> None:
    mem.append("evicted-1", {"role": "user", "content": "an old conversation"}, namespace="acme")
    key = mem.cold.key_of("acme", "evicted-1")
    assert mem.hot is not None and key is not None
    mem.hot.drop(key)  # as after a Redis restart
    r = client.get("/ui/")
    line = re.search(r'<tr data-conversation="evicted-1">.*?</tr>', r.text, re.S)
    assert line and "not resident" in line.group(0)
    assert mem.hot.tier.read(key) is None, "the page read Redis without rebuilding the set"


def test_load_bearing_turns_show_as_kept_without_an_explicit_pin(client: TestClient, mem: Memory) -> None:
    from tiermem.hotlink import pin_state

    r = client.get(f"/ui/c/{CONV}", params={"page": 0})
    key = mem.cold.key_of("acme", CONV)
    for t in mem.cold.turns(key, start=0, end=25):  # type: ignore[arg-type]
        kept = t.pinned_priority is None and pin_state(t)[0]
        assert ("kept (load-bearing)" in row(r.text, t.position)) == kept, t.position
    assert "kept (load-bearing)" in row(r.text, 0)  # "I am allergic to peanuts": an instruction
