"""The embedded Redis's socket is used only when no other local user can have made it.

A data dir whose `<data_dir>/redis/redis.sock` is too long for `sun_path` gets its socket
at a predictable `$TMPDIR/tiermem-<uid>/<hash>/redis.sock`. Another user (`nobody` here:
the servers below really run under that uid) who made those directories first and ran a
redis-server there got every hot-tier message, and could rewrite them: `ensure()` pinged
the socket and used whatever answered before it checked any directory. Now the
directories and the socket are lstat'ed before any ping, and the answering server's uid
is checked (SO_PEERCRED); anything foreign is refused, naming the path, owner and mode.

A directory of ours that others can write (a Kubernetes fsGroup makes every directory of
a volume 2770 at each mount) is not refused but narrowed to 0700, and whatever another
user put in it while it was open is removed before anything is pinged.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import stat
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
from tiermem.tiers.redis_server import PRIVATE_DIR_MODE, EmbeddedRedis, find_redis_binary, ping_socket
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


def _foreign_dir_in_open_parent(path: Path) -> None:
    path.parent.mkdir(mode=0o777)
    os.chmod(path.parent, 0o777)  # ours, but anyone could make their directory in it
    _make_dirs_as(*_nobody(), 0o700, path)


def _symlink_to_private_dir(path: Path) -> None:
    target = path.with_name(path.name + "-real")
    _make_dirs_as(0, 0, 0o700, target)
    path.symlink_to(target)


def _plain_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text("")


def _plain_file_of_nobody(path: Path) -> None:
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_text("")
    os.chown(path, *_nobody())


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
    # ours but open to all: narrowed, yet the hash dir another user made in it is theirs
    (True, _digest_dir, _foreign_dir_in_open_parent, "belongs to another user"),
    # a symlink, even to a private dir of ours: where it leads can change
    (True, _tmp_uid_dir, _symlink_to_private_dir, "symlink"),
    # not a directory at all
    (True, _tmp_uid_dir, _plain_file, "not a directory"),
    # the hash dir, made by another user inside our private tiermem-<uid>
    (True, _digest_dir, _foreign_dir, "belongs to another user"),
    # a socket file of another uid in our private dirs
    (True, _socket_of, _unbound_socket_owned_by_nobody, "belongs to another user"),
    # a plain file of another uid at the socket path (one of ours is a stale leftover)
    (True, _socket_of, _plain_file_of_nobody, "not a socket"),
    # the data dir's own redis dir (short path), another user's
    (False, lambda data: data / "redis", _foreign_dir, "belongs to another user"),
], ids=["tmp-uid-dir-foreign", "hash-dir-foreign-in-open-tmp-uid-dir", "tmp-uid-dir-symlink", "tmp-uid-dir-file",
        "hash-dir-foreign", "socket-foreign", "socket-path-file-foreign", "data-redis-dir-foreign"])
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


@pytest.mark.parametrize("mode, who", [
    (0o777, "every user"),  # anyone could rename tiermem-<uid> away and put theirs there
    (0o770, "its group"),  # so could any member of its group
    (0o2770, "its group"),  # a Kubernetes fsGroup volume as TMPDIR: setgid is not sticky
], ids=["0777", "0770", "2770"])
def test_shared_temp_dir_without_sticky_bit_is_refused(tmp_path: Path, shared_tmp: Path, mode: int,
                                                       who: str) -> None:
    os.chmod(shared_tmp, mode)
    srv = EmbeddedRedis(_long_data_dir(tmp_path))
    with pytest.raises(RedisSocketUnsafe, match=f"{who} can write in it and it is not sticky") as caught:
        srv.ensure()
    assert caught.value.path == str(shared_tmp) and caught.value.mode == mode
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


FSGROUP_DIR_BITS = 0o2070  # kubelet: g+rwx and setgid on every directory of the volume
FSGROUP_FILE_BITS = 0o060  # and g+rw on every other file
Plant = Callable[[Path, StartServer], tuple[redis.Redis, list[Path], Path]]


def _fsgroup_gid() -> int:
    """The pod's fsGroup: a group `nobody` is in when we are root, else our own."""
    return _nobody()[1] if os.getuid() == 0 else os.getgid()


def _kubelet_fsgroup(root: Path) -> None:
    """What kubelet does to a volume with an fsGroup at every mount (fsGroupChangePolicy
    Always, the default): chgrp everything, g+rwx and setgid on directories, g+rw on files."""
    for dirpath, _dirs, files in os.walk(root):
        for p in [dirpath, *(os.path.join(dirpath, f) for f in files)]:
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                continue
            os.chown(p, -1, _fsgroup_gid())
            bits = FSGROUP_DIR_BITS if stat.S_ISDIR(st.st_mode) else FSGROUP_FILE_BITS
            os.chmod(p, stat.S_IMODE(st.st_mode) | bits)


def _stop(srv: EmbeddedRedis) -> None:
    pid = srv.pid
    srv.stop()
    if pid is not None and pid_alive(pid):
        kill_hard(pid)


def test_fsgroup_volume_after_a_pod_restart_is_narrowed_and_used(tmp_path: Path) -> None:
    """The reviewer's k8s_fsgroup.py: before, the second pod raised RedisSocketUnsafe
    (`<data_dir>/redis` was 2770) and could not start."""
    data = tmp_path / "data"
    srv = EmbeddedRedis(data)
    assert srv.socket_path.parent == data / "redis"  # the data dir's own socket, on the volume
    try:
        with Memory(Config(data_dir=data), embedder=HashEmbedder(), background_indexing=False) as mem:
            mem.append("c1", {"role": "user", "content": "hello from pod 1"})
        srv.stop()  # the pod is gone, and its server with it
        _kubelet_fsgroup(data)
        assert stat.S_IMODE(os.stat(data / "redis").st_mode) == 0o2770
        with Memory(Config(data_dir=data), embedder=HashEmbedder(), background_indexing=False) as mem:
            assert "hello from pod 1" in str(mem.context("c1", budget=500).messages)
        st = os.lstat(data / "redis")
        assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == PRIVATE_DIR_MODE
        assert ping_socket(srv.socket_path)  # a server of ours answers there again
    finally:
        _stop(srv)


def _open_dir(path: Path, mode: int) -> None:
    """A directory of ours that the fsGroup (`nobody`'s group) or everyone can write."""
    path.mkdir(exist_ok=True)
    os.chown(path, -1, _fsgroup_gid())
    os.chmod(path, mode)


def _their_server_in_fsgroup_redis_dir(data: Path, start: StartServer) -> tuple[redis.Redis, list[Path], Path]:
    _open_dir(data, 0o2770)
    _open_dir(data / "redis", 0o2770)
    sock = data / "redis" / "redis.sock"
    return start(sock), [data / "redis"], sock


def _their_pidfile_in_fsgroup_redis_dir(data: Path, start: StartServer) -> tuple[redis.Redis, list[Path], Path]:
    _open_dir(data, 0o2770)
    _open_dir(data / "redis", 0o2770)
    outside = data.parent / "att-sock"
    _make_dirs_as(*_nobody(), 0o777, outside)
    theirs = start(outside / "redis.sock")
    pidfile = data / "redis" / "redis.pid"  # names their server: one to SIGKILL as stale
    pidfile.write_text(f"{theirs.info()['process_id']}\n")
    os.chown(pidfile, *_nobody())
    return theirs, [data / "redis"], pidfile


def _our_pidfile_rewritten_in_fsgroup_redis_dir(data: Path,
                                                start: StartServer) -> tuple[redis.Redis, list[Path], Path]:
    """A pidfile of ours (a killed pod's) that kubelet made 0660: a group member could
    write their server's pid into it without owning it."""
    _open_dir(data, 0o2770)
    _open_dir(data / "redis", 0o2770)
    outside = data.parent / "att-sock"
    _make_dirs_as(*_nobody(), 0o777, outside)
    theirs = start(outside / "redis.sock")
    pidfile = data / "redis" / "redis.pid"
    pidfile.write_text(f"{theirs.info()['process_id']}\n")
    os.chown(pidfile, -1, _fsgroup_gid())
    os.chmod(pidfile, 0o660)
    return theirs, [data / "redis"], pidfile


def _their_server_in_open_tmp_dirs(data: Path, start: StartServer) -> tuple[redis.Redis, list[Path], Path]:
    sock = _socket_of(data)
    _open_dir(sock.parent.parent, 0o777)
    _open_dir(sock.parent, 0o777)
    return start(sock), [sock.parent.parent, sock.parent], sock


def _their_symlink_in_open_hash_dir(data: Path, start: StartServer) -> tuple[redis.Redis, list[Path], Path]:
    sock = _socket_of(data)
    _open_dir(sock.parent.parent, 0o711)  # others may pass, not write: only narrowed later
    _open_dir(sock.parent, 0o757)
    outside = sock.parent.parent.parent / "att-sock"
    _make_dirs_as(*_nobody(), 0o777, outside)
    theirs = start(outside / "redis.sock")
    sock.symlink_to(outside / "redis.sock")
    os.chown(sock, *_nobody(), follow_symlinks=False)
    return theirs, [sock.parent], sock


@ROOT_ONLY
@pytest.mark.parametrize("long_path, plant", [
    # fsGroup's 2770 <data_dir>/redis; a group member's redis-server on redis.sock
    (False, _their_server_in_fsgroup_redis_dir),
    # the same dir; a group member's redis.pid naming their server (SIGKILLed as stale before 1dd0062)
    (False, _their_pidfile_in_fsgroup_redis_dir),
    # the same dir; our own redis.pid, group-writable, rewritten to name their server
    (False, _our_pidfile_rewritten_in_fsgroup_redis_dir),
    # tiermem-<uid> and the hash dir ours but 0777; another user's server on redis.sock
    (True, _their_server_in_open_tmp_dirs),
    # the hash dir ours but 0757; another user's symlink redis.sock to their server
    (True, _their_symlink_in_open_hash_dir),
], ids=["fsgroup-redis-dir-their-socket", "fsgroup-redis-dir-their-pidfile", "fsgroup-redis-dir-our-pidfile",
        "tmp-dirs-0777-their-socket",
        "hash-dir-0757-their-symlink"])
def test_what_others_put_in_an_open_dir_of_ours_is_removed(
        tmp_path: Path, shared_tmp: Path, attacker_redis: StartServer, long_path: bool, plant: Plant) -> None:
    data = _long_data_dir(tmp_path) if long_path else shared_tmp / "data"  # `nobody` can reach shared_tmp
    theirs, opened, planted = plant(data, attacker_redis)
    srv = EmbeddedRedis(data)
    try:
        with Memory(Config(data_dir=data), embedder=HashEmbedder(), background_indexing=False) as mem:
            mem.append("c1", {"role": "user", "content": "my bank PIN is 4711"})
            assert "4711" in str(mem.context("c1", budget=500).messages)
        # their server got nothing and still runs (not SIGKILLed as our stale server);
        # what they put there is gone or ours now
        assert theirs.dbsize() == 0
        assert not os.path.lexists(planted) or os.lstat(planted).st_uid == os.getuid()
        for d in opened:
            st = os.lstat(d)
            assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == PRIVATE_DIR_MODE
        ours = redis.Redis(unix_socket_path=str(srv.socket_path), socket_timeout=2)
        try:
            assert ours.dbsize() > 0  # the hot tier is in our server
        finally:
            ours.close()
    finally:
        _stop(srv)
