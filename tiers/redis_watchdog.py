"""The watchdog of an embedded redis-server: runs it, and stops it when nobody uses it.

Started by `tiers.redis_server.EmbeddedRedis` as a script (by path, with `python -I -S`,
so it imports nothing but the standard library and starts in ~20 ms). The launcher waits
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

import argparse
import contextlib
import errno
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

READY = b"ok"
PING = b"*1\r\n$4\r\nPING\r\n"
INFO = b"*1\r\n$4\r\nINFO\r\n"
SHUTDOWN = b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n"
IO_TIMEOUT_S = 2.0
# its own INFO per tick: a tick that sees no more than this many new commands saw none
OWN_COMMANDS_PER_TICK = 1
KILL_GRACE_S = 5.0


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
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
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
    def __init__(self, opts: argparse.Namespace) -> None:
        self.state_dir: str = opts.state_dir
        self.socket_path: str = opts.socket
        self.pidfile = Path(opts.state_dir) / opts.pidfile_name
        self.lockfile = Path(opts.state_dir) / opts.lock_name
        self.idle_timeout_s: float = opts.idle_timeout
        self.interval_s: float = opts.interval
        self.child: subprocess.Popen[bytes] | None = None
        self.redis_pid: int = opts.adopt or 0
        self.dir_ident = _ident(self.state_dir)
        self.socket_ident: tuple[int, int] | None = None
        self.stopping = False

    # -- start ------------------------------------------------------------------------------

    def start(self, args: list[str], logfile: str, timeout_s: float) -> str:
        """Start the server as our child; "ok", or why it did not come up."""
        with open(logfile, "ab") as log:  # early failures (bad arguments) go to the log too
            self.child = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                          close_fds=True)
        self.redis_pid = self.child.pid
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
            return self.pidfile.read_text().strip() != str(os.getpid())
        except OSError:
            return True

    def _sleep(self) -> None:
        if self.child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.child.wait(timeout=self.interval_s)  # wakes at once when the server exits
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
                self.pidfile.unlink()


def _tail(logfile: str, lines: int = 5) -> str:
    try:
        tail = Path(logfile).read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return f"no log at {logfile}"
    return " | ".join(tail) if tail else "empty log"


def _write_pidfile(path: Path) -> None:
    """Write this process's pid to `path` whole (a temporary file renamed over it). A
    write that fails (a full disk: ENOSPC at the write or the close) removes the
    temporary file: each failed start left one `<name>.<pid>.tmp` behind, for good."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{os.getpid()}\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" in argv:
        cut = argv.index("--")
        argv, server_args = argv[:cut], argv[cut + 1:]
    else:
        server_args = []
    p = argparse.ArgumentParser(prog="tiermem-redis-watchdog")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--socket", required=True)
    p.add_argument("--logfile", required=True)
    p.add_argument("--pidfile-name", required=True)
    p.add_argument("--lock-name", required=True)
    p.add_argument("--idle-timeout", type=float, required=True)
    p.add_argument("--interval", type=float, required=True)
    p.add_argument("--start-timeout", type=float, default=10.0)
    p.add_argument("--adopt", type=int, default=0, help="watch this running server instead of starting one")
    return p.parse_args(argv), server_args


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
    pidfile = Path(opts.state_dir) / opts.pidfile_name
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
