"""Metrics for silent memory failures (issue 21): every context the service hands out is
observed into /metrics (budget use and tokens per layer as histograms, query classes,
degraded contexts, load-bearing turns left out, stale warm reads, epochs started); the
inspector's own what-if plans are not; no namespace appears in a label. Each figure is
checked against the plans the API returned, so a wrong count fails. (Before this
change /metrics had none of these series: every test here fails on the old code.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import full_memory
from fastapi.testclient import TestClient
from inspector_helpers import CONV, TOKEN_ACME, TOKEN_METRICS, TOKENS, trip_messages
from prometheus_client.parser import text_string_to_metric_families

from tiermem import Config, Memory
from tiermem.inspector.metrics import load_bearing_left_out, stale_views
from tiermem.planner.plan import SLICES, Plan, PlanItem, ViewStaleness
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

HX = {"HX-Request": "true"}
ACME = {"Authorization": f"Bearer {TOKEN_ACME}"}
METRICS = {"Authorization": f"Bearer {TOKEN_METRICS}"}


def scrape(c: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = c.get("/metrics", headers=METRICS)
    assert r.status_code == 200, r.text
    out = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(m: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return m.get((name, tuple(sorted(labels.items()))), 0.0)


def ask(c: TestClient, query: str, budget: int) -> dict[str, Any]:
    r = c.post(f"/v1/conversations/{CONV}/context", json={"query": query, "budget": budget}, headers=ACME)
    assert r.status_code == 200, r.text
    plan: dict[str, Any] = r.json()["plan"]
    return plan


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("inspector-metrics") / "data", auth_tokens=TOKENS,
                 metrics_tokens=[TOKEN_METRICS], warm_max_turns_behind=1, hot_budget_tokens=400)
    with full_memory(cfg, embedder) as m:
        m.append_many(CONV, trip_messages(), namespace="acme")
        yield m


@pytest.fixture
def client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        yield c


# (query, budget) -- calls whose plans differ in class, budget use and epochs
CALLS = [("what is my budget?", 600), ("what is my budget?", 600), ("which hotel is cheapest?", 900),
         ("what did I just say?", 250), ("summarize the thread", 1200)]


def test_each_context_call_is_observed(client: TestClient) -> None:
    before = scrape(client)
    plans = [ask(client, q, b) for q, b in CALLS]
    after = scrape(client)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("tiermem_context_calls_total") == len(CALLS)
    assert delta("tiermem_context_budget_use_ratio_count") == len(CALLS)
    assert delta("tiermem_context_budget_use_ratio_sum") == pytest.approx(sum(p["tokens"] / p["budget"] for p in plans))
    for layer in SLICES:
        # what each layer cost as sent (Plan.slice_tokens), not its items' sum: that counted a
        # session heading with each retrieved line, past the plan's own tokens
        want = sum(p["slice_sent"].get(layer, 0) for p in plans)
        assert want <= sum(p["tokens"] for p in plans)
        assert delta("tiermem_context_layer_tokens_sum", layer=layer) == pytest.approx(want), layer
        assert delta("tiermem_context_layer_tokens_count", layer=layer) == len(CALLS)
    for cls, n in Counter(p["query_class"] for p in plans).items():
        assert delta("tiermem_context_query_class_total", query_class=cls) == n
    assert delta("tiermem_context_epochs_started_total") == sum(p["cache"]["new_epoch"] for p in plans)
    assert 0 < sum(p["cache"]["new_epoch"] for p in plans) < len(CALLS), "the table has both kinds of call"
    assert delta("tiermem_context_expected_cached_tokens_sum") == sum(
        p["cache"]["expected_cached_tokens"] for p in plans)


def test_no_namespace_in_any_label(client: TestClient) -> None:
    ask(client, "what is my budget?", 600)
    text = client.get("/metrics", headers=METRICS).text
    assert "acme" not in text and CONV not in text


def test_what_if_plans_of_the_inspector_are_not_traffic(client: TestClient) -> None:
    assert client.post("/ui/login", json={"token": TOKEN_ACME}, headers=HX).status_code == 200
    before = value(scrape(client), "tiermem_context_calls_total")
    for budget in (300, 900):
        assert client.post(f"/ui/c/{CONV}/plan", json={"query": "hotel?", "budget": budget}, headers=HX).status_code == 200
    assert value(scrape(client), "tiermem_context_calls_total") == before


def test_load_bearing_turns_left_out_for_lack_of_room(client: TestClient, mem: Memory) -> None:
    # pins that cannot all fit a small budget: the planner leaves some out and says why
    for p in range(3, 19):
        mem.pin(CONV, p, priority=90, namespace="acme")
    try:
        before = value(scrape(client), "tiermem_context_load_bearing_left_out_total")
        plans = [ask(client, "which flight?", b) for b in (200, 400)]
        want = sum(1 for p in plans for it in p["left_out"]
                   if it["slice"] == "pinned" and not it["reason"].startswith("superseded"))
        assert want > 0, "the budgets are small enough to leave pins out"
        assert value(scrape(client), "tiermem_context_load_bearing_left_out_total") - before == want
    finally:
        for p in range(3, 19):
            mem.unpin(CONV, p, namespace="acme")


def test_stale_warm_reads(client: TestClient, mem: Memory) -> None:
    mem.consolidate(CONV, namespace="acme")
    for i in range(3):  # past warm_max_turns_behind=1: the view is over its freshness budget
        mem.append(CONV, {"role": "user", "content": f"one more thing, number {i}"}, namespace="acme")
    before = value(scrape(client), "tiermem_warm_stale_reads_total", kind="rolling")
    plan = ask(client, "what is my budget?", 800)
    assert [v["over_budget"] for v in plan["views"] if v["kind"] == "rolling"] == [True]
    assert value(scrape(client), "tiermem_warm_stale_reads_total", kind="rolling") - before == 1


def test_degraded_contexts(tmp_path: Any, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens=TOKENS, metrics_tokens=[TOKEN_METRICS])
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m, \
            TestClient(create_app(cfg, m, start_scheduler=False), base_url="http://127.0.0.1") as c:
        m.append(CONV, {"role": "user", "content": "hello"}, namespace="acme")
        plan = ask(c, "hello?", 300)
        assert plan["degraded"] is True
        assert value(scrape(c), "tiermem_context_degraded_total") == 1


def _item(slice_: str, reason: str) -> PlanItem:
    return PlanItem(slice_, "c", [1], "cold", "verbatim", 10, 0.5, reason)


# (left-out items, how many count as load-bearing turns left out for lack of room)
LEFT_OUT = [
    ([], 0),  # nothing left out
    ([_item("pinned", "pinned, but higher-priority pins fill the budget")], 1),  # no room for a pin
    ([_item("pinned", "did not fit its share of the budget: load-bearing instruction")], 1),  # its share was full
    ([_item("pinned", "superseded by #9: not presented as current")], 0),  # left out on purpose
    ([_item("retrieved", "did not fit its share of the budget: cosine 0.1")], 0),  # not load-bearing
    ([_item("tail", "dropped to meet the exact budget"), _item("pinned", "pinned, but ...")], 1),  # mixed
]


@pytest.mark.parametrize(("left_out", "count"), LEFT_OUT)
def test_load_bearing_left_out_counts(left_out: list[PlanItem], count: int) -> None:
    plan = Plan("c", "q", "default", "", 100, left_out=left_out)
    assert load_bearing_left_out(plan) == count


def test_stale_views_are_those_over_budget() -> None:
    plan = Plan("c", "q", "default", "", 100, views=[ViewStaleness("rolling", 2, (0, 9), 5, 1.0, True),
                                                     ViewStaleness("constraints", 1, (0, 9), 5, 1.0, False)])
    assert stale_views(plan) == ["rolling"]
