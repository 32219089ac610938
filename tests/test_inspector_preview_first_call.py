"""The inspector's what-if shows what the agent's next recorded call gets
(`Memory.context(preview=True)`): planned as a recorded call is, storing nothing. On a
conversation with no epoch kept, the first recorded call leaves the new epoch's reserve
(4b96d35); the inspector planned with `record=False`, a fresh context that no call
extends, so it showed 999 tokens of 1,000 where the agent then got 846 (other turns too).

`record=False` itself is unchanged (the recall evals' fresh contexts, e.g. `eval locomo`,
keep their figures): tests/test_epoch_first_recorded.py holds it.

Real SQLite, the real model (its vectors shared across the session), the real app."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from test_epoch_first_recorded import FIRST_Q, NEXT_Q, _history, _next_turn

from tiermem import Config, Memory
from tiermem.planner.plan import Context
from tiermem.service import create_app
from tiermem.tiers.embed import Embedder

pytestmark = pytest.mark.usefixtures("shared_vectors")

TOKEN = "tok-acme-inspector-preview-0123456789"
HX = {"HX-Request": "true"}
NS = "acme"
CONV = "c"
BUDGET = 1000  # tokens: the reviewer's budget (the what-if took 999, the agent's call 846)


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN: NS}, store_plans=True)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        _history(m.namespaced(NS))  # a NamespacedMemory appends as Memory does
        yield m


@pytest.fixture
def client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        assert c.post("/ui/login", json={"token": TOKEN}, headers=HX).status_code == 200
        yield c


def _shown(ctx: Context) -> tuple[int, list[tuple[str, str]]]:
    """A plan as the inspector's fragment shows it: its tokens and each item's slice and
    positions (the fragment groups them by layer: compared as a sorted list)."""
    return ctx.tokens, sorted((it.slice, " ".join(map(str, it.positions))) for it in ctx.plan.items)


def _inspected(client: TestClient, query: str) -> tuple[int, list[tuple[str, str]]]:
    r = client.post(f"/ui/c/{CONV}/plan", json={"query": query, "budget": BUDGET, "timezone": ""}, headers=HX)
    assert r.status_code == 200 and 'role="alert"' not in r.text, r.text
    tokens = re.search(r'<section id="plan" data-tokens="(\d+)"', r.text)
    assert tokens is not None, r.text
    items = re.findall(r'<tr class="item" data-slice="([^"]*)" data-positions="([^"]*)"', r.text)
    return int(tokens.group(1)), sorted(items)


def _stored_plans(mem: Memory) -> int:
    return len(mem.cold.plans(mem.cold.key_of(NS, CONV) or ""))


def test_the_inspector_shows_the_agents_first_call_then_its_next(client: TestClient, mem: Memory) -> None:
    # first call of the conversation, no epoch kept: fails before (999 tokens shown, 846 got)
    shown = _inspected(client, FIRST_Q)
    assert _stored_plans(mem) == 0  # the what-if stored nothing ...
    first = mem.context(CONV, FIRST_Q, budget=BUDGET, namespace=NS)
    assert "no previous context" in first.plan.cache.reason  # ... nor kept an epoch the agent's call extends
    assert shown == _shown(first)
    # the next turn: the agent's call extends the first's epoch, and the inspector shows that
    _next_turn(mem.namespaced(NS))
    shown = _inspected(client, NEXT_Q)
    second = mem.context(CONV, NEXT_Q, budget=BUDGET, namespace=NS)
    assert not second.plan.cache.new_epoch, second.plan.cache.reason
    assert shown == _shown(second)
    assert _stored_plans(mem) == 2  # the agent's two calls only


def test_a_preview_is_the_recorded_call_and_keeps_nothing(mem: Memory) -> None:
    preview = mem.context(CONV, FIRST_Q, budget=BUDGET, namespace=NS, preview=True)
    # a fresh context (record=False) takes the whole room; a preview leaves the reserve
    fresh = mem.context(CONV, FIRST_Q, budget=BUDGET, namespace=NS, record=False)
    assert preview.tokens < fresh.tokens
    first = mem.context(CONV, FIRST_Q, budget=BUDGET, namespace=NS)
    assert (preview.messages, preview.tokens, preview.plan.cache.reason) == (
        first.messages, first.tokens, first.plan.cache.reason)
    # preview=True stores nothing whatever `record` says (its default True included)
    mem.context(CONV, FIRST_Q, budget=BUDGET, namespace=NS, preview=True, record=True)
    assert _stored_plans(mem) == 1
    again = mem.context(CONV, FIRST_Q, budget=BUDGET, namespace=NS)
    assert (again.plan.cache.epoch, again.plan.cache.epoch_calls) == (first.plan.cache.epoch, 2)
