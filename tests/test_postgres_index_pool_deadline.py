"""A catch-up pool the server stores slower than cold_operation_timeout_s is still stored:
PostgresStore.index_pending writes a pool (INDEX_POOL_BATCHES x `batch` turns) a batch per
statement, each its own transaction and checkout, so each has a deadline of its own and
every committed batch stays stored and hooked. Before (a review of the PostgreSQL engine,
2026-12-07), the whole pool was one statement under one operation deadline: past it the
connection was cut (StoreStalled), nothing stored, and every retry read the same pool and
was cut again, so the background catch-up never embedded a turn.

The embedded PostgreSQL; the slow server is a trigger that sleeps for each vector row
inserted (deterministic: a pool takes several deadlines, a batch a fraction of one), and
the hooks are recorded to check each stored turn is decided once, in log order. No timed
assertion: each case completes with every vector stored, or (a failing batch) keeps what
committed before it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest
from hash_embedder import HashEmbedder
from pg_server import fresh_schema

from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

OPERATION_S = 0.5  # the store's operation timeout (its lock wait 1 ms on top)
ROW_SLEEP_S = 0.01  # the trigger's sleep per vector row: a batch of BATCH, 80 ms; a pool, 1.28 s
BATCH = 8
POOL_BATCHES = 16
POOL = BATCH * POOL_BATCHES  # 128 turns: as one statement, 2.5 deadlines


def slow_trigger_sql(schema: str, sleep_s: float, fail_at: int | None = None) -> str:
    """A BEFORE INSERT trigger on the store's vectors: each row waits `sleep_s`; the row of
    the turn at position `fail_at` (of any conversation) fails its statement."""
    fail = "" if fail_at is None else f"IF NEW.position = {fail_at} THEN RAISE EXCEPTION 'refused here'; END IF; "
    return (f'CREATE FUNCTION "{schema}".slow_vec() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN '
            f"PERFORM pg_sleep({sleep_s}); {fail}RETURN NEW; END $$; "
            f'CREATE TRIGGER slow_vec BEFORE INSERT ON "{schema}".messages_vec '
            f'FOR EACH ROW EXECUTE FUNCTION "{schema}".slow_vec()')


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    s = PostgresStore(pg_url, tokens=BpeTokenCounter(), schema=fresh_schema(), embedder=HashEmbedder(),
                      operation_timeout_s=OPERATION_S, lock_timeout_ms=0)
    try:
        yield s
    finally:
        s.close()


class Hooks:
    """What the store's hooks were called with."""

    def __init__(self, store: PostgresStore) -> None:
        self.embedded: list[tuple[str, int]] = []
        self.hooked: list[list[str]] = []
        store.on_embedded = lambda turns: self.embedded.extend((c, p) for c, p, _ in turns)
        store.on_hooked = self.hooked.append


def seeded(store: PostgresStore, pg_url: str, sizes: list[int], fail_at: int | None = None) -> list[str]:
    """Conversations of `sizes` turns appended, the vectors' table made (one turn of a
    conversation of its own embedded), then the slow trigger added. Their keys."""
    store.append_many("first", [Message(role="user", content="makes the table")])
    store.index_pending(max_rows=1)
    keys = [store.append_batch(f"c{n}", [Message(role="user", content=f"conversation {n} turn {i}")
                                         for i in range(size)]).key for n, size in enumerate(sizes)]
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(slow_trigger_sql(store.schema, ROW_SLEEP_S, fail_at))
    return keys


def vectors(pg_url: str, schema: str) -> tuple[int, int]:
    """(vector rows, turns still pending)."""
    with psycopg.connect(pg_url, autocommit=True) as c:
        row = c.execute(f'SELECT (SELECT count(*) FROM "{schema}".messages_vec), '
                        f'(SELECT count(*) FROM "{schema}".turns WHERE embedded = 0)').fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@pytest.mark.parametrize("sizes", [
    [POOL],  # one conversation filling one pool: 16 batches of one conversation
    [12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8],  # batches straddling conversations, one pool
    [POOL + 20],  # a pool and the start of the next
])
def test_a_pool_slower_than_the_deadline_is_stored_a_batch_at_a_time(
        store: PostgresStore, pg_url: str, sizes: list[int]) -> None:
    keys = seeded(store, pg_url, sizes)
    hooks = Hooks(store)
    # before: StoreStalled after OPERATION_S, nothing of the pool stored, on every retry
    assert store.index_pending(batch=BATCH, pool_batches=POOL_BATCHES) == sum(sizes)
    assert vectors(pg_url, store.schema) == (sum(sizes) + 1, 0)
    # each stored turn decided once, each conversation's in log order
    assert Counter(hooks.embedded) == Counter((k, p) for k, n in zip(keys, sizes, strict=True) for p in range(n))
    for k, n in zip(keys, sizes, strict=True):
        assert [p for c, p in hooks.embedded if c == k] == list(range(n))
    assert sorted({c for pool in hooks.hooked for c in pool}) == sorted(keys)


def test_a_failing_batch_keeps_the_batches_committed_before_it(store: PostgresStore, pg_url: str) -> None:
    """The turn at position 50 refused by the server: the six batches before its own stay
    stored and hooked (their conversation's rechecks run), the rest pending; once the
    server takes it, the next catch-up stores only the rest."""
    fail_at = 50
    (key,) = seeded(store, pg_url, [POOL], fail_at=fail_at)
    hooks = Hooks(store)
    with pytest.raises(psycopg.Error, match="refused here"):
        store.index_pending(batch=BATCH, pool_batches=POOL_BATCHES)
    committed = fail_at // BATCH * BATCH  # 48: the batches before the failing one's
    assert vectors(pg_url, store.schema) == (committed + 1, POOL - committed)
    assert hooks.embedded == [(key, p) for p in range(committed)]
    assert hooks.hooked == [[key]]

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(slow_trigger_sql(store.schema, ROW_SLEEP_S).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
                  .split("; CREATE TRIGGER")[0])
    assert store.index_pending(batch=BATCH, pool_batches=POOL_BATCHES) == POOL - committed
    assert vectors(pg_url, store.schema) == (POOL + 1, 0)
    assert hooks.embedded == [(key, p) for p in range(POOL)]
    assert np.all(np.isfinite(np.stack(list(store.embeddings(key, list(range(POOL))).values()))))
