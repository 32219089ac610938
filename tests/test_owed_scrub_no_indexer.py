"""A long-lived Memory without the indexer's thread finishes an owed scrub from its calls.

An erasure whose process is killed right after its commit leaves its scrub owed to the
next open or erasure of the store; a running Memory's indexer thread finishes it once it
has seen it owed OWED_SCRUB_AFTER_S (67d7c07, tests/test_owed_scrub_long_lived.py). A
Memory opened with background_indexing=False runs no such thread: before, it never
looked, and the erased text stayed in the SQLite WAL's old frames (PostgreSQL: the rows'
dead tuples) for as long as the process ran. Now its appends and contexts look, at most
every OWED_SCRUB_LOOK_S (`Memory._look_for_owed_scrub`).

Real files and the embedded PostgreSQL, a real erasing process killed by SIGKILL right
after its commit, the long-lived Memory in this process opened before it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_owed_scrub_long_lived import NS, canaries, config_args, erase_killed_after_commit, scrub_owed

import tiermem.memory as memory_module
from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

LOOK_S = 0.2  # the Memory's OWED_SCRUB_LOOK_S here (5 s)
AFTER_S = 1.0  # its OWED_SCRUB_AFTER_S here (60 s)
# the scrub finished at most: seen owed at a call's look, AFTER_S, the next look, and the
# scrub itself (well under a second here) with slack for a loaded 2-core machine
FINISHED_WITHIN_S = 2 * LOOK_S + AFTER_S + 10.0
CALL_EVERY_S = 0.1  # how often the long-lived process calls here

# the call the long-lived process keeps making meanwhile (its only calls)
CALLS: dict[str, Callable[[Memory], object]] = {
    # a write
    "append": lambda mem: mem.append("kept", {"role": "user", "content": "and one more thing"}, namespace=NS),
    # a read that plans
    "context": lambda mem: mem.context("kept", namespace=NS, record=False),
}


@pytest.fixture
def long_lived(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Memory, dict[str, object]]]:
    """The serving process's Memory, no indexer thread, opened before the erasure; the
    config's arguments for the erasing process."""
    monkeypatch.setattr(memory_module, "OWED_SCRUB_LOOK_S", LOOK_S, raising=False)
    monkeypatch.setattr(memory_module, "OWED_SCRUB_AFTER_S", AFTER_S)
    args = config_args(request.param, tmp_path / "data", request)
    mem = Memory(Config(**args), embedder=embedder, hot=False, background_indexing=False)  # type: ignore[arg-type]
    try:
        yield mem, args
    finally:
        mem.close()


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("long_lived", ["sqlite", "postgres"], indirect=True)
def test_an_owed_scrub_is_finished_by_the_calls_of_a_memory_without_its_indexer(
        long_lived: tuple[Memory, dict[str, object]], call: str, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    mem, args = long_lived
    caplog.set_level(logging.INFO, logger="tiermem")
    engine = "postgres" if "cold_url" in args else "sqlite"
    assert mem._indexer is None  # the premise: no thread looks
    killed = erase_killed_after_commit(mem, args, engine, tmp_path / "data")
    calls = 0
    # before: owed for as long as this process ran, whatever it called
    while scrub_owed(mem, engine) and time.monotonic() - killed < FINISHED_WITHIN_S:
        CALLS[call](mem)
        calls += 1
        time.sleep(CALL_EVERY_S)
    assert not scrub_owed(mem, engine), f"still owed after {calls} {call} calls"
    if engine == "sqlite":
        assert canaries(tmp_path / "data") == {}
    assert mem.history("kept", namespace=NS)[0].text == "another thread"
    said = [r.getMessage() for r in caplog.records if "scrub" in r.getMessage()]
    assert any(f"finished the scrub of an erasure whose scrub was still owed after {AFTER_S:g} s" in m
               for m in said), said


@pytest.mark.parametrize("long_lived", ["sqlite"], indirect=True)
def test_between_two_looks_a_call_does_not_read_the_store_for_it(
        long_lived: tuple[Memory, dict[str, object]], monkeypatch: pytest.MonkeyPatch) -> None:
    """The look is rate-limited: once it has looked, the calls within OWED_SCRUB_LOOK_S
    leave the store's owed state alone (`ColdLog._owed_since` untouched: no look ran)."""
    mem, _args = long_lived
    mem.append("kept", {"role": "user", "content": "another thread"}, namespace=NS)
    monkeypatch.setattr(memory_module, "OWED_SCRUB_LOOK_S", 3600.0)
    mem._owed_look_at = 0.0  # due now
    mem.cold._owed_since = -1.0  # a value no look leaves (nothing owed: a look sets None)
    mem.append("kept", {"role": "user", "content": "the first call after it is due looks"}, namespace=NS)
    assert mem.cold._owed_since is None
    mem.cold._owed_since = -1.0
    for _ in range(3):
        mem.append("kept", {"role": "user", "content": "and the next ones do not"}, namespace=NS)
        mem.context("kept", namespace=NS, record=False)
    assert mem.cold._owed_since == -1.0
