"""A long-lived process finishes an erasure's scrub that a killed process left owed.

An erasure whose process is killed right after its commit leaves its scrub owed (its
marker, recorded with the commit) to the next open or erasure of the store. A serving
process never opens again: before, while it ran, the erased text stayed in the SQLite
WAL's old frames (PostgreSQL: in the rows' dead tuples) for as long as nobody opened the
store or erased. Now the indexer's thread of every Memory looks every INDEXER_WAKE_S and
finishes a scrub it has seen owed OWED_SCRUB_AFTER_S (ColdLog.finish_owed_scrub).

Real files (and the embedded PostgreSQL), a real erasing process killed by SIGKILL right
after its commit, the long-lived Memory in this process opened before it."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import fresh_schema

import tiermem.memory as memory_module
from tiermem import Config, Memory
from tiermem.tiers.cold import SCRUB_PENDING_KEY
from tiermem.tiers.embed import Embedder

ROOT = Path(__file__).resolve().parent.parent
NS = "acme"
TURNS = 6
CANARY = re.compile(rb"zq8owedscrub(\d{2})q")
WAKE_S = 0.5  # the long-lived Memory's INDEXER_WAKE_S here (5 s): the test's bound follows it
AFTER_S = 1.0  # its OWED_SCRUB_AFTER_S here (60 s)
# the scrub finished at most: seen owed at a look, then AFTER_S, the next look, and the
# scrub itself (an FTS merge and a WAL truncation: well under a second here) with slack
# for a loaded 2-core machine
FINISHED_WITHIN_S = 2 * WAKE_S + AFTER_S + 10.0
POLL_S = 0.1

ERASER = """
import json, os, signal, sys
from tiermem import Config, Memory

config = Config(**json.loads(sys.argv[1]))
mem = Memory(config, hot=False, background_indexing=False)
def step(name):
    if name == "erase:committed":  # kill -9 right after the commit, before its scrub
        os.kill(os.getpid(), signal.SIGKILL)
mem.cold._fault = step
mem.delete_conversation("secret", namespace=sys.argv[2])
print("NOT KILLED", flush=True)
"""


def config_args(engine: str, data: Path, request: pytest.FixtureRequest) -> dict[str, object]:
    if engine == "postgres":
        return {"data_dir": str(data), "cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    return {"data_dir": str(data)}


def scrub_owed(mem: Memory, engine: str) -> bool:
    mark = "%s" if engine == "postgres" else "?"
    with mem.cold.reading() as c:
        return c.execute(f"SELECT 1 FROM meta WHERE key = {mark}", (SCRUB_PENDING_KEY,)).fetchone() is not None


def canaries(data: Path) -> dict[str, int]:
    """The SQLite files holding erased text: name -> distinct turns found."""
    out = {}
    for p in sorted(data.iterdir()):
        if p.is_file() and p.name.startswith("tiermem.db") and (n := len(set(CANARY.findall(p.read_bytes())))):
            out[p.name] = n
    return out


def erase_killed_after_commit(mem: Memory, args: dict[str, object], engine: str, data: Path) -> float:
    """The premise of this file's test and tests/test_owed_scrub_no_indexer.py's: `mem`
    holds TURNS canary turns in "secret" and one in "kept"; a real erasing process deletes
    "secret" and is killed by SIGKILL right after its commit, its scrub owed. When it was
    killed (time.monotonic())."""
    mem.append_many("secret", [{"role": "user", "content": f"the vault code zq8owedscrub{i:02d}q"}
                               for i in range(TURNS)], namespace=NS)
    mem.append("kept", {"role": "user", "content": "another thread"}, namespace=NS)
    eraser = subprocess.run([sys.executable, "-c", ERASER, json.dumps(args), NS], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    killed = time.monotonic()
    # the premise: killed by SIGKILL right after the commit, the scrub owed
    assert eraser.returncode == -9, eraser.stderr[-2000:]
    assert mem.cold.key_of(NS, "secret") is None
    assert scrub_owed(mem, engine)
    if engine == "sqlite":
        assert canaries(data)  # the WAL's old frames hold the erased text
    return killed


@pytest.fixture
def long_lived(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Memory, dict[str, object]]]:
    """The serving process's Memory (its indexer thread running), opened before the
    erasure; the config's arguments for the erasing process."""
    monkeypatch.setattr(memory_module, "INDEXER_WAKE_S", WAKE_S)
    monkeypatch.setattr(memory_module, "OWED_SCRUB_AFTER_S", AFTER_S, raising=False)
    args = config_args(request.param, tmp_path / "data", request)
    mem = Memory(Config(**args), embedder=embedder, hot=False)  # type: ignore[arg-type]
    try:
        yield mem, args
    finally:
        mem.close()


@pytest.mark.parametrize("long_lived", ["sqlite", "postgres"], indirect=True)
def test_an_erasure_killed_after_its_commit_is_scrubbed_by_a_running_memory(
        long_lived: tuple[Memory, dict[str, object]], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    mem, args = long_lived
    caplog.set_level(logging.INFO, logger="tiermem")
    engine = "postgres" if "cold_url" in args else "sqlite"
    killed = erase_killed_after_commit(mem, args, engine, tmp_path / "data")
    # before: owed for as long as this process ran (nobody opened the store again)
    while scrub_owed(mem, engine) and time.monotonic() - killed < FINISHED_WITHIN_S:
        time.sleep(POLL_S)
    assert not scrub_owed(mem, engine)
    if engine == "sqlite":
        assert canaries(tmp_path / "data") == {}
    assert [m.text for m in mem.history("kept", namespace=NS)] == ["another thread"]
    # said as what this process knows: owed that long, not that the erasure was interrupted
    # (another process's live erasure is owed as long; before: "an erasure interrupted")
    said = [r.getMessage() for r in caplog.records if "scrub" in r.getMessage()]
    assert any(f"finished the scrub of an erasure whose scrub was still owed after {AFTER_S:g} s (its process "
               "may have stopped)" in m for m in said), said
    assert not any("interrupted" in m for m in said), said
