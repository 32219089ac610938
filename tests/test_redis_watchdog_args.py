"""The watchdog's command line, parsed by hand (tiers/redis_watchdog.py imports no
argparse: every embedded Redis start waits for its interpreter). The real script is run
as EmbeddedRedis runs it (`python -I -S <path>`): a usage error exits 2 naming the
problem and starts nothing; a full line parses to the values given."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tiermem.tiers.redis_server import WATCHDOG_SCRIPT
from tiermem.tiers.redis_watchdog import _parse

HANG_GUARD_POLLS = 12_000  # 10 ms apart: two minutes
BASE = ["--state-dir", "S", "--socket", "K", "--logfile", "L", "--pidfile-name", "P",
        "--lock-name", "X", "--idle-timeout", "300.0", "--interval", "1.0"]


@pytest.mark.parametrize(("argv", "says"), [
    (["--bogus", "1"], "unrecognized argument '--bogus'"),              # an unknown option
    (["--state-dir", "S"], "required: --socket"),                       # required ones missing
    (BASE[:-1], "--interval expects a value"),                          # the last value missing
    ([*BASE[:-1], "soon"], "could not convert string to float"),        # not a number
    ([*BASE, "--adopt", "x"], "invalid literal for int"),               # adopt pid not an int
    ([*BASE, "stray"], "unrecognized argument 'stray'"),                # a positional before --
])
def test_usage_error_exits_2_naming_it(tmp_path: Path, argv: list[str], says: str) -> None:
    proc = subprocess.run([sys.executable, "-I", "-S", str(WATCHDOG_SCRIPT), *argv],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr
    assert "usage: tiermem-redis-watchdog" in proc.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing started


@pytest.mark.parametrize(("extra", "start_timeout", "adopt", "server"), [
    ([], 10.0, 0, []),                                                  # the defaults
    (["--start-timeout", "2.5", "--adopt", "42"], 2.5, 42, []),         # adopt mode
    (["--start-timeout=3", "--", "redis-server", "--port", "0"], 3.0, 0,
     ["redis-server", "--port", "0"]),                                  # name=value; server's own options after --
])
def test_full_line_parses(extra: list[str], start_timeout: float, adopt: int, server: list[str]) -> None:
    opts, server_args = _parse([*BASE, *extra])
    assert (opts.state_dir, opts.socket, opts.logfile, opts.pidfile_name, opts.lock_name) == (
        "S", "K", "L", "P", "X")
    assert (opts.idle_timeout, opts.interval, opts.start_timeout, opts.adopt) == (300.0, 1.0, start_timeout, adopt)
    assert server_args == server


def test_script_imports_no_argparse_pathlib_or_subprocess() -> None:
    """What makes it start faster: neither is imported by the script as it runs."""
    probe = ("import runpy, sys; sys.argv = [sys.argv[1], '--bogus']\n"
             "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "print(sorted(m for m in ('argparse', 'pathlib', 'subprocess') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", probe, str(WATCHDOG_SCRIPT)],
                          capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stderr


def _sig_ignored(status: str, signum: int) -> bool:
    mask = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), 16)
    return bool(mask >> (signum - 1) & 1)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_child_started_as_popen_would(tmp_path: Path) -> None:
    """The server's start without subprocess: stdin /dev/null, stdout and stderr to the log,
    SIGPIPE at its default again (Python ignores it), the exit status read and reaped."""
    import os
    import signal

    from tiermem.tiers.redis_watchdog import _Child

    log = tmp_path / "log"
    script = ("readlink /proc/self/fd/0; cat /proc/self/status; echo to-stderr >&2; "
              "read -r line || echo eof; exit 7")
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        child = _Child(["sh", "-c", script], fd)  # found on PATH, as Popen finds it
    finally:
        os.close(fd)
    for _ in range(HANG_GUARD_POLLS):  # a guard against hanging, not a timing
        if child.poll() is not None:
            break
        time.sleep(0.01)
    assert child.returncode == 7
    out = log.read_text()
    assert out.splitlines()[0] == os.devnull          # stdin
    assert "to-stderr" in out and "eof" in out       # stderr to the log; stdin empty
    assert not _sig_ignored(out, signal.SIGPIPE)     # reset to its default, as Popen does
    with pytest.raises(ChildProcessError):           # reaped: no zombie left
        os.waitpid(child.pid, os.WNOHANG)


def test_missing_binary_is_an_error_of_the_start() -> None:
    """posix_spawnp reports a binary it cannot run as OSError in the watchdog (Popen did
    too), which reports it to the launcher instead of hanging."""
    from tiermem.tiers.redis_watchdog import _Child

    with pytest.raises(FileNotFoundError):
        _Child(["tiermem-no-such-redis-server"], 2)
