"""An append to a conversation goes through while another process relabels all its turns
(`set_labels`, as a rebuild's relabelling pass makes it), on both engines.

A real child process (tests/label_pass_worker.py) labels every turn of a long
conversation; once its pass holds its lock (PostgreSQL: its UPDATE of the turns under
way; SQLite: the write lock taken), this process appends to the same conversation with a
short lock wait (the store's lock timeout, Config.busy_timeout_ms, lowered). Before the
fix the pass was one transaction holding the conversation's row (SQLite: the write lock)
from its first turn to its last, seconds for a rebuild's conversation, and the append
failed busy past its lock wait (PostgreSQL lock_not_available, SQLite "database is
locked": a 503 over HTTP). Now the pass commits in short batches, each taking the row in
the writers' lock order for its batch alone, and the append waits one batch at most.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cold_helpers import write_lock_held
from go_child import answer, start, stop, wait_for
from label_pass_worker import PASS_LABEL
from pg_server import fresh_schema, turns_write_locked

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter

WORKER = Path(__file__).with_name("label_pass_worker.py")
NAME = "long"  # the conversation's name (its first incarnation's key is the same)
SEED_LABEL = ("statement", False, 0, "seed")  # not load-bearing: the pass changes every turn
APPENDS_DURING = 3  # appends made one after another while the pass runs

# (engine, turns the pass labels, the appending store's lock wait in ms). The pass over
# that many turns took 0.8-3.3 s on PostgreSQL and 0.3-1.9 s on SQLite as one transaction
# (2 cores, loaded to varying degrees), well past the lock wait; a batch now holds the
# lock ~30 ms (tiers.dialect LABEL_BATCH_TARGET_S), well within it
CASES = [
    # PostgreSQL: the append's counter UPDATE waits for the conversation's row the pass holds
    pytest.param(("postgres", 10_000, 300), id="postgres"),
    # SQLite: the append's BEGIN IMMEDIATE waits (polling) for the pass's write lock
    pytest.param(("sqlite", 20_000, 150), id="sqlite"),
]


def pass_holds_its_lock(engine: str, where: str) -> bool:
    """Whether the child's pass holds the lock an append needs, seen from outside it."""
    if engine == "postgres":
        return turns_write_locked(*where.rsplit("#", 1))
    return write_lock_held(Path(where))


@pytest.fixture(params=CASES)
def case(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, int, int]:
    engine, turns, wait_ms = request.param
    if engine == "sqlite":
        return engine, str(tmp_path / "tiermem.db"), turns, wait_ms
    return engine, f"{request.getfixturevalue('pg_url')}#{fresh_schema()}", turns, wait_ms


@pytest.fixture
def appender(case: tuple[str, str, int, int]) -> Iterator[ColdLog]:
    """This process's store, waiting for a lock at most the case's short lock wait."""
    engine, where, _turns, wait_ms = case
    store: ColdLog
    if engine == "sqlite":
        store = ColdStore(Path(where), tokens=BpeTokenCounter(), busy_timeout_ms=wait_ms)
    else:
        url, schema = where.rsplit("#", 1)
        store = PostgresStore(url, tokens=BpeTokenCounter(), schema=schema, lock_timeout_ms=wait_ms)
    try:
        yield store
    finally:
        store.close()


def test_append_succeeds_while_another_process_relabels_every_turn(case: tuple[str, str, int, int],
                                                                   appender: ColdLog) -> None:
    engine, where, turns, _wait_ms = case
    seeded = appender.append_batch(NAME, [Message(role="user", content=f"turn {i} says something.")
                                          for i in range(turns)], labels=[SEED_LABEL] * turns)
    key = seeded.key
    version = appender.pin_version(key)
    child = start(WORKER, engine, where, key)  # labels every turn seeded: positions 0..turns-1
    try:
        wait_for(lambda: pass_holds_its_lock(engine, where), child, "the pass never held its lock")
        waits: list[float] = []
        for i in range(APPENDS_DURING):
            began = time.perf_counter()
            positions = appender.append_batch(NAME, [Message(role="user", content=f"meanwhile {i}")]).positions
            waits.append(time.perf_counter() - began)
            assert positions == [turns + i]
        appended_by = time.time()
        done = answer(child)
    finally:
        stop(child)
    assert "ended" in done, done  # the pass itself waited for the appends and finished
    # the appends returned while the pass was still running: none waited for its end
    assert appended_by < done["ended"], (waits, appended_by, done)
    rows = appender.turns(key)
    assert [r.position for r in rows] == list(range(turns + APPENDS_DURING))
    # every turn of the pass labelled, the appended ones as they came (unlabelled)
    intent, bearing, priority, reason = PASS_LABEL
    assert all((r.intent, r.load_bearing, r.priority, r.label_reason) == (intent, bearing, priority, reason)
               for r in rows[:turns])
    assert all(r.label_reason is None and not r.load_bearing for r in rows[turns:])
    # each turn's change moved the pin version once, in whichever batch: none lost, none twice
    assert appender.pin_version(key) == version + turns
