"""The stored-plans page reads its page (tiermem/inspector/data.py, "a page reads its page").

Before, `stored_plans` decoded every stored plan of the conversation to list the turns
that have one, kept every plan of the chosen turn and rendered them all, with one link per
turn: 4,000 turns with a plan took 18 s, and 10,200 plans at one turn (an agent that plans
again without appending) 295 s and a 455 MB page.

Invariants:
- The turn links are a page (PLAN_TURNS_PER_PAGE, newest first, an "older turns" link
  while older ones exist) read from the store without reading any plan
  (`ColdLog.plan_turns`).
- The chosen turn's plans are a page too (PLANS_PER_PAGE, oldest first, a "more plans"
  link while more exist; `ColdLog.plans_at`): a page decodes at most that many plans,
  however many the conversation or the turn holds. Counted by the store's salvage counter
  over plans that cannot be decoded, each row counted once when a read decodes it.
- Following the links visits every turn and every plan exactly once, and the last page has
  no next link. Both engines answer the store methods alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.inspector.data import PLAN_TURNS_PER_PAGE, PLANS_PER_PAGE
from tiermem.inspector.routes import MAX_PLAN_NUMBER
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "planner"
UNREADABLE = "not json"  # a stored plan the store cannot decode: salvaged, counted once per row


def _open(cfg: Config, embedder: FastEmbedder) -> Memory:
    return Memory(cfg, embedder=embedder, hot=False, background_indexing=False)


def _plan_json(mem: Memory) -> str:
    mem.append(CONV, {"role": "user", "content": "My budget is 400 euros."})
    return json.dumps(mem.context(CONV, "what is my budget?", 500, record=False).plan.to_dict())


def _key(mem: Memory) -> str:
    key = mem.cold.key_of("default", CONV)
    assert key is not None
    return key


def _grow(mem: Memory, turns: int, per_turn: int, plan: str) -> list[int]:
    """`turns` more turns, each followed by `per_turn` stored plans; their last positions."""
    out = []
    for i in range(turns):
        [pos] = mem.append_many(CONV, [{"role": "assistant", "content": f"Step {i} done."}])
        key = _key(mem)
        for _ in range(per_turn):
            mem.cold.store_plan(key, plan)
        out.append(pos)
    return out


@pytest.fixture
def client(tmp_path: Path, embedder: FastEmbedder) -> Iterator[tuple[TestClient, Memory]]:
    cfg = Config(data_dir=tmp_path / "data", store_plans=True)
    with _open(cfg, embedder) as mem:
        app = create_app(cfg, mem, auth=False, start_scheduler=False)
        with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as c:
            yield c, mem


def _links(html: str, cls: str) -> list[str]:
    return [m.replace("&amp;", "&") for m in re.findall(rf'<a href="([^"]+)" rel="next" class="{cls}">', html)]


def _turns(html: str) -> list[int]:
    return [int(t) for t in re.findall(r">turn (\d+)</a>", html)]


def test_turn_links_are_paged_and_reach_every_turn(client: tuple[TestClient, Memory]) -> None:
    c, mem = client
    # two full pages of links and a short third one
    want = _grow(mem, 2 * PLAN_TURNS_PER_PAGE + 7, 1, _plan_json(mem))
    seen: list[int] = []
    url: str | None = f"/ui/c/{CONV}/plans"
    pages = 0
    while url is not None:
        r = c.get(url)
        assert r.status_code == 200, r.text
        got = _turns(r.text)
        assert 0 < len(got) <= PLAN_TURNS_PER_PAGE and got == sorted(got, reverse=True)
        # the page shows the newest turn of its links, and only its plans
        assert r.text.count('class="stored-plan"') == 1
        assert f"Plans made at turn {got[0]}" in r.text
        seen += got
        pages += 1
        nxt = _links(r.text, "older-turns")
        url = nxt[0] if nxt else None
    assert pages == 3
    assert seen == sorted(want, reverse=True)  # each turn once, newest first


def test_a_turn_with_many_plans_is_paged(client: tuple[TestClient, Memory]) -> None:
    c, mem = client
    [turn] = _grow(mem, 1, 2 * PLANS_PER_PAGE + 3, _plan_json(mem))
    ids: list[int] = []
    url: str | None = f"/ui/c/{CONV}/plans?turn={turn}"
    sizes = []
    while url is not None:
        r = c.get(url)
        assert r.status_code == 200, r.text
        shown = [int(i) for i in re.findall(r"<h3>Plan #(\d+) of turn", r.text)]
        sizes.append(len(shown))
        ids += shown
        nxt = _links(r.text, "more-plans")
        url = nxt[0] if nxt else None
    assert sizes == [PLANS_PER_PAGE, PLANS_PER_PAGE, 3]  # the last page has no next link
    assert ids == list(range(1, 2 * PLANS_PER_PAGE + 4))  # each plan once, oldest first, numbered from 1


# (turns, plans stored at each): every plan unreadable, so each one a page decodes is
# counted by the salvage counter
CASES = [
    (3 * PLAN_TURNS_PER_PAGE, 2),  # many turns with a plan or two each (an agent planning every turn)
    (1, 30 * PLANS_PER_PAGE),  # one turn planned again and again without an append
]


@pytest.mark.parametrize(("turns", "per_turn"), CASES)
def test_a_page_decodes_a_bounded_number_of_plans(client: tuple[TestClient, Memory], turns: int,
                                                    per_turn: int) -> None:
    c, mem = client
    _grow(mem, turns, per_turn, UNREADABLE)
    before = mem.stats(namespace="default")["cold"]["salvaged_rows"]
    r = c.get(f"/ui/c/{CONV}/plans")
    assert r.status_code == 200, r.text
    decoded = mem.stats(namespace="default")["cold"]["salvaged_rows"] - before
    assert 0 < decoded <= PLANS_PER_PAGE, f"the page decoded {decoded} of {turns * per_turn} stored plans"
    assert len(_turns(r.text)) <= PLAN_TURNS_PER_PAGE
    assert "No readable plans" in r.text


def test_the_store_pages_turns_and_plans_alike_on_both_engines(engine_config: Config,
                                                                embedder: FastEmbedder) -> None:
    with _open(engine_config, embedder) as mem:
        plan = _plan_json(mem)
        positions = _grow(mem, 5, 3, plan)
        key = _key(mem)
        mem.cold.store_plan(key, UNREADABLE)  # a fourth at the last turn, salvaged where read
        newest = positions[::-1]
        assert mem.cold.plan_turns(key, limit=2) == newest[:2]
        assert mem.cold.plan_turns(key, before=newest[1], limit=10) == newest[2:]
        assert mem.cold.plan_turns(key, before=newest[-1], limit=10) == []
        first, nxt = mem.cold.plans_at(key, newest[0], limit=2)
        # numbered among the turn's plans from 1, the cursor the last one's number
        assert [p["number"] for p in first] == [1, 2] and nxt == 2
        assert all(p["last_position"] == newest[0] and isinstance(p["plan"], dict) for p in first)
        rest, end = mem.cold.plans_at(key, newest[0], after=nxt, limit=2)
        # the third readable plan and the unreadable one read: this page reaches the end
        assert [p["number"] for p in rest] == [3] and end is None
        assert mem.cold.plans_at(key, newest[0], after=MAX_PLAN_NUMBER, limit=2) == ([], None)
        assert mem.cold.plans_at(key, newest[0] + 1000, limit=2) == ([], None)
        # the same plans as the unpaged read
        every = [p for p in mem.cold.plans(key) if p["last_position"] == newest[1]]
        paged, _ = mem.cold.plans_at(key, newest[1], limit=10)
        assert [{k: v for k, v in p.items() if k != "number"} for p in paged] == every
