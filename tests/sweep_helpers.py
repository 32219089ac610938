"""The store a busy-store sweep test fills, and what it reads back, shared by
test_consolidate_sweep_busy, test_sweep_table_lock and test_scheduler_row_lock: a few
conversations, every view of each over its freshness budget, the one locked in a test the
most behind (so first in every sweep's order).

Imported explicitly by the test modules (the lead owns conftest.py)."""

from __future__ import annotations

from pathlib import Path

from tiermem import Config, Memory
from tiermem.consolidation.scheduler import RefreshFailure, SkippedView
from tiermem.memory import DEFAULT_NAMESPACE
from tiermem.tiers.embed_onnx import FastEmbedder

MAX_TURNS_BEHIND = 2  # every conversation below is past it
FIRST = "big"  # the most behind: first in every sweep
# (conversation, turns): the first one in the sweep's order, the others behind too
CONVERSATIONS = ((FIRST, 12), ("small1", 5), ("small2", 5), ("small3", 5))
VIEW_KINDS = ("rolling", "constraints")  # the views a conversation without sessions has
ALL_VIEWS = len(CONVERSATIONS) * len(VIEW_KINDS)
MAX_VIEWS_PER_RUN = 50  # one sweep picks them all
# the lock another session holds on a conversation's row (`SELECT ... <clause>`), each case
# of a row-lock test
ROW_LOCK_CLAUSES = [
    "FOR UPDATE",  # an append's or an erasure's lock: the refresh's lease row waits on it
    "FOR NO KEY UPDATE",  # an UPDATE of the row: the lease is had, the summary's write waits
]


def sweep_config(tmp_path: Path, busy_timeout_ms: int, url: str | None = None, schema: str | None = None) -> Config:
    """The store of a sweep test: SQLite under `tmp_path`, or the PostgreSQL `url`'s `schema`;
    every view behind, one sweep picking them all, each lock wait `busy_timeout_ms`."""
    store = {} if url is None else {"cold_url": url, "cold_schema": schema}
    return Config(data_dir=tmp_path / "data", busy_timeout_ms=busy_timeout_ms, warm_max_turns_behind=MAX_TURNS_BEHIND,
                  scheduler_max_views_per_run=MAX_VIEWS_PER_RUN, **store)


def opened(cfg: Config, embedder: FastEmbedder) -> Memory:
    return Memory(cfg, embedder=embedder, hot=False, background_indexing=False)


def fill(m: Memory, conversations: tuple[tuple[str, int], ...] = CONVERSATIONS) -> None:
    """Each of `conversations` (name, turns) appended: every view of each behind its log."""
    for conv, n in conversations:
        m.append_many(conv, [{"role": "user", "content": f"{conv} line {i}: the invoice goes to Porto"}
                             for i in range(n)])


def key_of(m: Memory, conv: str) -> str:
    """The conversation's key: what the views, failures and skipped views name."""
    key = m.cold.key_of(DEFAULT_NAMESPACE, conv)
    assert key is not None, conv
    return key


def covered(m: Memory, conv: str) -> list[bool]:
    """Whether each of the conversation's views exists and covers its log."""
    key = key_of(m, conv)
    last = m.cold.last_position(key)
    out = []
    for kind in VIEW_KINDS:
        view = m.views.warm.latest(key, kind, "")
        out.append(view is not None and view.end_position == last)
    return out


def coverage(m: Memory) -> dict[str, list[bool]]:
    return {conv: covered(m, conv) for conv, _n in CONVERSATIONS}


def failed(m: Memory, failures: tuple[RefreshFailure, ...]) -> list[tuple[str, str]]:
    """(conversation name, exception type) of each failure, in order."""
    names = {key_of(m, conv): conv for conv, _n in CONVERSATIONS}
    return [(names[f.conversation], type(f.error).__name__) for f in failures]


def skipped(m: Memory, views: tuple[SkippedView, ...]) -> dict[str, list[str]]:
    """conversation name -> the reasons of its skipped views."""
    names = {key_of(m, conv): conv for conv, _n in CONVERSATIONS}
    out: dict[str, list[str]] = {}
    for v in views:
        out.setdefault(names[v.conversation], []).append(v.reason)
    return out
