"""Helpers shared by the hot-tier tests: a redis-server of a test's own on a TCP port with
the `server` / `admin` / `mem` fixtures on it, a local Redis Cluster started from the same binary
as the embedded server, a way to kill a server for real, and a pure-Python reference of
the eviction rules that the Lua engine must match step for step.

Imported explicitly by the test modules (the lead owns conftest.py).
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import redis

from tiermem.hotlink import WRITES_RECHECK_INTERVAL_S
from tiermem.tiers.hot import HotTurn
from tiermem.tiers.redis_server import EmbeddedRedis, find_redis_binary, find_redis_cli
from tiermem.tiers.redis_watchdog import pid_alive as _pid_alive

if TYPE_CHECKING:
    from tiermem import Memory
    from tiermem.tiers.embed import Embedder

# ---------------------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------------------


def kill_hard(pid: int, timeout: float = 5.0) -> None:
    """SIGKILL and wait until the process is gone or a zombie (PID 1 here never reaps)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            raise TimeoutError(f"pid {pid} survived SIGKILL for {timeout} s")
        time.sleep(0.005)


@contextlib.contextmanager
def own_redis(state_dir: Path) -> Iterator[EmbeddedRedis]:
    """A redis-server of the test's own under `state_dir`, reached by URL (tiermem neither
    owns nor restarts it), stopped afterwards even when the stop leaves it a zombie."""
    srv = EmbeddedRedis(state_dir)
    srv.ensure()
    pid = srv.pid
    try:
        yield srv
    finally:
        srv.stop()
        if pid is not None:
            kill_hard(pid)


OTHER_APP_VALUE_BYTES = 10_000  # one value of another application's data
OTHER_APP_KEYS = 50  # 500 KB of it


def fill_past_maxmemory(admin: redis.Redis) -> list[str]:
    """Another application's keys, then `maxmemory` set below what Redis now uses, half
    of their size under it (Redis stays refusing writes until they go, whatever the
    allocator's give and take), under `noeviction`; the keys that went in."""
    keys = [f"other-app:{n}" for n in range(OTHER_APP_KEYS)]
    for key in keys:
        admin.set(key, "x" * OTHER_APP_VALUE_BYTES)
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory",
                     int(admin.info("memory")["used_memory"]) - OTHER_APP_KEYS * OTHER_APP_VALUE_BYTES // 2)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        admin.set("other-app:one-more", "x")
    return keys


@dataclass
class TcpRedis:
    """A redis-server of a test's own on a loopback TCP port (replication and passwords
    need one: the embedded server has no port)."""

    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def admin(self, password: str | None = None) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=password, socket_timeout=5,
                           decode_responses=True)


@contextlib.contextmanager
def tcp_redis(work_dir: Path, *args: str, password: str | None = None,
              timeout: float = 30.0) -> Iterator[TcpRedis]:
    """A redis-server of the test's own on a free loopback port, with `args` (and
    `requirepass`), no persistence; killed afterwards."""
    binary = find_redis_binary("redis-server")
    work_dir.mkdir(parents=True, exist_ok=True)
    port = free_cluster_ports(1)[0]
    cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
           "--dir", str(work_dir), "--logfile", str(work_dir / "redis.log"), *args]
    if password is not None:
        cmd += ["--requirepass", password]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    srv = TcpRedis(port, proc)
    try:
        admin = srv.admin(password)
        deadline = time.monotonic() + timeout
        while True:
            try:
                admin.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.02)
        admin.close()
        yield srv
    finally:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


# The pytest fixtures of a test on one such server: `server`, its `admin` client, and a
# Memory `mem` on it (Memory's own data under tmp_path / "data"). A test module uses them
# through the plugin module hot_server (`pytest_plugins = ["hot_server"]`), not by importing
# them: ruff takes a test's parameter of an imported fixture's name for a redefinition
# (F811), and pytest cannot register this module, which the tests import, as a plugin.


@pytest.fixture
def server(tmp_path: Path) -> Iterator[TcpRedis]:
    """The redis-server tiermem is configured with (tcp_redis, under tmp_path / "redis")."""
    with tcp_redis(tmp_path / "redis") as srv:
        yield srv


@pytest.fixture
def admin(server: TcpRedis) -> Iterator[redis.Redis]:
    """A client of the test's own on `server`, besides tiermem's."""
    c = server.admin()
    yield c
    c.close()


@pytest.fixture
def mem(tmp_path: Path, server: TcpRedis, embedder: Embedder) -> Iterator[Memory]:
    """A Memory on `server`, indexing in the calling thread."""
    from tiermem import Config, Memory

    with Memory(Config(data_dir=tmp_path / "data", redis_url=server.url), embedder=embedder,
                background_indexing=False) as m:
        yield m


REPLICA_WAIT_S = 10.0  # how long a server may take to sync from its primary
REPLICA_POLL_S = 0.05


def wait_synced(node: redis.Redis) -> None:
    """Until `node`, just made a replica (REPLICAOF), has its link to its primary up
    (the sync done); asserts it is within REPLICA_WAIT_S."""
    deadline = time.monotonic() + REPLICA_WAIT_S
    while node.info("replication").get("master_link_status") != "up":
        assert time.monotonic() < deadline, node.info("replication")
        time.sleep(REPLICA_POLL_S)


RECHECK_POLL_S = 0.1  # between two reads of a worker that only reads
# how long past WRITES_RECHECK_INTERVAL_S such a worker's reads may take to notice
RECHECK_SLACK_S = 1.5


def until_healthy(mem: Memory, read: Callable[[Memory], Any]) -> float:
    """Read as a worker that only reads does until the hot tier is healthy (refused
    writes are rechecked by reads: tiermem.hotlink); how long that took."""
    assert mem.hot is not None
    start = time.monotonic()
    while not mem.hot.healthy and time.monotonic() - start < WRITES_RECHECK_INTERVAL_S + RECHECK_SLACK_S:
        read(mem)
        time.sleep(RECHECK_POLL_S)
    return time.monotonic() - start


def scrape_counters(mem: Memory) -> dict[str, Any]:
    """What a /metrics scrape reads of the hot tier (tiermem_tier_up{hot})."""
    assert mem.hot is not None
    return mem.hot.counters()


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_ports(n: int) -> list[int]:
    """n ports whose cluster-bus twins (port + 10000) are free as well."""
    rng = random.Random()
    ports: list[int] = []
    while len(ports) < n:
        port = rng.randrange(20000, 55000)
        if port in ports or port + 10000 in ports or port - 10000 in ports:
            continue
        if _port_free(port) and _port_free(port + 10000):
            ports.append(port)
    return ports


@dataclass
class LocalCluster:
    """A 3-master Redis Cluster on loopback TCP, no replicas, no persistence."""

    ports: list[int]
    procs: list[subprocess.Popen[bytes]]
    work_dir: Path
    nodes: list[redis.Redis] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}"

    def stop(self) -> None:
        for node in self.nodes:
            node.close()
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)


def start_local_cluster(work_dir: Path, masters: int = 3, timeout: float = 30.0,
                        ports: list[int] | None = None) -> LocalCluster:
    """`ports`: the masters' ports (free_cluster_ports), e.g. ones a client was given
    before the cluster was up; `masters` of them are picked otherwise."""
    binary = find_redis_binary("redis-server")
    cli = find_redis_cli(binary)
    work_dir.mkdir(parents=True, exist_ok=True)
    ports = list(ports) if ports is not None else free_cluster_ports(masters)
    masters = len(ports)
    procs: list[subprocess.Popen[bytes]] = []
    cluster = LocalCluster(ports, procs, work_dir)
    try:
        for port in ports:
            node_dir = work_dir / str(port)
            node_dir.mkdir()
            procs.append(
                subprocess.Popen(
                    [
                        binary,
                        "--port",
                        str(port),
                        "--bind",
                        "127.0.0.1",
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        str(node_dir / "nodes.conf"),
                        "--cluster-node-timeout",
                        "5000",
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--dir",
                        str(node_dir),
                        "--logfile",
                        str(node_dir / "redis.log"),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        cluster.nodes = [
            redis.Redis(host="127.0.0.1", port=p, socket_timeout=2, decode_responses=True) for p in ports
        ]
        deadline = time.monotonic() + timeout
        for node in cluster.nodes:
            while True:
                try:
                    node.ping()
                    break
                except redis.exceptions.ConnectionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
        created = subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *(f"127.0.0.1:{p}" for p in ports),
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if created.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout!r} {created.stderr!r}")
        while True:
            states = [n.cluster("INFO") for n in cluster.nodes]
            if all(s.get("cluster_state") == "ok" for s in states) and all(
                int(s.get("cluster_known_nodes", 0)) == masters for s in states
            ):
                return cluster
            if time.monotonic() > deadline:
                raise TimeoutError(f"cluster not ok after {timeout} s: {states}")
            time.sleep(0.05)
    except BaseException:
        cluster.stop()
        raise


# ---------------------------------------------------------------------------------------
# reference model of the eviction rules
# ---------------------------------------------------------------------------------------


@dataclass
class Eviction:
    victim: int
    candidates: list[int]  # the candidate positions at that moment, in order


@dataclass
class RefConversation:
    """Pure-Python twin of APPLY_LUA for one conversation."""

    budget: int
    head: int
    tail: int
    bias: float
    members: list[int] = field(default_factory=list)
    turns: dict[int, HotTurn] = field(default_factory=dict)  # members' current records
    demoted: dict[int, int] = field(default_factory=dict)
    last: int = -1
    evictions: int = 0
    log: list[Eviction] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.turns[p].tokens for p in self.members)

    @property
    def pinned_total(self) -> int:
        return sum(self.turns[p].tokens for p in self.members if self.turns[p].pinned)

    @property
    def overflow(self) -> int:
        return max(0, self.total - self.budget)

    def _insert(self, turn: HotTurn) -> None:
        self.members.append(turn.position)
        self.members.sort()
        self.turns[turn.position] = turn

    def _remove(self, position: int) -> HotTurn:
        self.members.remove(position)
        return self.turns.pop(position)

    def candidates(self) -> list[int]:
        window = self.members[self.head : max(self.head, len(self.members) - self.tail)]
        return [p for p in window if not self.turns[p].pinned]

    def demotable(self) -> list[int]:
        """The pins a demotion picks from: every pin while the pins alone pass the budget,
        else those outside the protected head and tail (the budget is hard but for them)."""
        if self.pinned_total > self.budget:
            window = self.members
        else:
            window = self.members[self.head : max(self.head, len(self.members) - self.tail)]
        return [p for p in window if self.turns[p].pinned]

    @staticmethod
    def victim_index(n_candidates: int, bias: float) -> int:
        return max(0, math.ceil((1 - bias) * ((n_candidates - 1) / 2) - 0.5))

    def enforce(self) -> tuple[list[int], list[int]]:
        evicted: list[int] = []
        demoted: list[int] = []
        while self.total > self.budget:
            cand = self.candidates()
            if cand:
                victim = cand[self.victim_index(len(cand), self.bias)]
                self.log.append(Eviction(victim, cand))
                self._remove(victim)
                self.evictions += 1
                evicted.append(victim)
            elif pins := self.demotable():
                worst = min(pins, key=lambda p: (self.turns[p].priority, p))
                self.demoted[worst] = self._remove(worst).tokens
                demoted.append(worst)
            else:
                break
        return evicted, demoted

    def admit(self, turn: HotTurn, *, contiguous: bool = True) -> tuple[list[int], list[int]]:
        if turn.position <= self.last:
            return [], []
        assert not contiguous or turn.position == self.last + 1
        self.demoted.pop(turn.position, None)
        if not turn.pinned:
            turn = HotTurn(turn.position, turn.tokens, False, 0, turn.payload)
        self._insert(turn)
        self.last = turn.position
        return self.enforce()

    def pin(self, position: int, priority: int, turn: HotTurn | None) -> tuple[list[int], list[int]] | None:
        """None where the Lua script answers NOTHOT."""
        if position in self.turns:
            t = self.turns[position]
            self.turns[position] = HotTurn(t.position, t.tokens, True, priority, t.payload)
            self.demoted.pop(position, None)
            return self.enforce()
        if turn is None:
            return None
        self.demoted.pop(position, None)
        self._insert(HotTurn(position, turn.tokens, True, priority, turn.payload))
        return self.enforce()

    def unpin(self, position: int) -> tuple[list[int], list[int]]:
        if position in self.turns:
            t = self.turns[position]
            if t.pinned:
                self.turns[position] = HotTurn(t.position, t.tokens, False, 0, t.payload)
                return self.enforce()
            return [], []
        self.demoted.pop(position, None)
        return [], []

    def hot(self) -> list[HotTurn]:
        return [self.turns[p] for p in self.members]


def replay(turns: Iterable[HotTurn], budget: int, head: int, tail: int, bias: float) -> RefConversation:
    ref = RefConversation(budget, head, tail, bias)
    for t in turns:
        ref.admit(t, contiguous=False)
    return ref
