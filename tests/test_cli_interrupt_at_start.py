"""Ctrl-C while a command starts: `serve` and `consolidate --watch` stop as they do later
(exit 0, no error line); any other command says it in one line and exits 130; never a
traceback, whether the CLI's modules were still loading (numpy) or the command had begun.

Before: a Ctrl-C while `tiermem` imported its modules (about the first second) ended with
a KeyboardInterrupt traceback and the process killed by SIGINT (the console script
imported tiermem.cli, and tiermem's __init__ everything, before any handler); one while
`serve` loaded its app or opened the store, or `consolidate --watch` loaded its
scheduler, exited 130 with "error: interrupted; a write in one transaction either
committed whole or not at all", nothing having been written. The instant cannot be timed
from outside (it moves with the machine's load), so the child sends itself a real SIGINT
as a named module is first imported (`InterruptAt`): the one thing the child changes is
when the signal comes. Real process, real signal, real SQLite file, the real embedded
Redis where the command starts it."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("clean_env")

RUN_TIMEOUT_S = 120
SIGINT_EXIT = 130  # 128 + SIGINT, as a shell shows a process Ctrl-C ended
STARTING_LINE = "error: interrupted while starting; nothing was done"

# The CLI as the console script runs it (`script`: tiermem.entry's main) or as
# `python -m tiermem.cli` (`module`), with a real SIGINT sent to its own process as
# argv[1] is first imported
CHILD = textwrap.dedent("""
    import importlib.abc, os, runpy, signal, sys

    target, how = sys.argv[1], sys.argv[2]

    class InterruptAt(importlib.abc.MetaPathFinder):
        fired = False

        def find_spec(self, name, path=None, module=None):
            if name == target and not self.fired:
                self.fired = True
                print("SIGINT at", name, file=sys.stderr, flush=True)
                os.kill(os.getpid(), signal.SIGINT)  # raised at this thread's next instruction
            return None

    sys.meta_path.insert(0, InterruptAt())
    sys.argv = ["tiermem", *sys.argv[3:]]
    if how == "script":
        from tiermem.entry import main
        main()
    else:
        runpy.run_module("tiermem.cli", run_name="__main__", alter_sys=True)
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    with Memory(Config(data_dir=d), hot=False, background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": "hello"})
    return d


# (module whose first import brings the Ctrl-C, how the CLI is run, command, exit, last stderr line)
CASES = [
    # an ordinary command while the CLI loads: one line, 130 (before: traceback, killed by SIGINT)
    ("numpy", "script", ["stats"], SIGINT_EXIT, STARTING_LINE),
    # the same run as `python -m tiermem.cli`
    ("numpy", "module", ["stats"], SIGINT_EXIT, STARTING_LINE),
    # the same with --debug before the command: the traceback, as for any error
    ("numpy", "script", ["--debug", "stats"], None, "KeyboardInterrupt"),
    # serve while the CLI loads: stopped, exit 0 (before: traceback)
    ("numpy", "script", ["serve", "--no-auth", "--port", "{port}"], 0, None),
    # consolidate --watch while the CLI loads: stopped, exit 0 (before: traceback)
    ("numpy", "script", ["consolidate", "--watch"], 0, None),
    # serve loading its app, the command begun: exit 0 (before: 130, "a write ... committed")
    ("tiermem.service", "script", ["serve", "--no-auth", "--port", "{port}"], 0, None),
    # serve with its store open, about to start uvicorn: exit 0, the store closed (before: 130)
    ("uvicorn", "script", ["serve", "--no-auth", "--port", "{port}"], 0, None),
    # consolidate --watch loading its scheduler: exit 0 (before: 130, "a write ... committed")
    ("tiermem.consolidation.scheduler", "script", ["consolidate", "--watch"], 0, None),
]


@pytest.mark.parametrize(("target", "how", "command", "code", "last"), CASES)
def test_interrupt_while_starting(data: Path, target: str, how: str, command: list[str], code: int | None,
                                  last: str | None) -> None:
    args = [a.format(port=free_port()) for a in command]
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, target, how, "--data-dir", str(data), *args],
                           capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    finally:
        EmbeddedRedis(data).stop()
    lines = r.stderr.strip().splitlines()
    assert lines and lines[0] == f"SIGINT at {target}", r.stderr[-2000:]  # the premise: it came then
    if code is None:  # --debug: Python's own end of a KeyboardInterrupt, its traceback shown
        assert "Traceback" in r.stderr and lines[-1] == last, r.stderr[-2000:]
        return
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "Aborted!" not in r.stderr, r.stderr[-2000:]
    assert "a write in one transaction" not in r.stderr, r.stderr[-2000:]
    if last is None:  # stopped: nothing said after the signal but what the start itself logs
        assert "error:" not in r.stderr, r.stderr[-2000:]
    else:
        assert lines[-1] == last and sum(line.startswith("error:") for line in lines) == 1, r.stderr[-2000:]


def test_console_script_is_the_light_entry_point() -> None:
    """The installed `tiermem` runs tiermem.entry (what the cases above run), which loads
    nothing slow before its Ctrl-C handling is in place."""
    scripts = {e.name: e.value for e in entry_points(group="console_scripts") if e.name == "tiermem"}
    assert scripts == {"tiermem": "tiermem.entry:main"}
    probe = subprocess.run([sys.executable, "-c", "import sys, tiermem.entry; print('numpy' in sys.modules)"],
                           capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert probe.stdout.strip() == "False", probe.stderr[-2000:]
