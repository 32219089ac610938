"""A child process started on a word, for the tests that watch another process's long
write from their own (the label passes: tests/label_pass_worker.py; a PostgreSQL
rebuild: tests/pg_rebuild_worker.py).

The child opens its store and prints "ready"; at a line on stdin it runs its work and
prints one JSON line: {"ended": the wall-clock time the work returned, and what the work
reported}, or {"error": the exception's type name, "message": its text} (`serve`). The
test's side: `start` (the child ready and told to go), `wait_for` (until the child's
work holds a lock the test can see), `answer` (its next line) and `stop`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# the child opened its store, its work took its lock, or it ended once told to, by then
STAGE_TIMEOUT_S = 120.0
POLL_S = 0.005  # how often the test looks for the child's lock


# -- the child's side ------------------------------------------------------------------


def serve(work: Callable[[], dict[str, Any]]) -> None:
    """Print "ready", wait for a line on stdin, run `work` and print its answer line."""
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        report = work()
        print(json.dumps({"ended": time.time(), **report}), flush=True)
    except Exception as exc:  # the answer the test checks: which error, not a traceback
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)


# -- the test's side -------------------------------------------------------------------


def start(worker: Path, *args: str) -> subprocess.Popen[str]:
    """`worker` (a script importing the project from this checkout) running `args`: ready, told to go."""
    child = subprocess.Popen([sys.executable, str(worker), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert answer(child) == "ready"
    assert child.stdin is not None
    child.stdin.write("go\n")
    child.stdin.flush()
    return child


def answer(child: subprocess.Popen[str]) -> Any:
    """The child's next line: its JSON answer, or a word ("ready", a stage it reached)."""
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line, f"the child ended (exit status {child.wait(timeout=STAGE_TIMEOUT_S)})"
    return json.loads(line) if line.startswith("{") else line.strip()


def wait_for(held: Callable[[], bool], child: subprocess.Popen[str], what: str) -> None:
    """Until `held()` (the child's work holds its lock), while the child runs, STAGE_TIMEOUT_S at most."""
    deadline = time.monotonic() + STAGE_TIMEOUT_S
    while not held():
        assert child.poll() is None and time.monotonic() < deadline, what
        time.sleep(POLL_S)


def stop(child: subprocess.Popen[str]) -> None:
    """Let the child end (its stdin closed), killed if it has not within STAGE_TIMEOUT_S."""
    if child.stdin is not None:
        child.stdin.close()
    try:
        child.wait(timeout=STAGE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
