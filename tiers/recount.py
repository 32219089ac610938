"""Which tokenizer the turn index's counts are of, and their recount when another opens it.

`turns.tokens` holds each turn's exact count (tiers.tokens `message_tokens`) under the
configured tokenizer (`Config.tokenizer`); the hot tier's budget and the planner's
packing add these up. A store written under o200k_base and reopened under cl100k_base
kept the old counts (a reviewer's 104 for a turn of 188), so a hot set reported 2,912
tokens within a 2,990 budget while its members held 5,264: only `Memory.rebuild()`
counted them again. So the tokenizer is recorded as the embedder's identity is
(meta `vec_model`: on a change the vectors are dropped and embedded again).

Invariants:

- meta TOKENIZER_KEY names the tokenizer (its `TokenCounter.name`) that counted every
  `turns.tokens` (schema m028, PostgreSQL m015: the row, '' for a store made before).
- A store opened with the tokenizer it records: one meta read, nothing written (a
  read-only store, a hot standby, opens as before).
- Opened with another: every turn's count is made again from its message with the new
  one (derived data, counted as an append and `rebuild` count it, in the turn's memo
  scope), in batches read and counted outside the write lock, each batch's changed
  counts written in one short transaction (sized to hold the lock about
  RECOUNT_BATCH_TARGET_S, the engine's lock pause after each: another process's append
  waits one batch, not the whole recount), in id order (PostgreSQL: turn rows only, by
  id, as the vectors' writer takes them; no pin version moves). The new name is recorded
  only after the last batch: a process killed mid-way leaves the old name, and the next
  open counts again (a count already made is the same). The store reports it
  (`tokenizer_recount`) and logs one line; what holds the old counts outside the store
  (the hot sets and the planner's epoch states in Redis) is the caller's to drop
  (tiermem.Memory does, on open).
- No tokenizer recorded (UNRECORDED: a store made before m028, or by a process killed
  between m028 and its first open): its counts were made by the tokenizer configured
  then, which nothing recorded. The one opening it now is recorded without a recount,
  taken to be that one (the default has always been o200k_base); where it was another,
  `Memory.rebuild()` counts every turn again.
- A store this process may not write (a read-only mount, a standby, a read-only role)
  opens as it is, with a warning: its counts stay the recorded tokenizer's.
- Every process on one store should count with one tokenizer: one still running with the
  old one after another recounted appends turns counted with the old one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import Any, Protocol

from tiermem.tiers.dialect import Dialect
from tiermem.tiers.files import storage_problem
from tiermem.tiers.memo import memo_scope, remembered_for
from tiermem.tiers.models import loads_stored
from tiermem.tiers.schema import TOKENIZER_KEY, UNRECORDED
from tiermem.tiers.tokens import TokenCounter, message_tokens

log = logging.getLogger("tiermem.recount")

# Turns per recount batch: the first, and the bounds of the next ones, each sized from the
# last to hold the write lock about RECOUNT_BATCH_TARGET_S (a rebuild's batches target the
# same, tiers.postgres REBUILD_BATCH_TARGET_S); the reads and the counting are outside it
RECOUNT_FIRST_BATCH_TURNS = 1000
RECOUNT_MIN_BATCH_TURNS = 50
RECOUNT_MAX_BATCH_TURNS = 5000
RECOUNT_BATCH_TARGET_S = 0.03


@dataclasses.dataclass(frozen=True)
class Recount:
    """A recount done on open: the tokenizer the counts were of, the one they are of now,
    how many turns were read and how many counts changed, and how long it took (s)."""

    old: str
    new: str
    turns: int
    changed: int
    seconds: float


class _Store(Protocol):
    """What the recount needs of a store (tiers.cold.ColdStore, tiers.postgres.PostgresStore)."""

    tokens: TokenCounter
    db_uuid: str

    @property
    def dialect(self) -> Dialect: ...

    def reading(self) -> contextlib.AbstractContextManager[Any]: ...

    def transaction(self) -> contextlib.AbstractContextManager[Any]: ...

    def _lock_pause(self, held: float) -> float: ...


def _recorded(store: _Store) -> str | None:
    with store.reading() as c:
        row = c.execute(store.dialect.sql("SELECT value FROM meta WHERE key = ?"), (TOKENIZER_KEY,)).fetchone()
    return str(row[0]) if row is not None else None


def _record(c: Any, store: _Store, name: str) -> None:
    c.execute(store.dialect.sql("INSERT INTO meta(key, value) VALUES (?, ?) "
                                "ON CONFLICT (key) DO UPDATE SET value = excluded.value"), (TOKENIZER_KEY, name))


def _read_only(exc: BaseException) -> bool:
    """Whether `exc` is the storage refusing a write because it is read-only here."""
    problem = storage_problem(exc)
    return problem is not None and problem.refused_unwritten and not problem.busy


def _stay(recorded: str | None, name: str) -> None:
    """A store that cannot be written keeps its counts: said when they are another
    tokenizer's (unrecorded ones are taken to be this one's, module docstring)."""
    if recorded is not None and recorded != UNRECORDED:
        log.warning("the store's token counts were made with %s, this process counts with %s, and the store is "
                    "read-only here: they stay %s's (hot budgets and plans add them up as %s's)",
                    recorded, name, recorded, name)


def check_tokenizer(store: _Store, *, read_only: bool = False) -> Recount | None:
    """On open: record the store's tokenizer, or recount `turns.tokens` with it when the
    store records another (module docstring). Returns the recount done, else None.
    `read_only`: the store is known not to take writes (SQLite's read-only open)."""
    name = store.tokens.name
    recorded = _recorded(store)
    if recorded == name:
        return None
    if read_only:
        _stay(recorded, name)
        return None
    try:
        if recorded is None or recorded == UNRECORDED:
            # made before the tokenizer was recorded, by the one configured then: taken to be this one
            with store.transaction() as c:
                _record(c, store, name)
            return None
        return recount(store, recorded)
    except Exception as exc:
        if not _read_only(exc):
            raise
        _stay(recorded, name)
        return None


def _batch(store: _Store, after: int, limit: int) -> list[Any]:
    """(id, conversation, position, tokens, body) of up to `limit` turns with ids above `after`."""
    with store.reading() as c:
        return list(c.execute(store.dialect.sql(
            "SELECT t.id, t.conversation_id, t.position, t.tokens, m.body FROM turns t "
            "JOIN messages m ON m.conversation_id = t.conversation_id AND m.position = t.position "
            "WHERE t.id > ? ORDER BY t.id LIMIT ?"), (after, limit)).fetchall())


def _counts(store: _Store, rows: Sequence[Any]) -> list[tuple[int, int, str, int]]:
    """Outside the lock: (tokens, id, conversation, position) of the rows whose count the
    store's tokenizer makes another. A body that cannot be decoded keeps its count (a
    rebuild salvages it)."""
    out: list[tuple[int, int, str, int]] = []
    for mid, conv, pos, old, body in rows:
        try:
            data = loads_stored(body)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        with remembered_for(memo_scope(store.db_uuid, str(conv))):  # counted for its conversation alone
            n = message_tokens(store.tokens, data)
        if n != old:
            out.append((n, int(mid), str(conv), int(pos)))
    return out


def recount(store: _Store, old: str) -> Recount:
    """Count every turn again with the store's tokenizer, in batches (module docstring),
    and record its name after the last; logs one line."""
    began = time.perf_counter()
    update = store.dialect.sql("UPDATE turns SET tokens = ? WHERE id = ? AND conversation_id = ? AND position = ?")
    after, limit, turns, changed = -1, RECOUNT_FIRST_BATCH_TURNS, 0, 0
    while True:
        rows = _batch(store, after, limit)
        last = len(rows) < limit
        new = _counts(store, rows)
        t0 = time.perf_counter()
        with store.transaction() as c:
            if new:  # a turn erased since its read matches no row: nothing written for it
                c.cursor().executemany(update, new)
            if last:  # with the last batch: a kill before it leaves the old name, and a recount owed
                _record(c, store, store.tokens.name)
        held = time.perf_counter() - t0
        turns += len(rows)
        changed += len(new)
        if last:
            break
        after = int(rows[-1][0])
        limit = max(RECOUNT_MIN_BATCH_TURNS, min(RECOUNT_MAX_BATCH_TURNS,
                                                 int(limit * RECOUNT_BATCH_TARGET_S / max(held, 1e-3))))
        time.sleep(store._lock_pause(held))  # another process's write takes the lock between two
    done = Recount(old, store.tokens.name, turns, changed, time.perf_counter() - began)
    log.info("tokenizer changed from %s to %s: recounted the tokens of %d turn(s) (%d changed) in %.2f s; hot sets "
             "and epoch states made from the old counts are stale", done.old, done.new, done.turns, done.changed,
             done.seconds)
    return done
