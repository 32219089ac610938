"""One `context()` call reads the log's pin version once (planner.statements
`StatementView.version`): the pin candidates (planner.candidates `pin_set`) and the
statement record key what they keep by that one read. Before, each read its own: on
PostgreSQL one more round trip on every call, and with pins landing from another process
the two caches of one call were keyed by two versions (44 of 49 calls on SQLite, 32 of
32 on PostgreSQL, in a probe where a second process pinned in a loop), so the next call
re-read the pin candidates for nothing.

Real stores (a SQLite file; PostgreSQL through the session's `pg_url`), the hot tier on
tiermem's own Redis; each statement the store sends is recorded where it is sent (SQLite:
the connection's trace callback; PostgreSQL: the pooled connection, the real one under
it), then counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_server import fresh_schema
from store_trace import recording

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "c"
TURNS = 40
PINNED = 7  # a caller's pin among them: the pinned block has something to show
PRIORITY = 90
BUDGET = 2_000  # tokens: room for the pinned block, the tail and retrieved turns
QUERY = "which hotel did I book in Porto?"


def version_reads(sent: list[str]) -> int:
    """Statements that read the pin version alone (not riding on a read of turns)."""
    return sum(1 for s in sent if "FROM pin_versions" in s and "turns" not in s)


@pytest.fixture(params=["sqlite", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path, embedder: FastEmbedder) -> Iterator[tuple[Memory, str]]:
    engine = request.param
    extra: dict[str, Any] = {}
    if engine == "postgres":
        extra = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    cfg = Config(data_dir=tmp_path / "data", **extra)
    with Memory(cfg, embedder=embedder, background_indexing=False) as m:
        m.append_many(CONV, [{"role": "user" if i % 2 == 0 else "assistant",
                              "content": f"turn {i}: the hotel in Porto is number {i}, the flight LH{i}"}
                             for i in range(TURNS)])
        m.pin(CONV, PINNED, priority=PRIORITY)
        m.context(CONV, QUERY, budget=BUDGET)  # caches filled: the steady state
        yield m, engine


# (what happens before the call, why)
BEFORE = [
    # nothing moved: both caches are current, the version is only checked
    ("nothing", "the steady state: one check of the version"),
    # a pin moved the version: both caches are read again, under the one version
    ("pin", "both caches re-read, keyed by one read"),
    # an unpin, as another caller's: the same
    ("unpin", "both caches re-read, keyed by one read"),
]


@pytest.mark.parametrize(("before", "why"), BEFORE, ids=[b[0] for b in BEFORE])
def test_one_version_read_per_context(mem: tuple[Memory, str], before: str, why: str) -> None:
    m, engine = mem
    if before == "pin":
        m.pin(CONV, PINNED + 2, priority=PRIORITY)
    elif before == "unpin":
        m.unpin(CONV, PINNED)
    with recording(m, engine) as sent:
        ctx = m.context(CONV, QUERY, budget=BUDGET)
    assert version_reads(sent) == 1, (why, [s for s in sent if "pin_versions" in s])
    # what the call showed follows the log's pins: the one read was not a stale one
    pinned = {p for it in ctx.plan.items if it.slice == "pinned" for p in it.positions}
    if before == "pin":
        assert PINNED + 2 in {p for it in ctx.plan.items for p in it.positions}
    if before == "unpin":
        assert PINNED not in pinned

