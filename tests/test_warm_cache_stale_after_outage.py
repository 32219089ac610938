"""The warm tier's Redis cache never serves a view older (or other) than the store's
newest: a cache hit is checked against the view's newest stored row (version and time),
read in the statement that already reads the log's turn for the entry's timeline check
(tiers.store `turn_and_newest_view`), and `put` refusing the very version again raises a
lagging cache entry.

On the code before, a refresh whose cache write failed (Redis down) or that Redis lost
(it came back from older data: a restart from its snapshot, a failover to a replica
behind) left the older version cached, and every read served it for up to CACHE_TTL_S:
the plan said `view rolling v1` while the store held v2, and consolidating again did not
repair it (`put` refused the duplicate without touching the cache). A restored store
(a newer cached version it no longer holds, or that number made again) was served too.

Real parts: a redis-server of the test's own (tiermem's embedded server, reached by URL;
SAVE, SIGKILL and a restart that loads its snapshot), a real SQLite store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from hot_fixtures import kill_hard, own_redis, until_healthy

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.redis_server import EmbeddedRedis
from tiermem.tiers.warm import Sentence, SummaryView, WarmStore

CONV = "trip"
FIRST = ["My budget is 2000 EUR for the trip.", "I like the tile museum."]
LATER = "Also book the Alfama walking tour on Friday."
BUDGET_TOKENS = 400


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with own_redis(tmp_path / "redis") as srv:
        yield srv


@pytest.fixture
def admin(server: EmbeddedRedis) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(server.url, decode_responses=True)
    yield c
    c.close()


@pytest.fixture
def mem(tmp_path: Path, server: EmbeddedRedis, embedder: Embedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data", redis_url=server.url), embedder=embedder,
                background_indexing=False) as m:
        yield m


def _kill(server: EmbeddedRedis) -> None:
    """SIGKILL the server. `server.ensure()` then starts it again in its directory: it
    loads the snapshot the test SAVEd, so whatever was written after that is gone."""
    pid = server.pid
    assert pid is not None
    kill_hard(pid)


# (case, whether the v2 refresh runs while Redis is down)
OUTAGES = [
    # Redis killed; the refresh stores v2 and its cache write fails; Redis comes back with v1
    ("refresh while down", True),
    # the v2 cache write lands, then Redis comes back from a snapshot taken at v1 (as a
    # failover to a replica behind): no error anywhere, the cache simply holds v1
    ("cache lost the write", False),
]


@pytest.mark.parametrize(("case", "down"), OUTAGES, ids=[c for c, _ in OUTAGES])
def test_redis_back_with_an_older_view_serves_the_stores(mem: Memory, server: EmbeddedRedis,
                                                         admin: redis.Redis, case: str, down: bool) -> None:
    for text in FIRST:
        mem.append(CONV, {"role": "user", "content": text})
    mem.consolidate(CONV)
    key = mem._key(CONV, None)[2]
    ck = mem.warm.cache_key(key, "rolling")
    assert mem.warm.latest(key, "rolling") is not None
    assert admin.hget(ck, "v") == "1"
    admin.save()  # the data Redis will come back with
    errors = mem.warm.cache_errors
    if down:
        _kill(server)
    mem.append(CONV, {"role": "user", "content": LATER})
    mem.consolidate(CONV)
    assert mem.warm.versions(key, "rolling") == [1, 2]
    if down:
        assert mem.warm.cache_errors > errors  # the v2 write did not reach Redis
    else:
        assert admin.hget(ck, "v") == "2" and mem.warm.cache_errors == errors
        _kill(server)
    server.ensure()
    assert mem.hot is not None
    until_healthy(mem, lambda m: m.hot.read(key))  # the warm cache is read again
    assert mem.hot.healthy
    assert admin.hget(ck, "v") == "1"  # the stale entry is there to be served

    view = mem.warm.latest(key, "rolling")
    assert view is not None and view.version == 2 and LATER in view.text()
    assert admin.hget(ck, "v") == "2"  # the miss filled the store's version
    plan = mem.context(CONV, "what tour did I book?", budget=BUDGET_TOKENS).plan.explain()
    rolling = [ln.strip() for ln in plan.splitlines() if "view rolling" in ln]
    assert rolling and all(ln.startswith("view rolling v2 ") for ln in rolling), rolling


# ---------------------------------------------------------------------------------------
# the store's side: WarmStore with the cache and one without (a process that writes views
# with no Redis, or a store restored from a backup)


def _view(key: str, version_text: str, end: int, created_at: float) -> SummaryView:
    return SummaryView(key, "rolling", "", 0, 0, end, (Sentence(version_text, tuple(range(end + 1))),), 0,
                       "test", created_at)


@pytest.fixture
def stores(mem: Memory) -> tuple[WarmStore, WarmStore, str]:
    """(cached, plain, key): the Memory's WarmStore (with Redis) and one on the same store
    without a cache, for a conversation of three turns."""
    for text in [*FIRST, LATER]:
        mem.append(CONV, {"role": "user", "content": text})
    return mem.warm, WarmStore(mem.cold), mem._key(CONV, None)[2]


def _drop_row(mem: Memory, key: str, version: int) -> None:
    """The row is gone, as after a restore of a backup taken before it was written (the
    db uuid survives a restore)."""
    conn = sqlite3.connect(str(mem.cold.path))
    try:
        conn.execute("DELETE FROM summaries WHERE conversation_id = ? AND kind = 'rolling' AND version = ?",
                     (key, version))
        conn.commit()
    finally:
        conn.close()


def test_a_version_written_without_the_cache_is_read(stores: tuple[WarmStore, WarmStore, str],
                                                     admin: redis.Redis) -> None:
    cached, plain, key = stores
    cached.put(_view(key, "one", 1, 100.0))
    plain.put(_view(key, "two", 2, 200.0))  # cache untouched: it still holds v1
    assert admin.hget(cached.cache_key(key, "rolling"), "v") == "1"
    view = cached.latest(key, "rolling")
    assert view is not None and (view.version, view.text()) == (2, "two")


def test_put_refusing_the_same_version_raises_the_cache(stores: tuple[WarmStore, WarmStore, str],
                                                        admin: redis.Redis) -> None:
    cached, plain, key = stores
    cached.put(_view(key, "one", 1, 100.0))
    two = _view(key, "two", 2, 200.0)
    plain.put(two)
    assert cached.put(two).version == 2  # the very version again: refused, v2 returned
    assert admin.hget(cached.cache_key(key, "rolling"), "v") == "2"  # no read needed


# (case, whether the store then makes version 2 again with another text)
RESTORES = [
    # the store lost v2 (restored from before it): the cached v2 is no view it holds
    ("newer version gone", False),
    # and then refreshed again: a v2 of its own, not the cached one (same end turn)
    ("same version made again", True),
]


@pytest.mark.parametrize(("case", "remade"), RESTORES, ids=[c for c, _ in RESTORES])
def test_a_cached_version_the_store_does_not_hold_is_dropped(stores: tuple[WarmStore, WarmStore, str],
                                                             mem: Memory, admin: redis.Redis,
                                                             case: str, remade: bool) -> None:
    cached, plain, key = stores
    cached.put(_view(key, "one", 1, 100.0))
    cached.put(_view(key, "two", 1, 200.0))  # a full refresh over the same range: v2, cached
    ck = cached.cache_key(key, "rolling")
    assert admin.hget(ck, "v") == "2"
    _drop_row(mem, key, 2)
    want = (1, "one")
    if remade:
        plain.put(_view(key, "two again", 1, 300.0))
        want = (2, "two again")
    view = cached.latest(key, "rolling")
    assert view is not None and (view.version, view.text()) == want
    again = cached.latest(key, "rolling")  # the entry now holds the store's: a hit, the same
    assert again == view and admin.hget(ck, "v") == str(want[0])


# ---------------------------------------------------------------------------------------
# the cost of a hit: what it was (one Redis read, one SQL statement for the turn)


def _commands(admin: redis.Redis) -> dict[str, int]:
    return {name: int(stat["calls"]) for name, stat in admin.info("commandstats").items()}


def test_a_hit_costs_one_redis_read_and_one_statement(stores: tuple[WarmStore, WarmStore, str],
                                                      mem: Memory, admin: redis.Redis) -> None:
    cached, _plain, key = stores
    cached.put(_view(key, "one", 2, 100.0))
    sent: list[str] = []
    store: Any = mem.cold
    real = store._read

    def recording(sql: str, params: Any = ()) -> list[Any]:
        sent.append(sql)
        return list(real(sql, params))

    before = _commands(admin)
    store._read = recording
    try:
        view = cached.latest(key, "rolling")
    finally:
        del store._read  # the class's method again
    after = _commands(admin)
    assert view is not None and view.version == 1
    assert len(sent) == 1, sent
    spent = {name: after[name] - before.get(name, 0) for name in after if after[name] != before.get(name, 0)}
    spent.pop("cmdstat_info", None)  # the count's own first read
    assert spent == {"cmdstat_hget": 1}
