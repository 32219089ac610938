"""The stored-plans page numbers a tenant's plans by its own plans only (design invariant 10).

Before, /ui/c/{cid}/plans headed each plan `Plan #{row id}` and paged a turn's plans with
`after={row id}`: the id of the `plans` table every namespace shares, so the gap between a
tenant's consecutive plans was the number of plans other tenants stored in between (a
probe: 7 context calls of one tenant moved the other's next plan from #2 to #9).

Invariants:
- A plan's number is its place among its turn's plans, from 1 (`ColdLog.plans_at`'s
  "number"), and the "more plans" cursor (`after_plan`) is the number of the last plan
  shown: neither changes with what another namespace stores, on either engine.
- An old link's `after` (a row id) is ignored: the turn's first plans, never a 5xx, and
  never a global id read as a plan's number. `after_plan` out of range is a 422 naming it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.inspector.data import PLANS_PER_PAGE
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

HX = {"HX-Request": "true"}
MAX_PLAN_NUMBER = 2**63 - 1  # the largest cursor: an OFFSET both engines take (tiermem.inspector.routes)
CONV = "probe"
EXTRA = 2  # plans past the first page, so the turn has a "more plans" cursor
# two pairs of tenants in one store, run one after the other: (watched, other, the
# other's context calls before each of the watched one's)
PAIRS = [
    ("evil", "acme", 0),  # nobody else plans: the row ids happen to be 1, 2, ...
    ("evil2", "acme2", 3),  # the other tenant plans 3 times between each two of the watched one's
]
TOKENS = {f"tok-{ns}-0123456789abcdef": ns for ns, _, _ in PAIRS} | {
    f"tok-{other}-0123456789abcdef": other for _, other, _ in PAIRS}


def _token(ns: str) -> str:
    return f"tok-{ns}-0123456789abcdef"


@pytest.fixture
def mem(engine_config: Config, embedder: FastEmbedder) -> Iterator[Memory]:
    engine_config.auth_tokens = TOKENS
    with Memory(engine_config, embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


def _numbers(html: str) -> list[int]:
    # the heading's number, whatever follows it (before: "Plan #17, made ...")
    return [int(n) for n in re.findall(r"<h3>Plan #(\d+)\b", html)]


def _more(html: str) -> list[str]:
    return [m.replace("&amp;", "&") for m in re.findall(r'<a href="([^"]+)" rel="next" class="more-plans">', html)]


def _walk(c: TestClient, turn: int) -> tuple[list[list[int]], list[int]]:
    """Every page of `turn`'s plans by its "more plans" links: each page's plan numbers
    and each link's cursor (the value of its after=/after_plan=)."""
    pages: list[list[int]] = []
    cursors: list[int] = []
    url: str | None = f"/ui/c/{CONV}/plans?turn={turn}"
    while url is not None:
        r = c.get(url)
        assert r.status_code == 200, r.text
        pages.append(_numbers(r.text))
        nxt = _more(r.text)
        url = nxt[0] if nxt else None
        if url is not None:
            cursors.append(int(re.findall(r"[?&]after\w*=(\d+)", url)[0]))
    return pages, cursors


def test_a_tenants_plan_numbers_and_cursors_do_not_change_with_another_tenants_plans(mem: Memory) -> None:
    seen = []
    for ns, other, calls in PAIRS:
        [turn] = mem.append_many(CONV, [{"role": "user", "content": "My budget is 400 euros."}], namespace=ns)
        mem.append(CONV, {"role": "user", "content": "My locker code is 4711."}, namespace=other)
        for _ in range(PLANS_PER_PAGE + EXTRA):
            for _ in range(calls):
                mem.context(CONV, "what is my locker code?", 500, namespace=other)
            mem.context(CONV, "what is my budget?", 500, namespace=ns)
        with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
            r = c.post("/ui/login", json={"token": _token(ns)}, headers=HX)
            assert r.status_code == 200, r.text
            seen.append(_walk(c, turn))
    want = ([list(range(1, PLANS_PER_PAGE + 1)), list(range(PLANS_PER_PAGE + 1, PLANS_PER_PAGE + EXTRA + 1))],
            [PLANS_PER_PAGE])
    # the tenant that shared the store with a busy one sees what the first saw
    assert seen == [want, want], f"visible plan numbers and cursors per pair {PAIRS}: {seen}"


# (query, status, the plan numbers shown; None: the answer names the parameter) -- the
# turn holds PLANS_PER_PAGE + EXTRA plans
CURSORS = [
    ("after=123456", 200, list(range(1, PLANS_PER_PAGE + 1))),  # an old bookmark's row id: ignored, the first page
    (f"after={2**70}", 200, list(range(1, PLANS_PER_PAGE + 1))),  # past any row id: ignored too, no 500
    ("after=-5", 200, list(range(1, PLANS_PER_PAGE + 1))),  # an old cursor below any row id: ignored
    ("after_plan=5", 200, list(range(6, PLANS_PER_PAGE + EXTRA + 1))),  # the rest after the turn's fifth
    (f"after_plan={PLANS_PER_PAGE + EXTRA}", 200, []),  # after the turn's last: none, the page says so
    (f"after_plan={MAX_PLAN_NUMBER}", 200, []),  # the largest cursor either engine takes
    (f"after_plan={MAX_PLAN_NUMBER + 1}", 422, None),  # past it: the parameter named
    ("after_plan=-1", 422, None),  # no plan comes before the first
]


@pytest.mark.parametrize(("query", "status", "shown"), CURSORS)
def test_plan_cursors_old_and_new(tmp_path: Path, embedder: FastEmbedder, query: str, status: int,
                                  shown: list[int] | None) -> None:
    cfg = Config(data_dir=tmp_path / "data", store_plans=True, auth_tokens=TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        [turn] = m.append_many(CONV, [{"role": "user", "content": "My budget is 400 euros."}], namespace="evil")
        key = m.cold.key_of("evil", CONV)
        assert key is not None
        plan = m.context(CONV, "what is my budget?", 500, namespace="evil", record=False).plan.to_dict()
        for _ in range(PLANS_PER_PAGE + EXTRA):
            m.cold.store_plan(key, json.dumps(plan))
        with TestClient(create_app(cfg, m, start_scheduler=False), base_url="http://127.0.0.1") as c:
            assert c.post("/ui/login", json={"token": _token("evil")}, headers=HX).status_code == 200
            r = c.get(f"/ui/c/{CONV}/plans?turn={turn}&{query}")
    assert r.status_code == status, r.text
    if shown is None:
        assert "after_plan" in r.text
    else:
        assert _numbers(r.text) == shown
        if not shown:
            assert "No readable plans after this point" in r.text
