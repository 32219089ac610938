"""The embedded Redis's socket is used only when no other local user can have made it.

A data dir whose `<data_dir>/redis/redis.sock` is too long for `sun_path` gets its socket
at a predictable `$TMPDIR/tiermem-<uid>/<hash>/redis.sock`. Another user (`nobody` here:
the servers below really run under that uid) who made those directories first and ran a
redis-server there got every hot-tier message, and could rewrite them: `ensure()` pinged
the socket and used whatever answered before it checked any directory. Now the
directories and the socket are lstat'ed before any ping, and the answering server's uid
is checked (SO_PEERCRED); anything foreign is refused, naming the path, owner and mode.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from hash_embedder import HashEmbedder
from hot_fixtures import kill_hard

from tiermem import Config, Memory
from tiermem.errors import RedisSocketUnsafe
from tiermem.tiers.redis_server import EmbeddedRedis, find_redis_binary, ping_socket
from tiermem.tiers.redis_watchdog import pid_alive

ROOT_ONLY = pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                               reason="runs a server and makes directories as another uid: needs root")
ATTACKER_START_S = 10.0  # how long the other user's redis-server may take to answer
STICKY_WORLD_WRITABLE = 0o1777  # what /tmp is
StartServer = Callable[[Path], redis.Redis]  # the attacker's redis-server on this socket
MakePath = Callable[[Path], None]  # puts something at this path


def _nobody() -> tuple[int, int]:
    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


@pytest.fixture
def shared_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh sticky, world-writable temp dir standing for /tmp after a reboot (no
    tiermem-<uid> in it yet), reachable by `nobody` (pytest's tmp_path is not)."""
    path = Path(tempfile.mkdtemp(prefix="tm-sock-", dir="/tmp"))
    os.chmod(path, STICKY_WORLD_WRITABLE)
    monkeypatch.setattr(tempfile, "tempdir", str(path))  # what gettempdir() answers
    monkeypatch.setenv("TMPDIR", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _long_data_dir(tmp_path: Path) -> Path:
    """A data dir whose redis.sock would not fit in sun_path: its socket goes to the temp dir."""
    return tmp_path / ("d" * 60) / ("e" * 60)


def _make_dirs_as(uid: int, gid: int, mode: int, *dirs: Path) -> None:
    for d in dirs:
        d.mkdir()
        os.chown(d, uid, gid)
        os.chmod(d, mode)


@pytest.fixture
def attacker_redis(shared_tmp: Path) -> Iterator[StartServer]:
    started: list[subprocess.Popen[bytes]] = []

    def start(sock: Path) -> redis.Redis:
        """A real redis-server run by `nobody`, listening on `sock` (whose directory
        exists and `nobody` may write), as the attacker would run it."""
        uid, gid = _nobody()
        work = Path(tempfile.mkdtemp(prefix="att-", dir=shared_tmp))
        os.chown(work, uid, gid)
        proc = subprocess.Popen(
            [find_redis_binary(), "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "777",
             "--save", "", "--appendonly", "no", "--dir", str(work)],
            user=uid, group=gid, extra_groups=[], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        started.append(proc)
        client = redis.Redis(unix_socket_path=str(sock), socket_timeout=2)
        deadline = time.monotonic() + ATTACKER_START_S
        while True:
            try:
                client.ping()
                return client
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    yield start
    for proc in started:
        kill_hard(proc.pid)
        proc.wait()


@ROOT_ONLY
@pytest.mark.parametrize("mode", [
    0o777,  # the reviewer's attack: everything open, so the victim could also write there
    0o700,  # the attacker's own private dirs: only the owner tells they are not ours
], ids=["open-0777", "private-0700"])
def test_other_users_server_on_the_predicted_socket_is_refused(
        tmp_path: Path, shared_tmp: Path, attacker_redis: StartServer, mode: int) -> None:
    data = _long_data_dir(tmp_path)
    sock = EmbeddedRedis(data).socket_path
    assert sock.parent.parent.parent == shared_tmp  # $TMPDIR/tiermem-<uid>/<hash>/redis.sock
    uid, gid = _nobody()
    _make_dirs_as(uid, gid, 0o777, sock.parent.parent, sock.parent)
    theirs = attacker_redis(sock)
    for d in (sock.parent, sock.parent.parent):
        os.chmod(d, mode)
    with pytest.raises(RedisSocketUnsafe) as caught:
        Memory(Config(data_dir=data), embedder=HashEmbedder(), background_indexing=False)
    message = str(caught.value)
    assert str(sock.parent.parent) in message and f"uid {uid}" in message and f"mode {mode:04o}" in message
    assert caught.value.owner == uid and caught.value.mode == mode
    # nothing reached the other user's server, and none of ours was started
    assert theirs.dbsize() == 0
    assert not (data / "redis" / "redis.pid").exists()


@ROOT_ONLY
def test_other_users_server_behind_our_own_dirs_is_refused_by_its_uid(
        tmp_path: Path, shared_tmp: Path, attacker_redis: StartServer) -> None:
    """Every directory and the socket file are ours; only the listening process is not
    (its socket moved in and chowned, as only root could): SO_PEERCRED tells."""
    data = _long_data_dir(tmp_path)
    srv = EmbeddedRedis(data)
    sock = srv.socket_path
    uid, gid = _nobody()
    outside = shared_tmp / "att-sock"
    _make_dirs_as(uid, gid, 0o777, outside)
    theirs = attacker_redis(outside / "redis.sock")
    # the peer check on its own
    with pytest.raises(RedisSocketUnsafe, match=f"runs as another user \\(owner uid {uid}\\)"):
        ping_socket(outside / "redis.sock")
    _make_dirs_as(0, 0, 0o700, sock.parent.parent, sock.parent)
    os.rename(outside / "redis.sock", sock)  # the listening socket follows its inode
    os.chown(sock, 0, 0, follow_symlinks=False)
    with pytest.raises(RedisSocketUnsafe) as caught:
        srv.ensure()
    assert str(sock) in str(caught.value) and f"runs as another user (owner uid {uid})" in str(caught.value)
    assert theirs.dbsize() == 0
    assert srv.pid is None


def _socket_of(data: Path) -> Path:
    return EmbeddedRedis(data).socket_path


def _tmp_uid_dir(data: Path) -> Path:
    return _socket_of(data).parent.parent


def _digest_dir(data: Path) -> Path:
    return _socket_of(data).parent


def _foreign_dir(path: Path) -> None:
    uid, gid = _nobody()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _make_dirs_as(uid, gid, 0o700, path)


def _wide_dir(mode: int) -> MakePath:
    def make(path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _make_dirs_as(0, 0, mode, path)
    return make


def _symlink_to_private_dir(path: Path) -> None:
    target = path.with_name(path.name + "-real")
    _make_dirs_as(0, 0, 0o700, target)
    path.symlink_to(target)


def _plain_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text("")


def _unbound_socket_owned_by_nobody(path: Path) -> None:
    path.parent.parent.mkdir(mode=0o700)
    path.parent.mkdir(mode=0o700)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()
    os.chown(path, *_nobody(), follow_symlinks=False)


@ROOT_ONLY
@pytest.mark.parametrize("long_path, where, make, problem", [
    # the temp fallback's tiermem-<uid>, made by another user first
    (True, _tmp_uid_dir, _foreign_dir, "belongs to another user"),
    # ours, but every user may write in it: someone could have put their hash dir there
    (True, _tmp_uid_dir, _wide_dir(0o777), "can write in it"),
    # ours, group-writable
    (True, _tmp_uid_dir, _wide_dir(0o770), "can write in it"),
    # a symlink, even to a private dir of ours: where it leads can change
    (True, _tmp_uid_dir, _symlink_to_private_dir, "symlink"),
    # not a directory at all
    (True, _tmp_uid_dir, _plain_file, "not a directory"),
    # the hash dir, made by another user inside our private tiermem-<uid>
    (True, _digest_dir, _foreign_dir, "belongs to another user"),
    # the hash dir, ours but writable by others
    (True, _digest_dir, _wide_dir(0o757), "can write in it"),
    # a socket file of another uid in our private dirs
    (True, _socket_of, _unbound_socket_owned_by_nobody, "belongs to another user"),
    # the data dir's own redis dir (short path), another user's
    (False, lambda data: data / "redis", _foreign_dir, "belongs to another user"),
    # the data dir's own redis dir, ours but writable by all
    (False, lambda data: data / "redis", _wide_dir(0o777), "can write in it"),
], ids=["tmp-uid-dir-foreign", "tmp-uid-dir-0777", "tmp-uid-dir-0770", "tmp-uid-dir-symlink", "tmp-uid-dir-file",
        "hash-dir-foreign", "hash-dir-0757", "socket-foreign", "data-redis-dir-foreign", "data-redis-dir-0777"])
def test_unsafe_socket_dirs_are_refused(tmp_path: Path, shared_tmp: Path, long_path: bool,
                                        where: Callable[[Path], Path], make: MakePath, problem: str) -> None:
    data = _long_data_dir(tmp_path) if long_path else tmp_path / "data"
    path = where(data)
    make(path)
    srv = EmbeddedRedis(data)
    with pytest.raises(RedisSocketUnsafe, match=problem) as caught:
        srv.ensure()
    assert caught.value.path == str(path)
    assert isinstance(caught.value, PermissionError)  # the nearest built-in
    assert srv.pid is None and not srv.pidfile.exists()  # nothing started


def test_world_writable_temp_dir_without_sticky_bit_is_refused(tmp_path: Path, shared_tmp: Path) -> None:
    os.chmod(shared_tmp, 0o777)  # anyone could rename tiermem-<uid> away and put theirs there
    srv = EmbeddedRedis(_long_data_dir(tmp_path))
    with pytest.raises(RedisSocketUnsafe, match="not sticky"):
        srv.ensure()
    assert not (shared_tmp / f"tiermem-{os.getuid()}").exists()


@pytest.mark.parametrize("ready", [
    # a fresh temp dir: tiermem makes tiermem-<uid> and the hash dir, both 0700
    "fresh",
    # left by an earlier run, readable by others (an older umask): narrowed, not refused
    "readable",
])
def test_the_temp_socket_still_works(tmp_path: Path, shared_tmp: Path, ready: str) -> None:
    data = _long_data_dir(tmp_path)
    if ready == "readable":
        for d in (_tmp_uid_dir(data), _digest_dir(data)):
            d.mkdir(mode=0o755)
            os.chmod(d, 0o755)
    with Memory(Config(data_dir=data), embedder=HashEmbedder(), background_indexing=False) as mem:
        mem.append("c1", {"role": "user", "content": "my bank PIN is 4711"})
        assert "4711" in str(mem.context("c1", budget=500).messages)
    srv = EmbeddedRedis(data)
    try:
        assert ping_socket(srv.socket_path)
        for d in (_tmp_uid_dir(data), _digest_dir(data)):
            st = os.lstat(d)
            assert st.st_uid == os.getuid() and st.st_mode & 0o777 == 0o700
        # the hot tier really is in the server at that socket
        client = redis.Redis(unix_socket_path=str(srv.socket_path), socket_timeout=2)
        try:
            assert client.dbsize() > 0
        finally:
            client.close()
    finally:
        pid = srv.pid
        srv.stop()
        if pid is not None and pid_alive(pid):
            kill_hard(pid)
