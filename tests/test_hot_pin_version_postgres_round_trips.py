"""The hot tier's pin-version check (tiers.hot, pin versions) costs PostgreSQL no round
trip of its own: a hot read and an admit read the log's version in the statement that
reads their turns (tiers.store `turns_and_pin_version`), where 7674097 sent one more
primary-key read per read and per append. What the check decides is unchanged: a pin the
set missed still has the next read rebuild it. Real PostgreSQL (embedded), real Redis
(a server of the test's own); each statement the store sends is recorded at its pooled
connection, the real one under it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hot_fixtures import own_redis
from pg_server import fresh_schema
from store_trace import recording

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "c"
TURNS = 60
PRIORITY = 90
# a small budget, so the middle of the conversation is evicted and a pin changes members
SMALL = {"hot_budget_tokens": 300, "head_protect": 1, "tail_protect": 2}


@pytest.fixture
def pair(tmp_path: Path, embedder: FastEmbedder, pg_url: str) -> Iterator[tuple[Memory, Memory]]:
    """(a, b): two processes on one PostgreSQL schema and one Redis; b writes the log only
    (no hot tier), so a's set misses b's writes until a's hot link reads or admits them."""
    with own_redis(tmp_path / "redis") as srv:
        cfg = Config(data_dir=tmp_path / "a", redis_url=srv.url, cold_url=pg_url, cold_schema=fresh_schema(),
                     **SMALL)
        with Memory(cfg, embedder=embedder, background_indexing=False) as a, \
                Memory(cfg.model_copy(update={"data_dir": tmp_path / "b"}), embedder=embedder, hot=False,
                       background_indexing=False) as b:
            a.append_many(CONV, [{"role": "user", "content": f"turn {i} about the weather in Porto"}
                                 for i in range(TURNS)])
            assert a.hot is not None
            a.hot.read(a._key(CONV, None)[2])  # caught up: the steady state
            yield a, b


# (what the other process does first, the hot link's call, the statements that call sends
# to PostgreSQL, each named)
ROUND_TRIPS = [
    # a context's hot read of a caught-up set: the generation (conversation), the turns
    # from the set's last one with the pin version (was a third: the version alone)
    ("nothing", "read", ["conversations", "turns + version"]),
    # a hot read of a set another process's append left behind: the same two, then the
    # new turn's body to admit it (was a fourth: the version alone, for the admit)
    ("append", "read", ["conversations", "turns + version", "messages"]),
    # an append's admit: the generation, the new turns with the version, their bodies
    # (was a fourth: the version alone)
    ("append", "on_append", ["conversations", "turns + version", "messages"]),
]


def _kind(sql: str) -> str:
    if "FROM pin_versions" in sql and "FROM turns" not in sql and "JOIN turns" not in sql:
        return "version"  # the version alone: the round trip this is about
    if "pin_versions" in sql and "turns t" in sql:
        return "turns + version"
    if "FROM conversations" in sql:
        return "conversations"
    if "FROM messages" in sql or "JOIN messages" in sql:
        return "messages"
    return sql


@pytest.mark.parametrize(("before", "call", "statements"), ROUND_TRIPS,
                         ids=[f"{r[0]}-{r[1]}" for r in ROUND_TRIPS])
def test_the_pin_version_rides_on_the_turns_read(pair: tuple[Memory, Memory], before: str, call: str,
                                                 statements: list[str]) -> None:
    a, b = pair
    assert a.hot is not None
    key = a._key(CONV, None)[2]
    rebuilds = a.hot.rebuilds
    positions = [b.append(CONV, {"role": "user", "content": "and one more about Lisbon"})] if before == "append" else []
    with recording(a, "postgres") as sent:
        if call == "read":
            got = a.hot.read(key)
            assert not got.degraded and not got.rebuilt
        else:
            assert a.hot.on_append(key, positions) is not None
    assert [_kind(s) for s in sent] == statements
    assert a.hot.rebuilds == rebuilds  # nothing was missed: nothing rebuilt
    assert a.hot.last_error is None and a.hot.healthy


def test_a_pin_the_set_missed_is_still_found_by_the_next_read(pair: tuple[Memory, Memory]) -> None:
    """b pins an evicted turn in the log only (as a pinning process killed before its hot
    script): a's next read sees the log's version past its set's and rebuilds, and the
    turn is pinned in the set. Passes before and after: the decision is the same."""
    a, b = pair
    assert a.hot is not None
    key = a._key(CONV, None)[2]
    target = TURNS // 2
    hs = a.hot.tier.read(key)
    assert hs is not None and target not in {t.position for t in hs.turns}  # the premise: evicted
    rebuilds = a.hot.rebuilds
    b.pin(CONV, target, priority=PRIORITY)
    got = a.hot.read(key)
    assert got.rebuilt and a.hot.rebuilds == rebuilds + 1
    assert got.hot is not None and target in {t.position for t in got.hot.turns if t.pinned}
    assert not a.hot.read(key).rebuilt  # caught up: the next read rebuilds nothing
