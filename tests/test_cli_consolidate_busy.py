"""`tiermem consolidate` on a store another process holds the write lock of, and the
range its --interval advertises.

Before: a one-shot run exited 0 saying "refreshed 0 view(s)" with a full traceback per
view on stderr (the SQLite driver's "database is locked"), and --watch logged the same
tracebacks every interval; --help advertised `--interval [0.1<=x<=604800.0]`, which the
config refused past 86400. Now a one-shot run exits 1 with one `error:` line per cause
in append's words ("storage busy"), --json lists the failures, --watch keeps running
and logs one line per failed run, and only --debug shows tracebacks. The CLI runs as a
real process (its stderr is what a user sees); a second real process holds the lock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from cold_helpers import locked

from tiermem import Config, Memory
from tiermem.cli import MIN_WATCH_INTERVAL_S, cli
from tiermem.config import MAX_SCHEDULER_INTERVAL_S
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
BUSY_TIMEOUT_MS = 300  # how long the CLI waits behind the other writer: short, so the test is
TURNS = 30  # enough for the views a sweep picks (the reviewer's probe: 2)
RUN_LIMIT_S = 120  # a CLI run that has not ended by then is a failure, not a hang
WATCH_INTERVAL_S = 0.5
MIN_FAILED_RUNS = 2  # --watch is stopped once it has said this many failed runs
POLL_S = 0.1
FAILED_RUN = "consolidation run: "  # how the scheduler's line on a failed run begins
BUSY_WORDS = "storage busy: another writer held the database past the wait allowed"

@pytest.fixture
def data(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Path]:
    """A data dir with one conversation whose warm views are over budget."""
    d = tmp_path / "data"
    with Memory(Config(data_dir=d), hot=False, background_indexing=False, embedder=embedder) as mem:
        mem.append_many("c1", [{"role": "user", "content": f"Remember fact {i}: the code word {i} is banana{i}."}
                               for i in range(TURNS)])
    yield d
    EmbeddedRedis(d).stop()  # the CLI's hot tier, when it started one


def tiermem(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TIERMEM, *args], env=cli_env(data), capture_output=True, text=True,
                          timeout=RUN_LIMIT_S, check=False)


def cli_env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    return {**env, "TIERMEM_DATA_DIR": str(data), "TIERMEM_STORAGE__BUSY_TIMEOUT_MS": str(BUSY_TIMEOUT_MS)}


@contextmanager
def write_locked(data: Path) -> Iterator[None]:
    """Another process holds the database's write lock while the block runs
    (cold_helpers.locked); it rolls back and exits cleanly after."""
    with locked(data / "tiermem.db") as holder:
        yield
    assert holder.returncode == 0


def append_busy_line(data: Path) -> str:
    """What `tiermem append` says of the same locked store: the wording to match."""
    r = tiermem(data, "append", "c1", "--role", "user", "--content", "one more")
    assert r.returncode == 1 and r.stderr.startswith(f"error: {BUSY_WORDS}"), r.stderr
    return r.stderr.strip()


@pytest.mark.parametrize("debug", [
    False,  # the user's run: one line, no traceback
    True,   # --debug: the tracebacks too, and still exit 1
])
def test_one_shot_on_a_locked_store_exits_1_in_appends_words(data: Path, debug: bool) -> None:
    with write_locked(data):
        said = append_busy_line(data)
        r = tiermem(data, *(["--debug"] if debug else []), "consolidate")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout == "refreshed 0 view(s)\n"
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    # one cause, one line: append's line, then how many views
    assert len(errors) == 1 and errors[0].startswith(said), (said, r.stderr)
    assert errors[0].endswith("[1 view refresh(es) failed; 0 of 2 refreshed]"), errors[0]
    if debug:
        assert "Traceback" in r.stderr and "database is locked" in r.stderr
    else:
        assert r.stderr.splitlines() == errors  # nothing else: no traceback, no log record


def test_one_shot_json_lists_the_failures(data: Path) -> None:
    with write_locked(data):
        r = tiermem(data, "consolidate", "--json")
    assert r.returncode == 1, (r.stdout, r.stderr)
    report = json.loads(r.stdout)
    # the first view's refresh met the lock and ended the run: the second would have too
    assert [(f["conversation"], f["error"].startswith(BUSY_WORDS)) for f in report["failures"]] == [("c1", True)]
    assert (report["last_failed"], report["last_refreshed"], report["last_selected"]) == (1, 0, 2)
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(f"error: {BUSY_WORDS}"), r.stderr


def test_one_shot_after_the_lock_goes_refreshes_and_exits_0(data: Path) -> None:
    with write_locked(data):
        assert tiermem(data, "consolidate").returncode == 1
    r = tiermem(data, "consolidate", "--json")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    report = json.loads(r.stdout)
    assert report["failures"] == [] and report["last_refreshed"] == report["last_selected"] == 2


def test_watch_keeps_running_and_logs_one_line_per_failed_run(data: Path, tmp_path: Path) -> None:
    out_path = tmp_path / "stdout"  # a file: its stderr alone is read as it comes, by one reader
    with write_locked(data), out_path.open("w") as out_file:
        proc = subprocess.Popen([TIERMEM, "consolidate", "--watch", "--interval", str(WATCH_INTERVAL_S)],
                                env=cli_env(data), stdout=out_file, stderr=subprocess.PIPE, text=True)
        try:
            lines: list[str] = []  # its stderr, read as it comes
            reader = threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in proc.stderr or ()),
                                      daemon=True)
            reader.start()
            deadline = time.monotonic() + RUN_LIMIT_S
            while sum(FAILED_RUN in line for line in lines) < MIN_FAILED_RUNS and time.monotonic() < deadline:
                if proc.poll() is not None or any("Traceback" in line for line in lines):
                    break  # it stopped, or said more than a line: seen below
                time.sleep(POLL_S)
            still_running = proc.poll() is None
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=RUN_LIMIT_S)
            reader.join(RUN_LIMIT_S)  # to its end: the pipe closed with the CLI
        finally:
            if proc.poll() is None:  # never left running, whatever failed above
                proc.kill()
                proc.wait()
    out = out_path.read_text()
    err = "\n".join(lines)
    assert still_running, err
    assert proc.returncode == 0, err  # Ctrl-C: it stops as it always did
    failed = [line for line in lines if line.startswith(f"WARNING tiermem.scheduler: {FAILED_RUN}")]
    assert len(failed) >= MIN_FAILED_RUNS, err
    assert all(BUSY_WORDS in line for line in failed), failed
    # besides its start note, nothing else: no traceback per run
    assert [line for line in lines if line not in failed] == [f"consolidating every {WATCH_INTERVAL_S:g}s; Ctrl-C to stop"]
    assert "errors=" in out  # its status lines go on


def test_interval_range_is_the_configs() -> None:
    r = CliRunner().invoke(cli, ["consolidate", "--help"])
    assert r.exit_code == 0
    assert f"[{MIN_WATCH_INTERVAL_S}<=x<={MAX_SCHEDULER_INTERVAL_S}]" in " ".join(r.output.split())
    assert Config(scheduler_interval_s=MAX_SCHEDULER_INTERVAL_S).scheduler_interval_s == MAX_SCHEDULER_INTERVAL_S


@pytest.mark.parametrize("value", [
    str(MAX_SCHEDULER_INTERVAL_S + 1),  # past the config's limit: before, click passed it and the config refused
    str(MIN_WATCH_INTERVAL_S / 2),      # under the floor
])
def test_interval_out_of_range_is_a_usage_error(tmp_path: Path, value: str) -> None:
    r = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "consolidate", "--interval", value])
    assert r.exit_code == 2 and "'--interval'" in r.output, r.output
    assert not (tmp_path / "data").exists()  # refused before anything was opened
