"""The warm-tier guarantees of tests/test_fold_hidden.py and tests/test_view_claims.py on
the PostgreSQL engine: a fold keeps its lines' positions, a fork gets the rolling view
inside its prefix, so neither shows an item popped after the fold; the same version is
never stored twice; a view's lease keeps a second refresher from summarizing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.models import message_text
from tiermem.tiers.warm import Sentence, SummaryView

SECRET = "4411"
FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "My cat knocked a glass over.",
          "I finally finished that novel.", "Traffic was terrible on the bridge.", "I made pancakes today."]
BUDGET_TOKENS = 2000
LEASE_S = 60.0  # seconds: live for the whole test


@pytest.fixture
def pg_memory(tmp_path: Path, pg_url: str, embedder: Embedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=fresh_schema())
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        yield mem


def key(mem: Memory, conv: str) -> str:
    k = mem.cold.key_of("default", conv)
    assert k is not None
    return k


def test_fork_and_active_hide_an_item_popped_after_the_fold(pg_memory: Memory) -> None:
    msgs = [{"role": "user", "content": f"My locker code is {SECRET}."}, {"role": "assistant", "content": "Noted."}]
    for f in FILLER:
        msgs += [{"role": "user", "content": f}, {"role": "assistant", "content": "I see."}]
    pg_memory.append_many("q", msgs)
    pg_memory.catch_up("q")
    pg_memory.consolidate("q")
    cp = pg_memory.cold.latest_checkpoint(key(pg_memory, "q"))
    assert cp is not None and SECRET in cp.summary
    pg_memory.append("q", {"type": RETRACT_TYPE, "position": 0})
    pg_memory.append("q", {"role": "user", "content": "I went for a run."})
    active = pg_memory.active("q")
    assert active.checkpoint is not None and active.checkpoint.position == cp.position
    assert SECRET not in active.checkpoint.summary
    pg_memory.fork("q", pg_memory.cold.last_position(key(pg_memory, "q")), new_id="q-fork")
    q = "What is my locker code?"
    pg_memory.append("q-fork", {"role": "user", "content": q})
    ctx = pg_memory.context("q-fork", q, BUDGET_TOKENS, namespace_recall=False)
    assert [v.kind for v in ctx.plan.views] == ["rolling"]  # the parent's view, copied
    assert SECRET not in "\n".join(message_text(m) for m in ctx.messages)
    assert cp.lines() is not None  # the fold's lines kept their positions


def test_the_same_version_once_and_a_lease_per_view(pg_memory: Memory) -> None:
    pg_memory.append_many("c", [{"role": "user", "content": f"line {i} about trains"} for i in range(4)])
    conv = key(pg_memory, "c")
    view = SummaryView(conv, "rolling", "", 0, 0, 3, (Sentence("line 0 about trains", (0,)),), 0, "extractive", 0.0)
    assert (pg_memory.warm.put(view, fold=True).version, pg_memory.warm.put(view, fold=True).version) == (1, 1)
    assert pg_memory.warm.versions(conv, "rolling") == [1]
    assert pg_memory.cold.claim_view(conv, "constraints", "", "another process", LEASE_S)
    assert not pg_memory.cold.claim_view(conv, "constraints", "", "this process", LEASE_S)
    assert pg_memory.views.refresh(conv, "constraints") is None  # held: not refreshed here
    pg_memory.cold.release_view(conv, "constraints", "", "another process")
    assert pg_memory.cold.claim_view(conv, "constraints", "", "this process", LEASE_S)
    pg_memory.cold.release_view(conv, "constraints", "", "this process")
    assert pg_memory.views.refresh(conv, "constraints") is not None
    assert pg_memory.cold.claim_view(conv, "session", "s", "another process", LEASE_S)
    pg_memory.delete_conversation("c")  # the leases go with the conversation: the live one too
    assert pg_memory.cold.claim_view(conv, "session", "s", "this process", LEASE_S)
