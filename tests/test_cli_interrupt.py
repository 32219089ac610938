"""Ctrl-C (SIGINT to the process group, as a terminal sends it) in the middle of a
command: one line saying what was left, exit 130, and the store consistent; import run
again finishes the job. Before: click's "Aborted!", exit 1, saying nothing of what was
committed. `consolidate --watch` keeps its clean stop (exit 0). Real console script,
real signal, real SQLite file."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("clean_env")

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
RUN_TIMEOUT_S = 180
# enough that the import runs for seconds after its first commit: the SIGINT follows that
# commit within a poll (POLL_S), and at 60 x 100 the first run was cut at 100 of 6,000
# messages (load ~10); 300 conversations made the rerun import 30,000 for nothing (34 -> 12 s)
CONVERSATIONS = 60
TURNS = 100
POLL_S = 0.05
SIGINT_EXIT = 130  # 128 + SIGINT, as a shell shows a process Ctrl-C ended


def committed(db: Path) -> int:
    """Messages committed so far (0 while the file or its table is not there yet)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])
    except sqlite3.Error:
        return 0


def interrupted(cmd: list[str], ready: Callable[[], bool]) -> subprocess.CompletedProcess[str]:
    """Run `cmd` in its own process group; SIGINT the group once `ready()` holds."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not ready() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(POLL_S)
    assert p.poll() is None, "the command finished before it could be interrupted"
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=RUN_TIMEOUT_S)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def test_import_interrupted_then_resumed(tmp_path: Path) -> None:
    src = tmp_path / "big.jsonl"
    with src.open("w") as fh:
        for c in range(CONVERSATIONS):
            msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} of conversation {c}"}
                    for i in range(TURNS)]
            fh.write(json.dumps({"conversation_id": f"c{c}", "messages": msgs}) + "\n")
    data = tmp_path / "data"
    db = data / "tiermem.db"
    r = interrupted([TIERMEM, "--data-dir", str(data), "import", str(src)], lambda: committed(db) > 0)
    assert r.returncode == SIGINT_EXIT, (r.returncode, r.stderr)
    assert r.stderr.splitlines()[-1] == "error: interrupted; what was committed stays, rerun to resume", r.stderr
    assert "Aborted!" not in r.stderr and "Traceback" not in r.stderr
    before = committed(db)
    assert 0 < before < CONVERSATIONS * TURNS  # interrupted midway, some of it committed
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    again = subprocess.run([TIERMEM, "--data-dir", str(data), "import", str(src), "--json"], capture_output=True,
                           text=True, timeout=RUN_TIMEOUT_S)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["appended"] + report["already_present"] == CONVERSATIONS * TURNS, report
    assert committed(db) == CONVERSATIONS * TURNS  # the rerun finished it, nothing twice


def test_consolidate_watch_stops_cleanly(tmp_path: Path) -> None:
    """Ctrl-C is how `consolidate --watch` is stopped: exit 0, no error line."""
    data = tmp_path / "data"
    cmd = [TIERMEM, "--data-dir", str(data), "consolidate", "--watch", "--interval", "0.2"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert p.stderr is not None
        first = p.stderr.readline()  # "consolidating every ...": the loop runs
        assert first.startswith("consolidating every"), first
        os.killpg(p.pid, signal.SIGINT)
        _out, err = p.communicate(timeout=RUN_TIMEOUT_S)
        assert p.returncode == 0, (p.returncode, err)
        assert "error:" not in err and "Aborted!" not in err, err
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        subprocess.run([TIERMEM, "--data-dir", str(data), "stop-redis"], capture_output=True, timeout=RUN_TIMEOUT_S)
