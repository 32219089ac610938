"""A command whose standard output is closed by its reader (`tiermem export | head`)
stops quietly, with the status a shell shows for `git log | head` (141: killed by
SIGPIPE), whatever it prints and however (click.echo, a rich table, JSON, help). Before (a
bug hunt, 2026-12-06) it printed `error: [Errno 32] Broken pipe` and exited 1; after that
fix, the top-level `--help` and `--version`, which click prints before any command runs,
still exited 1 (click's own handler). A reader that leaves part way through one long write
(a rich table or a JSON document, where export writes line by line) exited 0: CPython's
buffered writer returns from a write the reader's exit cut short without an error and
drops the rest, so the command printed 64 KiB and went on as if done; standard output now
goes out in pieces and the next piece meets the closed pipe. Real console script, real
pipes, a real data dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
SIGPIPE_EXIT = 128 + signal.SIGPIPE  # what a shell shows for `git log | head`'s git
CONV = "c"
TURNS = 6
MANY = "many"  # a conversation of short turns whose history table is far past 64 KiB
MANY_TURNS = 2000
TURN_CHARS = 30_000  # 6 of them: an export past the 64 KiB a pipe buffers
READ_BYTES = 100  # what the reader takes before it closes, as `head -c 100`
RUN_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Path:
    data = tmp_path_factory.mktemp("closed-stdout") / "data"
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many(CONV, [{"role": "user", "content": f"{i} " + "x" * TURN_CHARS} for i in range(TURNS)],
                        namespace="default")
        mem.append_many(MANY, [{"role": "user", "content": f"line {i}"} for i in range(MANY_TURNS)],
                        namespace="default")
    return data


# (id, the command after --data-dir)
COMMANDS: list[tuple[str, list[str]]] = [
    # JSONL lines by click.echo: the reported case
    ("export", ["export"]),
    # one JSON document
    ("history --json", ["history", CONV, "--json"]),
    # a rich table
    ("history", ["history", CONV]),
    # the config table, read without the store
    ("config", ["config"]),
    # the top-level help: printed by click while the arguments are parsed, before invoke
    ("--help", ["--help"]),
    # the version, printed the same way
    ("--version", ["--version"]),
    # a command's help: printed inside the group's invoke
    ("config --help", ["config", "--help"]),
]


@pytest.mark.parametrize("args", [c[1] for c in COMMANDS], ids=[c[0] for c in COMMANDS])
def test_a_stdout_closed_before_the_first_write_ends_the_command_quietly(data_dir: Path, args: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        out = subprocess.run([TIERMEM, "--data-dir", str(data_dir), *args], stdout=write_end,
                             stderr=subprocess.PIPE, timeout=RUN_TIMEOUT_S)
    finally:
        os.close(write_end)
    assert (out.returncode, out.stderr.decode()) == (SIGPIPE_EXIT, "")


def test_a_reader_that_stops_part_way_ends_the_export_quietly(data_dir: Path) -> None:
    proc = subprocess.Popen([TIERMEM, "--data-dir", str(data_dir), "export"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    head = proc.stdout.read(READ_BYTES)
    proc.stdout.close()  # `head -c 100` exits: the export still has most of its lines to write
    err = proc.stderr.read().decode()
    assert (proc.wait(RUN_TIMEOUT_S), err) == (SIGPIPE_EXIT, "")
    assert head.startswith(b'{"conversation_id": "c"')


# (id, the command after --data-dir) -- one long write each, past what a pipe holds
ONE_LONG_WRITE: list[tuple[str, list[str]]] = [
    # a rich table of 2,000 rows, printed at once (the reported case: `history | head -1` exited 0)
    ("history", ["history", MANY]),
    # one JSON document of ~180 KB by click.echo
    ("history --json", ["history", CONV, "--json"]),
]


@pytest.mark.parametrize("args", [c[1] for c in ONE_LONG_WRITE], ids=[c[0] for c in ONE_LONG_WRITE])
def test_a_reader_that_stops_part_way_through_one_long_write(data_dir: Path, args: list[str]) -> None:
    proc = subprocess.Popen([TIERMEM, "--data-dir", str(data_dir), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert len(proc.stdout.read(READ_BYTES)) == READ_BYTES
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert (proc.wait(RUN_TIMEOUT_S), err) == (SIGPIPE_EXIT, "")


def test_a_long_table_read_whole_exits_0(data_dir: Path) -> None:
    out = subprocess.run([TIERMEM, "--data-dir", str(data_dir), "history", MANY], capture_output=True,
                         timeout=RUN_TIMEOUT_S)
    assert out.returncode == 0, out.stderr
    assert f"line {MANY_TURNS - 1}" in out.stdout.decode()


def test_a_full_export_still_exits_0(data_dir: Path) -> None:
    out = subprocess.run([TIERMEM, "--data-dir", str(data_dir), "export"], capture_output=True,
                         timeout=RUN_TIMEOUT_S)
    assert out.returncode == 0, out.stderr
    assert len([json.loads(x) for x in out.stdout.splitlines()]) == TURNS + MANY_TURNS
