"""Two tiermem stores (two data dirs, two databases) pointed at one Redis by mistake share
the hot keys of their like-named conversations: each call of either finds the other's
set (another database's generation) and rebuilds its own from its log. Neither serves
the other's turns (tiermem.hotlink: generations), but the cost is a full rebuild per
call, so a process warns once per conversation, naming the cause (two stores sharing one
Redis) and the remedy (a Redis database or server each), and no more for that
conversation however often it happens (`_note_foreign`, at most FOREIGN_WARNED_MAX
conversations). On a real redis-server shared by two Memory objects.

On the code before, this went unlogged: 16 rebuilds in 16 calls, a context 91 -> 214 ms,
and nothing told the operator why (review r_redis, s4c_thrash.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from hot_fixtures import TcpRedis, tcp_redis

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

FILLER = "paid by bank transfer from the account in Lisbon, reference attached"
ROUNDS = 3  # calls of each store, in turn, on each shared conversation
SHARED = "two stores share one Redis"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[TcpRedis]:
    with tcp_redis(tmp_path / "redis") as srv:
        yield srv


def _open(tmp_path: Path, name: str, server: TcpRedis, embedder: Embedder) -> Memory:
    return Memory(Config(data_dir=tmp_path / name, redis_url=server.url), embedder=embedder,
                  background_indexing=False)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "tiermem.hot" and r.levelno == logging.WARNING and SHARED in r.getMessage()]


# (what each store does on the shared conversation, in turn)
CALLS = [
    # an append finds the other's set (the admit refuses it) and rebuilds its own
    ("append", lambda mem, conv, i: mem.append(conv, {"role": "user", "content": f"{conv} {i}, {FILLER}"})),
    # a context call's read finds it and rebuilds
    ("context", lambda mem, conv, i: mem.context(conv, "which account?", 300)),
]


@pytest.mark.parametrize("call", [c[1] for c in CALLS], ids=[c[0] for c in CALLS])
def test_one_warning_per_conversation_naming_the_cause(tmp_path: Path, server: TcpRedis, embedder: Embedder,
                                                      call, caplog: pytest.LogCaptureFixture) -> None:
    one = _open(tmp_path, "one", server, embedder)
    two = _open(tmp_path, "two", server, embedder)
    try:
        for name, mem in (("one", one), ("two", two)):
            for conv in ("A", "B"):
                mem.append(conv, {"role": "user", "content": f"{conv} first in store {name}, {FILLER}"})
        with caplog.at_level(logging.WARNING, logger="tiermem"):
            for i in range(ROUNDS):
                for mem in (one, two):
                    for conv in ("A", "B"):
                        call(mem, conv, i)
        warned = _warnings(caplog)
        # each process once per conversation: 2 stores x 2 conversations, however many rounds
        assert len(warned) == 4, warned
        for mem in (one, two):
            mine = [w for w in warned if mem.cold.db_uuid in w.split("this one", 1)[1]]
            assert len(mine) == 2, warned
        assert all("its own Redis database or server" in w for w in warned)
        # and nothing was served across: each store's context holds its own turns only
        shown = " ".join(str(m.get("content")) for m in one.context("A", "which account?", 3000).messages)
        assert "A first in store one" in shown and "in store two" not in shown
    finally:
        one.close()
        two.close()


def test_no_warning_for_a_store_alone(tmp_path: Path, server: TcpRedis, embedder: Embedder,
                                      caplog: pytest.LogCaptureFixture) -> None:
    """A set of this database's older incarnation of the conversation (erased and begun
    again) is rebuilt as ever, without the warning."""
    with _open(tmp_path, "one", server, embedder) as mem, caplog.at_level(logging.WARNING, logger="tiermem"):
        mem.append("A", {"role": "user", "content": f"first life, {FILLER}"})
        mem.context("A", "which account?", 300)
        mem.delete_conversation("A")
        mem.append("A", {"role": "user", "content": f"second life, {FILLER}"})
        mem.context("A", "which account?", 300)
        assert _warnings(caplog) == []


@pytest.mark.parametrize("call", [c[1] for c in CALLS], ids=[c[0] for c in CALLS])
def test_no_warning_for_the_sets_of_a_store_no_longer_running(tmp_path: Path, server: TcpRedis,
                                                               embedder: Embedder, call,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """The sets a store that no longer runs left in the Redis (the source of
    `migrate-store`, a data dir reset on the same Redis) are another database's, found
    once each and rebuilt: no warning, as no store rewrites them (on the code before,
    each conversation's first call warned: review of f2bfefa, r2_migrated.py)."""
    with _open(tmp_path, "new", server, embedder) as mem:
        for conv in ("A", "B"):
            mem.append(conv, {"role": "user", "content": f"{conv} first in the new store, {FILLER}"})
    with _open(tmp_path, "gone", server, embedder) as gone:  # ran once on this Redis, then stopped
        for conv in ("A", "B"):
            gone.append(conv, {"role": "user", "content": f"{conv} in the store gone, {FILLER}"})
            gone.context(conv, "which account?", 300)
        theirs = gone.cold.db_uuid
    with _open(tmp_path, "new", server, embedder) as mem, caplog.at_level(logging.DEBUG, logger="tiermem"):
        for i in range(ROUNDS):
            for conv in ("A", "B"):
                call(mem, conv, i)
        assert _warnings(caplog) == []
        # the old sets were found (and rebuilt over), not missed
        found = [r for r in caplog.records if r.name == "tiermem.hot" and theirs in r.getMessage()]
        assert len(found) == 2, [r.getMessage() for r in found]
        shown = " ".join(str(m.get("content")) for m in mem.context("A", "which account?", 3000).messages)
        assert "A first in the new store" in shown and "store gone" not in shown
