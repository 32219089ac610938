"""The inspector's what-if shows what the agent's next recorded call gets
(`Memory.context(preview=True)`): planned as a recorded call is (extending the epoch the
agent's calls keep, leaving a new epoch's reserve), storing nothing. The inspector planned
with `record=False`, a fresh context that no call extends.

`record=False` itself is unchanged (the recall evals' fresh contexts, e.g. `eval locomo`,
keep their figures).

Real SQLite, the real model (its vectors shared across the session), the real app."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.planner.plan import Context
from tiermem.service import create_app
from tiermem.tiers.embed import Embedder

pytestmark = pytest.mark.usefixtures("shared_vectors")

T0 = 1_765_000_000.0  # the first turn's created_at; turns a second apart (one cache lifetime)
EXCHANGES = 30  # user/assistant pairs stored before the first context call
TOPICS = ["the night train to Vienna", "my sister's wedding in June", "the new espresso machine",
          "the marathon training plan", "the broken bike gear", "our trip to Lisbon", "the garden shed roof",
          "a violin lesson on Tuesday", "the quarterly tax filing", "the dog's vet appointment"]
FIRST_Q = "What did we decide about the night train to Vienna?"
NEXT_Q = "And the espresso machine?"


def _history(mem: Any) -> None:
    msgs: list[dict[str, object]] = []
    for i in range(EXCHANGES):
        topic = TOPICS[i % len(TOPICS)]
        msgs.append({"role": "user", "content": f"Can you remind me what we decided about {topic}? I think it "
                     f"was around item {i} and involved {i + 2} people.", "created_at": T0 + 2 * i})
        msgs.append({"role": "assistant", "content": f"About {topic}: we agreed on option {i % 3 + 1}, to revisit "
                     f"in {i + 1} days, and to ask {i + 2} people before deciding.", "created_at": T0 + 2 * i + 1})
    mem.append_many("c", msgs)
    mem.append("c", {"role": "user", "content": FIRST_Q, "created_at": T0 + 2 * EXCHANGES})


def _next_turn(mem: Any) -> None:
    mem.append("c", {"role": "assistant", "content": "Option 1, to revisit in 1 day.",
                     "created_at": T0 + 2 * EXCHANGES + 1})
    mem.append("c", {"role": "user", "content": NEXT_Q, "created_at": T0 + 2 * EXCHANGES + 2})


TOKEN = "tok-acme-inspector-preview-0123456789"
HX = {"HX-Request": "true"}
NS = "acme"
CONV = "c"
BUDGET = 1000  # tokens: the reviewer's budget


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
    # first call of the conversation, no epoch kept
    shown = _inspected(client, FIRST_Q)
    assert _stored_plans(mem) == 0  # the what-if stored nothing ...
    first = mem.context(CONV, FIRST_Q, budget=BUDGET, namespace=NS)
    assert "no previous context" in first.plan.cache.reason  # ... nor kept an epoch the agent's call extends
    assert shown == _shown(first)
    # the next turn: the inspector shows what the agent's call then gets, epoch and all
    _next_turn(mem.namespaced(NS))
    shown = _inspected(client, NEXT_Q)
    second = mem.context(CONV, NEXT_Q, budget=BUDGET, namespace=NS)
    assert shown == _shown(second)
    assert _stored_plans(mem) == 2  # the agent's two calls only


def test_a_preview_is_the_recorded_call_and_keeps_nothing(mem: Memory) -> None:
    preview = mem.context(CONV, FIRST_Q, budget=BUDGET, namespace=NS, preview=True)
    first = mem.context(CONV, FIRST_Q, budget=BUDGET, namespace=NS)
    assert (preview.messages, preview.tokens, preview.plan.cache.reason) == (
        first.messages, first.tokens, first.plan.cache.reason)
    # preview=True stores nothing whatever `record` says (its default True included)
    mem.context(CONV, FIRST_Q, budget=BUDGET, namespace=NS, preview=True, record=True)
    assert _stored_plans(mem) == 1
    again = mem.context(CONV, FIRST_Q, budget=BUDGET, namespace=NS)
    assert (again.plan.cache.epoch, again.plan.cache.epoch_calls) == (first.plan.cache.epoch, 2)
