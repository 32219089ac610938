"""A process whose effective uid differs from its real uid starts and uses its own
embedded Redis.

1dd0062 / 54eb4eb check, before any ping, that every directory on the socket's way, the
socket and the server answering on it (SO_PEERCRED) are this user's, comparing with
os.getuid(). What a process creates is owned by its effective uid, and SO_PEERCRED
reports the server's effective uid: a setuid program, or a root service after
os.seteuid, took its own directories for another user's and refused to start
(RedisSocketUnsafe "it belongs to another user"). Now "ours" is os.geteuid() throughout
(the directories, the socket, SO_PEERCRED's uid, the owner of a server's /proc entry,
the tiermem-<uid> temp directory's name).

A real child process (root, then os.seteuid to `nobody`) starts the embedded Redis
(a real redis-server under its watchdog) in a directory `nobody` owns, pings it and
stops it."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tiermem.tiers.redis_watchdog import pid_alive

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="os.seteuid to another uid needs root")
CHILD_TIMEOUT_S = 60.0  # a start of the server (START_TIMEOUT_S 10) and its stop, with room on a loaded machine
STICKY_WORLD_WRITABLE = 0o1777  # what /tmp is
PRIVATE_DIR_MODE = 0o700
LONG_SEGMENT = 60  # two of these make <data_dir>/redis/redis.sock too long for sun_path

# root drops its effective uid (the real one stays 0), then starts, pings and stops the
# embedded Redis of argv[2]; prints what it saw as JSON, or the refusal, exit 1
CHILD = """
import json, os, sys
from tiermem.errors import RedisSocketUnsafe
from tiermem.tiers.redis_server import EmbeddedRedis, ping_socket
sys.executable = sys.argv[3]  # what runs the (stdlib-only) watchdog: one this uid can run
# what redis-py imports lazily, loaded while the interpreter's own stdlib is readable (a
# pyenv build under a 0700 /root is not, to the uid below)
import redis
redis.Redis(unix_socket_path=os.devnull).close()
os.seteuid(int(sys.argv[1]))
er = EmbeddedRedis(sys.argv[2])
try:
    er.ensure()
except RedisSocketUnsafe as exc:
    print(f"refused: {exc}")
    sys.exit(1)
seen = {"uid": os.getuid(), "euid": os.geteuid(), "pid": er.pid, "socket": str(er.socket_path),
        "socket_owner": os.lstat(er.socket_path).st_uid, "ping": ping_socket(er.socket_path),
        "running": er.is_running()}
er.stop()
seen["stopped"] = not er.is_running()
print(json.dumps(seen))
"""


def _nobody() -> tuple[int, int]:
    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def _interpreter_for(uid: int, gid: int) -> str:
    """A Python that `uid` can run, for the watchdog the child spawns (a stdlib-only
    script run with -I -S, as tiers.redis_server does): this one, unless it lives where
    that uid cannot reach (a pyenv build under a 0700 /root), then the system's."""
    for candidate in (sys.executable, shutil.which("python3", path="/usr/bin:/bin") or ""):
        try:
            ran = subprocess.run([candidate, "-I", "-S", "-c", "pass"], user=uid, group=gid,
                                 capture_output=True, timeout=CHILD_TIMEOUT_S)
        except OSError:  # the exec itself refused (no search permission on its way)
            continue
        if ran.returncode == 0:
            return candidate
    pytest.skip("no Python interpreter that uid nobody can run, for the watchdog of its server")


@pytest.fixture
def nobody_dirs() -> Iterator[tuple[Path, Path]]:
    """(a directory `nobody` owns, for the data dir; a fresh sticky world-writable temp
    dir standing for /tmp), both reachable by `nobody` (pytest's tmp_path is not)."""
    uid, gid = _nobody()
    base = Path(tempfile.mkdtemp(prefix="tm-euid-", dir="/tmp"))
    os.chown(base, uid, gid)
    os.chmod(base, PRIVATE_DIR_MODE)
    shared = Path(tempfile.mkdtemp(prefix="tm-euid-tmp-", dir="/tmp"))
    os.chmod(shared, STICKY_WORLD_WRITABLE)
    yield base, shared
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.parametrize("where", [
    "data-dir",  # the socket at <data_dir>/redis/redis.sock: refused, the dir being nobody's, before
    "temp-dir",  # too long for sun_path: $TMPDIR/tiermem-<uid>/<hash>/redis.sock, named by uid 0 and refused before
])
def test_seteuid_process_starts_its_own_redis(nobody_dirs: tuple[Path, Path], where: str) -> None:
    base, shared = nobody_dirs
    uid, gid = _nobody()
    data = base / "data"
    if where == "temp-dir":
        data = base / ("d" * LONG_SEGMENT) / ("e" * LONG_SEGMENT)
        for d in (data.parent, data):
            d.mkdir()
            os.chown(d, uid, gid)
    env = {**os.environ, "TMPDIR": str(shared)}
    seen: dict[str, object] = {}
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(uid), str(data), _interpreter_for(uid, gid)], env=env, capture_output=True,
                              text=True, timeout=CHILD_TIMEOUT_S)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        pid = seen.get("pid")
        if isinstance(pid, int) and pid_alive(pid):  # a server its stop left: not left to the machine
            os.kill(pid, signal.SIGKILL)
    assert (seen["uid"], seen["euid"]) == (0, uid)  # the child really ran with real uid != effective uid
    assert seen["ping"] is True and seen["running"] is True and seen["stopped"] is True
    assert seen["socket_owner"] == uid  # the socket is the effective uid's: what "ours" must mean
    socket_path = Path(str(seen["socket"]))
    if where == "temp-dir":
        assert socket_path.parent.parent == shared / f"tiermem-{uid}"
    else:
        assert socket_path == data / "redis" / "redis.sock"
    assert isinstance(seen["pid"], int) and not pid_alive(seen["pid"])
