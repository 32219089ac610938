"""The embedded redis-server's lifecycle (issue 17): it stops when nobody has used it for
`redis_idle_timeout_s`, survives its users while they live, and is never left orphaned by
a killed process or a removed data dir. Real redis-server, real watchdog, real signals."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from hot_fixtures import kill_hard
from ports import free_port

from tiermem.config import DEFAULT_REDIS_IDLE_TIMEOUT_S, Config
from tiermem.tiers import redis_server
from tiermem.tiers.redis_server import EmbeddedRedis, ping_socket, servers_on
from tiermem.tiers.redis_watchdog import pid_alive

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
IDLE_S = 1.0  # short, so that the tests wait seconds; the default is minutes
GONE_WITHIN_S = IDLE_S + 4.0  # idle timeout + a few watchdog ticks, on a loaded 2-core runner

# a user of the server that holds a connection until it is killed
HOLDER = """
import sys, time, redis
from tiermem.tiers.redis_server import EmbeddedRedis
srv = EmbeddedRedis(sys.argv[1], idle_timeout_s=float(sys.argv[2]))
client = redis.Redis.from_url(srv.ensure())
client.ping()
print(srv.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int | None) -> bool:
    return pid is not None and pid_alive(pid)


def _wait(pred: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def _client(srv: EmbeddedRedis) -> redis.Redis:
    c = redis.Redis(unix_socket_path=str(srv.socket_path), socket_timeout=2)
    assert c.ping()
    return c


@pytest.fixture
def cleanup() -> Iterator[list[int]]:
    """Pids to SIGKILL after the test, whatever it did (no server outlives a test)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if _alive(pid):
            kill_hard(pid)


def _start(data: Path, cleanup: list[int], idle: float = IDLE_S) -> EmbeddedRedis:
    srv = EmbeddedRedis(data, idle_timeout_s=idle)
    srv.ensure()
    assert srv.pid is not None and srv.watchdog_pid is not None
    cleanup += [srv.pid, srv.watchdog_pid]
    return srv


def test_config_default_is_the_launchers() -> None:
    assert DEFAULT_REDIS_IDLE_TIMEOUT_S == redis_server.DEFAULT_IDLE_TIMEOUT_S
    assert Config().redis_idle_timeout_s == DEFAULT_REDIS_IDLE_TIMEOUT_S


def test_idle_server_stops_and_removes_its_files(tmp_path: Path, cleanup: list[int]) -> None:
    srv = _start(tmp_path / "data", cleanup)
    pid, dog = srv.pid, srv.watchdog_pid
    assert stat.S_IMODE(os.stat(srv.watchdog_pidfile).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(srv.pidfile).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(srv.logfile).st_mode) == 0o600
    started = time.monotonic()
    assert _wait(lambda: not _alive(pid), GONE_WITHIN_S)
    # not before the idle timeout
    assert time.monotonic() - started >= IDLE_S * 0.9
    assert _wait(lambda: not _alive(dog), 2.0)
    assert not srv.socket_path.exists() and not srv.pidfile.exists() and not srv.watchdog_pidfile.exists()
    # the next user starts a fresh one
    srv.ensure()
    cleanup += [srv.pid or 0, srv.watchdog_pid or 0]
    assert srv.pid not in (None, pid) and srv.is_running()


def test_an_open_connection_keeps_it_and_closing_it_lets_it_go(tmp_path: Path, cleanup: list[int]) -> None:
    srv = _start(tmp_path / "data", cleanup)
    pid = srv.pid
    c = _client(srv)
    time.sleep(IDLE_S * 3)
    assert _alive(pid) and srv.is_running()
    c.close()
    assert _wait(lambda: not _alive(pid), GONE_WITHIN_S)


# how the user process goes: each must let the server go once the process is gone
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_user_does_not_keep_it(tmp_path: Path, cleanup: list[int], sig: signal.Signals) -> None:
    data = tmp_path / "data"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(data), str(IDLE_S)], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    cleanup.append(holder.pid)
    assert holder.stdout is not None
    pid = int(holder.stdout.readline())
    cleanup.append(pid)
    time.sleep(IDLE_S * 3)
    assert _alive(pid), "the server stopped while its user still ran"
    holder.send_signal(sig)
    holder.wait(timeout=10)
    assert _wait(lambda: not _alive(pid), GONE_WITHIN_S)


def test_the_cli_leaves_no_server_behind(tmp_path: Path, cleanup: list[int]) -> None:
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "TIERMEM_REDIS_IDLE_TIMEOUT_S": str(IDLE_S)}
    # append is cold-only; pin updates the hot tier, so it starts the server
    for args in (["append", "c1", "--role", "user", "--content", "hello"], ["pin", "c1", "0"]):
        r = subprocess.run([TIERMEM, "--data-dir", str(data), *args], capture_output=True, text=True, env=env,
                           timeout=60)
        assert r.returncode == 0, r.stderr
    srv = EmbeddedRedis(data)
    pid = srv._read_pid()
    assert pid is not None
    cleanup.append(pid)
    assert _wait(lambda: not _alive(pid), GONE_WITHIN_S)
    assert not srv.socket_path.exists()


# how `tiermem serve` goes: a clean stop and a kill that leaves it no time to clean up
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_serve_does_not_keep_it(tmp_path: Path, cleanup: list[int], sig: signal.Signals) -> None:
    import urllib.request

    data = tmp_path / "data"
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "TIERMEM_REDIS_IDLE_TIMEOUT_S": str(IDLE_S)}
    serve = subprocess.Popen([TIERMEM, "--data-dir", str(data), "serve", "--no-auth", "--port", str(port),
                              "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    cleanup.append(serve.pid)

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    assert _wait(healthy, 120.0), "serve never answered /healthz"
    srv = EmbeddedRedis(data)
    pid = srv.pid
    assert pid is not None
    cleanup.append(pid)
    time.sleep(IDLE_S * 3)
    assert _alive(pid), "the server stopped while serve still ran"
    serve.send_signal(sig)
    serve.wait(timeout=30)
    assert _wait(lambda: not _alive(pid), GONE_WITHIN_S)


def test_a_killed_watchdog_is_replaced_and_the_server_still_stops(tmp_path: Path, cleanup: list[int]) -> None:
    srv = _start(tmp_path / "data", cleanup)
    pid, dog = srv.pid, srv.watchdog_pid
    assert dog is not None
    c = _client(srv)
    kill_hard(dog)
    assert srv.watchdog_pid is None and srv.is_running()  # orphaned, still serving
    srv.ensure()  # the next user adopts it: same server, a new watchdog
    new_dog = srv.watchdog_pid
    assert new_dog not in (None, dog) and srv.pid == pid
    cleanup.append(new_dog or 0)
    c.close()
    assert _wait(lambda: not _alive(pid), GONE_WITHIN_S)
    assert _wait(lambda: not _alive(new_dog), 2.0)


# where the socket lives: in the data dir, or (a long path) in a temp dir named by its hash
@pytest.mark.parametrize("deep", [False, True])
def test_a_removed_data_dir_stops_the_server(tmp_path: Path, cleanup: list[int], deep: bool) -> None:
    data = tmp_path / ("d" * 60) / ("e" * 60) if deep else tmp_path / "data"
    srv = _start(data, cleanup, idle=0)  # 0: no idle stop, only the removal stops it
    pid, dog = srv.pid, srv.watchdog_pid
    assert (srv.socket_path.parent != srv.dir) == deep
    c = _client(srv)  # even with a user connected: nobody can reach it any more
    shutil.rmtree(data)
    assert _wait(lambda: not _alive(pid), 5.0)
    assert _wait(lambda: not _alive(dog), 2.0)
    c.close()


def test_a_recreated_data_dir_gets_a_new_server_and_the_orphan_dies(tmp_path: Path, cleanup: list[int]) -> None:
    data = tmp_path / "data"
    srv = _start(data, cleanup, idle=0)
    old, dog = srv.pid, srv.watchdog_pid
    assert dog is not None
    kill_hard(dog)  # nobody watches it now
    shutil.rmtree(data)
    assert _alive(old) and servers_on(srv.socket_path) == [old]
    new = EmbeddedRedis(data, idle_timeout_s=0)
    new.ensure()
    cleanup += [new.pid or 0, new.watchdog_pid or 0]
    assert not _alive(old)
    assert new.pid not in (None, old)
    # the orphan was SIGKILLed, so it did not unlink the new server's socket on its way out
    time.sleep(0.2)
    assert new.is_running()
    new.stop()
    assert not _alive(new.pid)


def test_stop_redis_finds_a_server_whose_files_are_gone(tmp_path: Path, cleanup: list[int]) -> None:
    data = tmp_path / "data"
    srv = _start(data, cleanup, idle=0)
    pid, dog = srv.pid, srv.watchdog_pid
    assert dog is not None
    kill_hard(dog)
    shutil.rmtree(data)
    assert _alive(pid)
    r = subprocess.run([TIERMEM, "--data-dir", str(data), "stop-redis"],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "stopped" in r.stdout
    assert not _alive(pid)


def test_stop_ends_the_watchdog_too(tmp_path: Path, cleanup: list[int]) -> None:
    srv = _start(tmp_path / "data", cleanup, idle=0)
    pid, dog = srv.pid, srv.watchdog_pid
    srv.stop()
    assert not _alive(pid) and not _alive(dog)
    assert not srv.watchdog_pidfile.exists() and not srv.socket_path.exists()


def test_sigterm_to_the_watchdog_shuts_the_server_down_cleanly(tmp_path: Path, cleanup: list[int]) -> None:
    srv = _start(tmp_path / "data", cleanup, idle=0)
    pid, dog = srv.pid, srv.watchdog_pid
    assert dog is not None
    os.kill(dog, signal.SIGTERM)
    assert _wait(lambda: not _alive(pid) and not _alive(dog), 5.0)
    # a clean shutdown: redis removed its own socket and pidfile
    assert not srv.socket_path.exists() and not srv.pidfile.exists()


def test_stale_files_naming_live_strangers_never_block_start(tmp_path: Path, cleanup: list[int]) -> None:
    srv = EmbeddedRedis(tmp_path / "data", idle_timeout_s=IDLE_S)
    srv.dir.mkdir(parents=True, mode=0o700)
    stranger = subprocess.Popen(["sleep", "30"])
    cleanup.append(stranger.pid)
    # pid files left by a crash whose pids now belong to other processes
    srv.pidfile.write_text(f"{stranger.pid}\n")
    srv.watchdog_pidfile.write_text(f"{os.getpid()}\n")
    srv.socket_path.write_text("")  # not even a socket
    srv.ensure()
    cleanup += [srv.pid or 0, srv.watchdog_pid or 0]
    assert srv.is_running() and srv.pid != stranger.pid
    assert srv.watchdog_pid not in (None, os.getpid())
    assert stranger.poll() is None, "a process that is not ours was signalled"
    stranger.kill()
    stranger.wait()


def test_a_negative_idle_timeout_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="idle_timeout_s"):
        EmbeddedRedis(tmp_path, idle_timeout_s=-1)
    with pytest.raises(ValueError, match="redis_idle_timeout_s"):
        Config(redis_idle_timeout_s=-1)
    assert not ping_socket(tmp_path / "redis" / "redis.sock")
