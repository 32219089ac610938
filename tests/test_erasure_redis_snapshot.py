"""A Redis restored from a snapshot taken before an erasure (tiermem.hot_restored), on a
real redis-server with an RDB file, killed and started again from a copy of that file.

On the code before (review of the hot tier, 2026-12-06) the restored Redis held the
erased conversation's keys again, its text included (the hot set, cached views, its
epoch state, and a sibling's epoch state that showed it by namespace recall), until
their idle TTL of 7 days: never served, yet in Redis's memory and its next snapshot.
Now the first command Redis answers on a new connection checks its erasure marker
against the store's tombstones, and the next tiermem call purges them before it returns."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from ports import free_port

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import find_redis_binary

CANARY = "zq7canary-3390-persimmon"
NS = "acme/alice"
QUESTION = "What was the vault code I told you in the other thread?"
START_WAIT_S = 30.0  # how long a redis-server may take to load its RDB and answer
POLL_S = 0.02


class SnapshotRedis:
    """A redis-server on a loopback port whose RDB is `dir/dump.rdb`, saved only by hand
    (SAVE), killed and started again on the same port from a file of the test's."""

    def __init__(self, work: Path) -> None:
        self.dir = work
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def admin(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [find_redis_binary("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir), "--dbfilename", "dump.rdb",
             "--logfile", str(self.dir / "redis.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_WAIT_S
        with self.admin() as admin:
            while True:
                try:
                    admin.ping()
                    return
                except redis.exceptions.ConnectionError:  # still loading the RDB (BusyLoadingError too)
                    assert time.monotonic() < deadline and self.proc.poll() is None
                    time.sleep(POLL_S)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def restart_from(self, snapshot: Path) -> None:
        """Kill the server (no save at exit) and start it from `snapshot`."""
        self.kill()
        shutil.copy(snapshot, self.dir / "dump.rdb")
        self.start()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SnapshotRedis]:
    srv = SnapshotRedis(tmp_path / "redis")
    srv.start()
    try:
        yield srv
    finally:
        srv.kill()


@contextmanager
def opened(cfg: Config, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
        yield mem


def _tagged(admin: redis.Redis, mem: Memory, key: str) -> list[bytes]:
    """The Redis keys under the conversation's hash tag."""
    assert mem.hot is not None
    return sorted(admin.scan_iter(match=mem.hot.tier.tag(key) + "*", count=1000))


def _holding(admin: redis.Redis, needle: bytes) -> list[bytes]:
    """Every key whose name or value holds `needle`."""
    hits = []
    for name in admin.scan_iter(count=1000):
        kind = admin.type(name)
        value = {b"string": admin.get, b"hash": admin.hgetall, b"zset": lambda k: admin.zrange(k, 0, -1),
                 b"set": admin.smembers, b"list": lambda k: admin.lrange(k, 0, -1)}.get(kind, lambda k: None)(name)
        if needle in name or needle in repr(value).encode():
            hits.append(name)
    return hits


def _seed(mem: Memory) -> str:
    """The canary in "secret" (hot set, cached view, epoch state), and a context of
    "sibling" that shows it by namespace recall (the sibling's epoch state holds it)."""
    mem.append("secret", {"role": "user", "content": f"Remember: the vault code is {CANARY}, keep it safe."},
               namespace=NS, created_at=time.time() - 3600)
    mem.append("secret", {"role": "assistant", "content": "Noted, I will keep it safe."}, namespace=NS)
    mem.consolidate("secret", namespace=NS)
    mem.context("secret", "what is the vault code?", 1500, namespace=NS)
    mem.append("sibling", {"role": "user", "content": "I am planting tomatoes in the garden this week."},
               namespace=NS)
    mem.append("sibling", {"role": "user", "content": QUESTION}, namespace=NS)
    mem.catch_up(namespace=NS)
    assert CANARY in json.dumps(mem.context("sibling", QUESTION, 1500, namespace=NS).messages)  # the premise
    key = mem.cold.key_of(NS, "secret")
    assert key is not None
    return key


def _next_call(mem: Memory) -> None:
    """An ordinary call of the service after the restore: another conversation's append."""
    mem.append("sibling", {"role": "user", "content": "And the roses?"}, namespace=NS)


# who makes the next call after the restore: the process that erased (its client
# reconnects within the call), or one that opens afterwards (its first command)
CALLERS: list[tuple[str, Callable[[Memory, Config, FastEmbedder], None]]] = [
    ("same_process", lambda mem, cfg, emb: _next_call(mem)),
    ("new_process", lambda mem, cfg, emb: _open_and_call(cfg, emb)),
]


def _open_and_call(cfg: Config, embedder: FastEmbedder) -> None:
    with opened(cfg, embedder) as other:
        _next_call(other)


@pytest.mark.parametrize(("who", "call"), CALLERS, ids=[c[0] for c in CALLERS])
def test_a_redis_restored_from_before_an_erasure_loses_the_erased_keys_at_the_next_call(
        tmp_path: Path, server: SnapshotRedis, embedder: FastEmbedder, caplog: pytest.LogCaptureFixture,
        who: str, call: Callable[[Memory, Config, FastEmbedder], None]) -> None:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url, hot_budget_tokens=600)
    snapshot = tmp_path / "before_erasure.rdb"
    with opened(cfg, embedder) as mem, server.admin() as admin:
        key = _seed(mem)
        admin.save()
        shutil.copy(server.dir / "dump.rdb", snapshot)
        mem.delete_conversation("secret", namespace=NS)
        assert _tagged(admin, mem, key) == [] and _holding(admin, CANARY.encode()) == []
        server.restart_from(snapshot)
        # the premise: the restored Redis holds the erased conversation and its text again
        assert _tagged(admin, mem, key) and _holding(admin, CANARY.encode())
        with caplog.at_level(logging.INFO, logger="tiermem.hot"):
            call(mem, cfg, embedder)
        assert _tagged(admin, mem, key) == []
        assert _holding(admin, CANARY.encode()) == []
        said = [r.getMessage() for r in caplog.records if "keys of erased conversations" in r.getMessage()]
        assert said and "deleted" in said[0] and "1 of the 1 conversation(s) erased since" in said[0], said
        # the sibling is served as before, its state rebuilt without the erased turns
        assert CANARY not in json.dumps(mem.context("sibling", QUESTION, 1500, namespace=NS).messages)


def test_a_redis_that_restarted_with_everything_checks_without_scanning(
        tmp_path: Path, server: SnapshotRedis, embedder: FastEmbedder, caplog: pytest.LogCaptureFixture) -> None:
    # the marker is current after the purge: a later restart from a snapshot taken since
    # costs one GET and one index seek, no scan and no line
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url, hot_budget_tokens=600)
    with opened(cfg, embedder) as mem, server.admin() as admin:
        _seed(mem)
        mem.delete_conversation("secret", namespace=NS)
        _next_call(mem)  # reconnected? no: the first command's check set the marker
        admin.save()
        snapshot = tmp_path / "after_erasure.rdb"
        shutil.copy(server.dir / "dump.rdb", snapshot)
        server.restart_from(snapshot)
        with caplog.at_level(logging.INFO, logger="tiermem.hot"):
            _next_call(mem)
        assert mem.hot is not None and mem.hot.healthy
        assert not [r for r in caplog.records if "keys of erased conversations" in r.getMessage()]


def test_a_large_restored_redis_is_purged_a_step_per_call(
        tmp_path: Path, server: SnapshotRedis, embedder: FastEmbedder) -> None:
    # each call scans at most `restored_scan_keys` keys (here 5 of about 25), so no call
    # waits for the whole scan; the calls that follow finish it, and the marker is set
    # only then
    from tiermem.hot_restored import marker_key  # here: the other cases run on the code before too

    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url, hot_budget_tokens=600)
    snapshot = tmp_path / "before_erasure.rdb"
    with opened(cfg, embedder) as mem, server.admin() as admin:
        assert mem.hot is not None
        key = _seed(mem)
        admin.save()
        shutil.copy(server.dir / "dump.rdb", snapshot)
        mem.delete_conversation("secret", namespace=NS)
        server.restart_from(snapshot)
        mem.hot.restored_scan_keys = 5
        total = sum(1 for _ in admin.scan_iter(match="{tm:*", count=1000))
        marker = marker_key(mem.hot.tier, mem.cold.db_uuid)
        newest = str(mem.cold.erased_after(0, 1)[0]).encode()
        calls = 0
        while admin.get(marker) != newest:  # set once the scan is through
            _next_call(mem)
            calls += 1
            assert calls <= total
        assert calls > 1  # not in one go
        assert _tagged(admin, mem, key) == [] and _holding(admin, CANARY.encode()) == []
        assert mem.hot.restored_purges == 1
