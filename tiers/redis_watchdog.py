"""The watchdog of an embedded redis-server: runs it, and stops it when nobody uses it.

Started by `tiers.redis_server.EmbeddedRedis` as a script (by path, with `python -I -S`,
so it imports nothing but the standard library and starts in ~20 ms). Every start of the
hot tier waits for it, so it imports only what it needs: no argparse, pathlib or
subprocess (with what they pull in, `re`, `locale`, `threading`, `gettext`, `urllib`,
about 40% of its start-up): its few options are parsed by hand and the server is
started with `os.posix_spawnp`. The launcher waits
while this script forks a daemon and reports "ready" or why not; the daemon then lives in
its own session, outside the process group of whoever started it (so a Ctrl-C, SIGTERM
or kill -9 of the CLI or of `serve` does not reach it).

Invariants:

- **One redis-server per watchdog, reaped.** In start mode the server is the daemon's
  child (`--daemonize no`), so its exit is noticed at once and it never lingers as a
  zombie (PID 1 in containers often reaps nothing). In adopt mode (a server whose
  watchdog was killed) it watches a pid it did not start.
- **Idle means no client and no command.** Every tick it asks the server for INFO on a
  fresh connection: `connected_clients` above one (its own) or `total_commands_processed`
  grown by more than its own INFO is use. Each process of tiermem keeps a pooled
  connection open while it lives, so the server outlives no user and survives every
  user that still runs. After `idle_timeout_s` without use (0: never) it re-checks under
  the launch lock (which `ensure()` and `stop()` take) and shuts the server down.
- **Never orphaned.** When the data dir's redis directory is removed or replaced, or the
  socket file is removed or replaced (the server can then never be reached again), it
  SIGKILLs the server: a clean shutdown would unlink the socket path, which may by then
  belong to a newer server. It exits too when the watchdog pidfile names another
  process (a newer watchdog took over).
- **Talks to its own server only.** Before a SHUTDOWN it checks that the server on the
  socket reports the pid it watches.
- It deletes no file but its own pidfile, and that only while the file names it; the
  server removes its socket and pidfile on a clean shutdown, and a crash's leftovers are
  cleared by the next `ensure()`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import signal
import socket
import sys
import time

READY = b"ok"
PING = b"*1\r\n$4\r\nPING\r\n"
INFO = b"*1\r\n$4\r\nINFO\r\n"
SHUTDOWN = b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n"
IO_TIMEOUT_S = 2.0
# its own INFO per tick: a tick that sees no more than this many new commands saw none
OWN_COMMANDS_PER_TICK = 1
KILL_GRACE_S = 5.0
# without pidfd_open (macOS), how often a tick's sleep asks whether the server exited
CHILD_POLL_S = 0.01
# its options, each followed by its value: the names EmbeddedRedis._spawn_watchdog passes
OPTIONS = ("--state-dir", "--socket", "--logfile", "--pidfile-name", "--lock-name",
           "--idle-timeout", "--interval", "--start-timeout", "--adopt")
OPTIONAL = {"--start-timeout": "10.0", "--adopt": "0"}
USAGE = ("usage: tiermem-redis-watchdog --state-dir DIR --socket PATH --logfile PATH "
         "--pidfile-name NAME --lock-name NAME --idle-timeout S --interval S "
         "[--start-timeout S] (--adopt PID | -- redis-server ARGS...)")


class _Child:
    """The server, started as our child with `os.posix_spawnp` (what subprocess.Popen would
    do, without importing subprocess): stdin /dev/null, stdout and stderr to `log_fd`, the
    signals Python ignores (SIGPIPE, SIGXFSZ) at their defaults again, as Popen resets them.
    Nothing else is inherited: every descriptor Python opens is close-on-exec (PEP 446),
    and the launcher starts us with none but stdio."""

    def __init__(self, args: list[str], log_fd: int) -> None:
        resets = [getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, name)]
        self.pid = os.posix_spawnp(args[0], args, os.environ, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, log_fd, 1),
            (os.POSIX_SPAWN_DUP2, log_fd, 2),
        ], setsigdef=resets)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit status once it has exited (reaping it: no zombie lingers), else None."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped already: only we wait for it, so it is gone
                self.returncode = -1
            else:
                if pid == self.pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _recv_reply(sock: socket.socket) -> bytes:
    """One RESP reply: a simple line, an error, or a bulk string (INFO's)."""
    buf = b""
    while b"\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n")
    if not head.startswith(b"$"):
        return head
    size = int(head[1:])
    while len(rest) < size + 2:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        rest += chunk
    return rest[:size]


def _ask(socket_path: str, command: bytes) -> bytes | None:
    """Send one command on a fresh connection; None when the server cannot be reached."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(IO_TIMEOUT_S)
            s.connect(socket_path)
            s.sendall(command)
            return _recv_reply(s)
    except (OSError, ValueError):
        return None


def _info(socket_path: str) -> dict[str, str] | None:
    reply = _ask(socket_path, INFO)
    if reply is None:
        return None
    out: dict[str, str] = {}
    for line in reply.decode(errors="replace").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key] = value.strip()
    return out


def _ident(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _stat_fields(pid: int) -> list[str] | None:
    """`/proc/<pid>/stat` after the command name (which may hold spaces and parentheses),
    from field 3 (the state) on; None without procfs or such a process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()
    except OSError:
        return None


def pid_alive(pid: int) -> bool:
    """True when `pid` runs and is not a zombie (PID 1 in containers often never reaps
    orphaned daemons, so a SIGKILLed server can linger as a zombie and fool kill(pid, 0)).
    Without procfs (macOS), kill(0) is all there is. The launcher uses this one too."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _stat_fields(pid)
    return fields is None or fields[:1] not in (["Z"], ["X"])


def process_start_ticks(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (`/proc/<pid>/stat` field 22), or None
    without procfs or such a process. Tells a pid's incarnations apart: a restarted
    container's PID 1 has the pid of the one killed, never its start time."""
    fields = _stat_fields(pid)
    # fields from 3 on: starttime (22) is the 20th
    return int(fields[19]) if fields is not None and len(fields) > 19 and fields[19].isdigit() else None


class Watchdog:
    def __init__(self, opts: Options) -> None:
        self.state_dir: str = opts.state_dir
        self.socket_path: str = opts.socket
        self.pidfile = os.path.join(opts.state_dir, opts.pidfile_name)
        self.lockfile = os.path.join(opts.state_dir, opts.lock_name)
        self.idle_timeout_s: float = opts.idle_timeout
        self.interval_s: float = opts.interval
        self.child: _Child | None = None
        # readable once the child server exits (Linux >= 5.3), so a tick's sleep ends then
        # (stop() waits for us); elsewhere a tick polls every CHILD_POLL_S
        self.child_fd: int | None = None
        self.redis_pid: int = opts.adopt or 0
        self.dir_ident = _ident(self.state_dir)
        self.socket_ident: tuple[int, int] | None = None
        self.stopping = False

    # -- start ------------------------------------------------------------------------------

    def start(self, args: list[str], logfile: str, timeout_s: float) -> str:
        """Start the server as our child; "ok", or why it did not come up."""
        # early failures (bad arguments) go to the log too; 0600 under our umask, as open()'s
        log_fd = os.open(logfile, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            self.child = _Child(args, log_fd)
        finally:
            os.close(log_fd)
        self.redis_pid = self.child.pid
        with contextlib.suppress(AttributeError, OSError):  # no pidfd_open: macOS, older Linux
            self.child_fd = os.pidfd_open(self.child.pid)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if _ask(self.socket_path, PING) == b"+PONG":
                return READY.decode()
            code = self.child.poll()
            if code is not None:
                return f"exit status {code}: {_tail(logfile)}"
            time.sleep(0.005)
        self._kill()
        return f"no answer on {self.socket_path} after {timeout_s:.0f} s: {_tail(logfile)}"

    # -- watch ------------------------------------------------------------------------------

    def _gone(self) -> bool:
        """The server exited (or, adopted, is no longer running)."""
        if self.child is not None:
            return self.child.poll() is not None
        return not pid_alive(self.redis_pid)

    def _orphaned(self) -> str | None:
        """Why the server can no longer be reached by anyone, or None."""
        if _ident(self.state_dir) != self.dir_ident:
            return "data dir removed or replaced"
        if _ident(self.socket_path) != self.socket_ident:
            return "socket removed or replaced"
        return None

    def _superseded(self) -> bool:
        try:
            with open(self.pidfile) as fh:
                return fh.read().strip() != str(os.getpid())
        except OSError:
            return True

    def _sleep(self) -> None:
        if self.child_fd is not None:
            select.select([self.child_fd], [], [], self.interval_s)  # wakes at once when the server exits
        elif self.child is not None:
            deadline = time.monotonic() + self.interval_s
            while self.child.poll() is None and time.monotonic() < deadline:
                time.sleep(CHILD_POLL_S)
        else:
            time.sleep(self.interval_s)

    def run(self) -> None:
        self.socket_ident = _ident(self.socket_path)
        last_total: int | None = None
        last_use = time.monotonic()
        while not self._gone():
            if self.stopping:
                self._shutdown()
                break
            why = self._orphaned()
            if why is not None:
                self._kill()
                break
            if self._superseded():
                break
            info = _info(self.socket_path)
            if info is not None:
                total = int(info.get("total_commands_processed", "0") or 0)
                clients = int(info.get("connected_clients", "0") or 0)
                used = clients > 1 or last_total is None or total - last_total > OWN_COMMANDS_PER_TICK
                last_total = total
                if used:
                    last_use = time.monotonic()
                elif self.idle_timeout_s > 0 and time.monotonic() - last_use >= self.idle_timeout_s:
                    if self._stop_if_still_idle():
                        break
                    last_total = None  # the lock was busy: someone is starting or stopping
            self._sleep()
        self._release_pidfile()

    def _stop_if_still_idle(self) -> bool:
        try:
            fd = os.open(self.lockfile, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in (errno.EAGAIN, errno.EACCES):
                    return False
                raise
            first = _info(self.socket_path)
            again = _info(self.socket_path)
            if first is None or again is None:
                return False
            idle = (int(again.get("connected_clients", "0") or 0) <= 1
                    and int(again.get("total_commands_processed", "0") or 0)
                    - int(first.get("total_commands_processed", "0") or 0) <= OWN_COMMANDS_PER_TICK)
            if idle:
                self._shutdown()
            return idle
        finally:
            os.close(fd)

    # -- stop -------------------------------------------------------------------------------

    def _shutdown(self) -> None:
        """SHUTDOWN NOSAVE if the server on the socket is ours, else SIGKILL ours."""
        info = _info(self.socket_path)
        if info is not None and info.get("process_id") == str(self.redis_pid) and not self._orphaned():
            _ask(self.socket_path, SHUTDOWN)  # the server closes the connection as it exits
            if self._wait(KILL_GRACE_S):
                return
        self._kill()

    def _wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self._gone():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _kill(self) -> None:
        if self.redis_pid <= 0 or self._gone():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.redis_pid, signal.SIGKILL)
        self._wait(KILL_GRACE_S)

    def _release_pidfile(self) -> None:
        if not self._superseded():
            with contextlib.suppress(OSError):
                os.unlink(self.pidfile)


def _tail(logfile: str, lines: int = 5) -> str:
    try:
        with open(logfile, errors="replace") as fh:
            tail = fh.read().strip().splitlines()[-lines:]
    except OSError:
        return f"no log at {logfile}"
    return " | ".join(tail) if tail else "empty log"


def _write_pidfile(path: str) -> None:
    """Write this process's pid to `path` whole (a temporary file renamed over it). A
    write that fails (a full disk: ENOSPC at the write or the close) removes the
    temporary file: each failed start left one `<name>.<pid>.tmp` behind, for good."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{os.getpid()}\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class Options:
    """The parsed command line (argparse's Namespace, without importing argparse)."""

    def __init__(self, values: dict[str, str]) -> None:
        self.state_dir = values["--state-dir"]
        self.socket = values["--socket"]
        self.logfile = values["--logfile"]
        self.pidfile_name = values["--pidfile-name"]
        self.lock_name = values["--lock-name"]
        self.idle_timeout = float(values["--idle-timeout"])
        self.interval = float(values["--interval"])
        self.start_timeout = float(values["--start-timeout"])
        self.adopt = int(values["--adopt"])


def _parse(argv: list[str]) -> tuple[Options, list[str]]:
    """`--name value` pairs (or `--name=value`), then the server's command line after `--`.
    A usage error exits with status 2 and says what is wrong, as argparse did."""
    if "--" in argv:
        cut = argv.index("--")
        argv, server_args = argv[:cut], argv[cut + 1:]
    else:
        server_args = []
    values = dict(OPTIONAL)
    i = 0
    try:
        while i < len(argv):
            name, eq, value = argv[i].partition("=")
            if name not in OPTIONS:
                raise ValueError(f"unrecognized argument {argv[i]!r}")
            if not eq:
                if i + 1 >= len(argv):
                    raise ValueError(f"{name} expects a value")
                value = argv[i + 1]
                i += 1
            values[name] = value
            i += 1
        missing = [name for name in OPTIONS if name not in values]
        if missing:
            raise ValueError(f"the following arguments are required: {', '.join(missing)}")
        return Options(values), server_args
    except ValueError as e:  # a missing option, or a number that is not one
        sys.stderr.write(f"{USAGE}\ntiermem-redis-watchdog: error: {e}\n")
        raise SystemExit(2) from None


def main(argv: list[str]) -> int:
    opts, server_args = _parse(argv)
    if not opts.adopt and not server_args:
        print("give the redis-server command line after --, or --adopt PID", file=sys.stderr)
        return 2
    r, w = os.pipe()
    if os.fork() > 0:
        # the launcher's child: relay the daemon's verdict, then exit so the launcher goes on
        os.close(w)
        chunks = []
        while chunk := os.read(r, 65536):
            chunks.append(chunk)
        reply = b"".join(chunks)
        if reply == READY:
            return 0
        sys.stderr.write(reply.decode(errors="replace") or "the watchdog died while starting the server")
        return 1
    os.close(r)
    # the daemon: no inherited stdio (the launcher waits for EOF on its pipes)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    dog = Watchdog(opts)
    signal.signal(signal.SIGTERM, lambda *_: setattr(dog, "stopping", True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    pidfile = os.path.join(opts.state_dir, opts.pidfile_name)
    try:
        _write_pidfile(pidfile)
        verdict: str = "ok" if opts.adopt else dog.start(server_args, opts.logfile, opts.start_timeout)
    except Exception as exc:  # reported to the launcher, which raises RedisStartError
        verdict = f"{type(exc).__name__}: {exc}"
    os.write(w, verdict.encode())
    os.close(w)
    if verdict.encode() != READY:
        dog._kill()
        dog._release_pidfile()
        return 1
    try:
        dog.run()
    finally:
        dog._release_pidfile()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
