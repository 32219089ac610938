"""The cold tier's store interface: what the planner, consolidation, the warm tier, the
turn cache, the hot link and the facade may ask of the log, documented once.

Two engines implement it: `tiers.cold.ColdStore` (SQLite in one file, the embedded
default) and `tiers.postgres.PostgresStore` (PostgreSQL + pgvector, for services that
outgrow one machine). `tests/test_store_conformance.py` runs one suite against both;
the functions at the bottom of this module make mypy check that both satisfy it.

Contract shared by every method (DESIGN invariants):

- **Keys, not names.** A conversation has a *name* (the id its caller knows, unique
  within its namespace) and a *key*, its incarnation: issued once when the
  conversation is created and never issued again, even after prune or erasure. Every
  method below takes a key, except the appends (which take a name and a namespace and
  resolve it inside their own transaction) and `key_of` (which resolves one). A stale
  key (its conversation pruned or erased) can only miss: reads answer empty or None,
  writes raise `ConversationNotFound`; it can never reach another conversation.
- **Append-only log.** Messages are never updated, deleted or reordered except by the
  retention operations (`prune`, `delete_conversation`, `delete_namespace`), and the
  database itself refuses anything else. Positions are assigned by the store, contiguous
  from 0 per conversation, also with many writer processes.
- **One domain action, one transaction.** Each write method commits whole or not at all,
  except the SQLite engine's `prune` and `delete_namespace`, which commit per batch of
  whole conversations (each one's rows, tombstone and owed purges together).
- **Derived data is rebuildable.** The turn index, FTS, vectors, labels and summaries can
  be recomputed from the messages (`rebuild`); pins and checkpoints are user state.
- **Idempotency keys.** An append may carry an idempotency key (`append_batch`): the
  key, the request's fingerprint and the positions written are recorded in the same
  transaction as the messages, scoped to the conversation's key (its incarnation, so its
  namespace too). A later append of the same request under that key writes nothing and
  answers the recorded positions; another request under it raises
  `IdempotencyKeyReused` and writes nothing. The records live as long as their
  conversation (no expiry): retention deletes them with it, a fork copies none.
- **Conditional appends.** An append may name the position it expects the conversation
  to go on at (`append_batch(expect_position=)`, and the incarnation with `expect_key`):
  checked inside the append's own write transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL:
  under the conversation row's lock the keyed path takes), so no other write, erasure or
  prune falls between the check and the write; a mismatch raises `PositionMismatch` and
  writes nothing (a conversation the append would have created is not created).
- **Salvage.** A stored row that cannot be decoded is logged, counted (`salvaged`) and
  skipped on every read path; its neighbours load.
- **Namespaces are walls.** Nothing scoped to a namespace answers with, or counts,
  another namespace's rows (`delete_namespace` alone takes the namespaces below).
- **Ownership.** A store opened from a path or URL opens and closes its own
  connections; one handed a connection pool uses it and closes nothing (`close` then
  only forgets it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tiermem.tiers.errors import PositionMismatch
from tiermem.tiers.models import DEFAULT_FORK_MAX_ID_CHARS, incarnation_token

if TYPE_CHECKING:
    from tiermem.tiers.catchup import TextsAhead
    from tiermem.tiers.cold import Label
    from tiermem.tiers.dialect import Dialect
    from tiermem.tiers.embed import Embedder
    from tiermem.tiers.models import (
        AppendResult,
        Checkpoint,
        ErasureReport,
        IdempotencyRecord,
        Message,
        SearchHit,
        StoredMessage,
        TurnRow,
    )
    from tiermem.tiers.statements import StatementRow
    from tiermem.tiers.tokens import TokenCounter

# One stored version of a warm view, in this column order: conversation key, kind, key
# (the session id for `session` views, else ''), version, start_position, end_position,
# body (the JSON list of sentences), tokens, summarizer, created_at.
SummaryRow = tuple[str, str, str, int, int, int, str, int, str, float]
# A view's refresh frontier: conversation key, last position, last_message_at,
# created_at, end_position of the latest rolling view, of the latest constraints view,
# the conversation's `views_seq` when read, and `views_through` (below).
FrontierRow = tuple[str, int, float, float, int | None, int | None, int, int]
# A warm view whose latest refresh failed: conversation key, kind, key, failed refreshes
# in a row, when the first of them failed and when the scheduler may retry it (unix s).
ViewFailureRow = tuple[str, str, str, int, float, float]

# Which conversations the scheduler's sweep reads (`view_frontier`). Every append batch
# bumps the row's `views_seq` in its own transaction; `mark_views_current(key, seq,
# through)` records that at `views_seq` == seq every view covered the log through
# position `through` (the last one). A conversation is behind while the two sequence
# numbers differ: a new conversation (`views_checked_seq` starts below `views_seq`),
# one appended to since, or one whose view was rewritten to cover less. The mark is
# derived data: lost or reset, it costs a sweep one more look at the conversation.
VIEWS_SEQ_START = 0
VIEWS_UNCHECKED = -1
VIEWS_BEHIND_SQL = "views_seq <> views_checked_seq"
# What the planner's exhaustive scoring reads per turn (tiers.turncache): turn id,
# position, tokens, created_at, session id, float32 vector bytes or None, the speaker's
# `name` or None, the FTS-indexed text or None.
TurnFact = tuple[int, int, int, float, str | None, bytes | None, str | None, str | None]

# index_pending reads and embeds this many batches at once (the embedder sorts them by
# length): on LoCoMo, 16 x 64 rows put 2.3x fewer tokens (padding) through the model than
# one batch of 64 in log order
INDEX_POOL_BATCHES = 16
# A pool is also cut where its message bodies pass this many characters, each body counted
# up to POOL_CHARS_PER_TEXT (about what the model reads: 256 word pieces), so a backlog
# of long texts embeds in pools of seconds as one of chat turns does, and a stopped
# catch-up (close(), an exit) waits for the pool it is embedding only. Measured on 2
# cores: 1,024 LoCoMo turns are 143-227k characters (never cut; ~4.7 s to embed); 1,024
# texts at the model's length took 55 s, cut to 250 of them ~13 s.
INDEX_POOL_MAX_CHARS = 300_000
POOL_CHARS_PER_TEXT = 1_200


def pool_rows(body_chars: Sequence[int]) -> int:
    """How many of a pool's rows (their bodies' lengths, in read order) to embed together:
    all of them unless they pass INDEX_POOL_MAX_CHARS; at least one."""
    total = 0
    for i, n in enumerate(body_chars):
        total += min(n, POOL_CHARS_PER_TEXT)
        if total > INDEX_POOL_MAX_CHARS and i > 0:
            return i
    return len(body_chars)


@dataclass(frozen=True)
class Erasure:
    """A conversation name's erasures on request (`ColdLog.erasures_of`): `at`, the
    latest's deleted_at (server time), and `newest`, the newest created_at among the
    messages any of them erased (Unix seconds; None: only tombstones written before
    SQLite m034 / PostgreSQL m019, which do not record it: tiers.schema
    TOMBSTONE_NEWEST_COLUMN). Lines a client stamped ahead of the server clock can be
    newer than the erasure and still be its data: `until` is what an import compares
    each line's created_at with."""

    at: float
    newest: float | None = None

    @property
    def until(self) -> float:
        """The time a line of the name created at or before is erased data: the later of
        the erasure and its newest erased message."""
        return self.at if self.newest is None else max(self.at, self.newest)


def check_expected(name: str, key: str, found: int, expect_position: int, expect_key: str | None, *,
                   created: bool, db_uuid: str) -> None:
    """A conditional append's check (`ColdLog.append_batch`), inside its transaction:
    `key` and `found` are the conversation's incarnation and next position as the
    transaction sees them (found 0 for one it has just created: `created`, which the
    refusal rolls back). Either refusal (an incarnation that is not the one expected, a
    position that is not) names the conversation's incarnation now (its token in database
    `db_uuid`, never the key), or that it has none (no conversation of that id: the one
    created here goes). It tells the caller nothing it may not learn: an append to the
    conversation, which its namespace lets it make, answers the same token. A position
    mismatch that named none read as "no such conversation" at the HTTP client, which
    has only the 409 body to go by."""
    now = None if created else incarnation_token(db_uuid, key)
    if expect_key is not None and key != expect_key:
        raise PositionMismatch(name, expect_position, None, exists=not created, found_incarnation=now)
    if found != expect_position:
        raise PositionMismatch(name, expect_position, found, exists=not created, found_incarnation=now)


class ColdLog(Protocol):
    """The append-only conversation log with its derived indexes and the warm tier's
    tables. Thread-safe: one instance serves every thread of a process."""

    tokens: TokenCounter  # counts stored turns and summaries exactly
    embedder: Embedder | None  # None: no vectors are computed (dense search answers [])
    db_uuid: str  # identifies the database (caches tag entries with it)
    version: int  # the schema version the store runs at
    # called after each committed batch of `index_pending` with the (key, position,
    # vector) of the turns that call embedded: each turn exactly once, in whichever
    # process flipped its `embedded` (supersession, which searches by meaning, runs here)
    @property
    def path(self) -> Path | str:
        """Where the log lives: the SQLite file, or the PostgreSQL URL without its password."""
        ...

    on_embedded: Callable[[list[tuple[str, int, np.ndarray]]], None] | None
    # called once a stored pool's `on_embedded` calls have all run, with the conversations
    # it held: work that must follow every decision of the pool (supersession's rechecks,
    # consolidation.supersede `Superseder.recheck`: log order across the pool's batches)
    on_hooked: Callable[[list[str]], None] | None
    # texts `on_embedded` will embed for a pool's turns, embedded with the pool (only
    # speed depends on it; tiers/catchup.py). An engine may ignore it.
    texts_ahead: TextsAhead | None
    # the append-time labels of a message (text, canonical role, body) -> (intent,
    # load_bearing, priority, reason): `rebuild` writes them in the same transaction as the
    # turn rows, so an interrupted rebuild never leaves turns unlabeled (nothing pinned)
    labeler: Callable[[str, str, dict[str, Any]], tuple[str, bool, int, str]] | None

    @property
    def salvaged(self) -> int:
        """Distinct stored rows this process met that could not be decoded."""
        ...

    def close(self) -> None:
        """Release what the store opened (idempotent); see "Ownership" above."""
        ...

    # -- conversations ---------------------------------------------------------------

    def key_of(self, namespace: str, name: str) -> str | None:
        """The key of the live conversation `name` in exactly `namespace`, or None."""
        ...

    def name_of(self, key: str) -> tuple[str, str] | None:
        """(namespace, name) of a live key, or None."""
        ...

    def names_of(self, keys: Sequence[str]) -> dict[str, str]:
        """key -> name for the live conversations among `keys` (any number of keys)."""
        ...

    def namespace_of(self, conversation_id: str) -> str | None:
        """The namespace of a live key, or None."""
        ...

    def conversation(self, conversation_id: str) -> dict[str, Any] | None:
        """Metadata of a live key: key, id (the name), namespace, parent_id,
        fork_position, created_at, last_message_at, messages (last position + 1)."""
        ...

    def list_conversations(self, namespace: str, *, exclude: str | None = None,
                           limit: int | None = None) -> list[str]:
        """Keys of exactly `namespace` (not the namespaces below), ordered by name,
        without `exclude`, at most `limit`."""
        ...

    def list_names(self, namespace: str, *, after: str | None = None, limit: int | None = None) -> list[str]:
        """Names of exactly `namespace`'s conversations, sorted (in the engine's order of
        names), only those after `after` (a cursor: the last name of the previous page),
        at most `limit`."""
        ...

    def list_names_and_erasure_mark(self, namespace: str, *, after: str | None = None,
                                    limit: int | None = None) -> tuple[list[str], int]:
        """`list_names` and `erasure_mark` read by one statement (an empty page: two)."""
        ...

    def count_names(self, namespace: str) -> int:
        """How many conversations exactly `namespace` has."""
        ...

    def all_keys(self) -> list[str]:
        """Every live key, sorted (rebuild and relabel walk them)."""
        ...

    def created_times(self, namespace: str | None = None) -> dict[str, Any]:
        """key -> created_at (as `conversation` gives it) of every live conversation of
        exactly `namespace`, or of every namespace when None; one read for all of them."""
        ...

    def last_position(self, conversation_id: str) -> int:
        """The last position of a key's log; -1 when it has none (or the key is gone)."""
        ...

    # -- append ----------------------------------------------------------------------

    def append(self, conversation_id: str, msg: Message, *, namespace: str = "default") -> int:
        """Append one validated message to the conversation *named* `conversation_id`
        in `namespace` (created if missing); returns its position."""
        ...

    def append_many(self, conversation_id: str, msgs: Sequence[Message], *, namespace: str = "default",
                    labels: Sequence[Label | None] | None = None) -> list[int]:
        """`append_batch(...).positions`."""
        ...

    def append_batch(self, name: str, msgs: Sequence[Message], *, namespace: str = "default",
                     labels: Sequence[Label | None] | None = None, idempotency_key: str | None = None,
                     fingerprint: bytes | None = None, expect_position: int | None = None,
                     expect_key: str | None = None) -> AppendResult:
        """Append a batch to the conversation named `name` in `namespace` in one
        transaction: the messages, their turn-index rows (with `labels`, derived values
        the caller computed) and FTS rows. The name is resolved inside the transaction,
        so a racing prune happens wholly before (a new incarnation) or after. Positions
        are contiguous, assigned by the store. Returns the key written to, the positions
        and whether the conversation was created. Vectors are computed later
        (`index_pending`), outside the transaction. An empty batch writes nothing.

        With `idempotency_key` (and the request's `fingerprint`, both or neither), inside
        the same transaction and before writing: a record of that key in the
        conversation with the same fingerprint makes this a replay (nothing written,
        `replayed=True`, the recorded positions); with another fingerprint it raises
        `IdempotencyKeyReused`. Else the batch is written and the key recorded with it.
        Concurrent appends under one key write once and all answer its positions.

        With `expect_position` (checked after a replay is answered): the batch is written
        only if the conversation's next position is `expect_position` (0: it does not
        exist yet) and, with `expect_key`, only if its incarnation is that key (the one
        a caller read: not erased or pruned, and written again, since); else
        `PositionMismatch` (`check_expected`) and nothing written."""
        ...

    def idempotency_record(self, conversation_id: str, idempotency_key: str) -> IdempotencyRecord | None:
        """What the conversation (by key) recorded of the append made under
        `idempotency_key`, or None."""
        ...

    # -- embeddings (derived) ----------------------------------------------------------

    def pending_embeddings(self, conversation_id: str | None = None, *, namespace: str | None = None) -> int:
        """Turns without a vector yet (of a key; without one, of `namespace`'s
        conversations, or all)."""
        ...

    def first_pending(self, conversation_id: str, before: int) -> int | None:
        """The lowest position before `before` of a turn of the conversation (a key)
        without a vector yet, or None: one index seek."""
        ...

    def owe_rechecks(self, conversation_id: str, positions: Sequence[int]) -> None:
        """Record corrections at `positions` to search by meaning again once every turn
        before each is embedded (consolidation.supersede `Superseder.recheck`); derived,
        a row already recorded stays as it is."""
        ...

    def rechecks(self, conversation_id: str) -> list[int]:
        """The positions of the conversation's corrections owed a recheck, in log order."""
        ...

    def take_recheck(self, conversation_id: str, position: int) -> bool:
        """Remove one recheck row: whether this call removed it (exactly one caller re-checks)."""
        ...

    def index_pending(self, *, conversation_id: str | None = None, batch: int = 64, max_rows: int | None = None,
                      progress: Callable[[int], None] | None = None, end: int | None = None,
                      pool_batches: int = INDEX_POOL_BATCHES, stop: Callable[[], bool] | None = None,
                      namespace: str | None = None, read_claimed: bool = False) -> int:
        """Embed turns that have no vector (no lock held while embedding; two processes
        catching up at once never store a vector twice); returns how many were stored.
        `namespace` (without `conversation_id`): only that namespace's turns (a tenant's
        request never embeds, nor waits for, another tenant's backlog).
        0 without an embedder. `pool_batches` batches are read and embedded together
        (grouped by length: less padding), `on_embedded` is called a batch at a time, in
        log order; `end` (with `conversation_id`) stops at that position. `stop()` is
        asked before each pool is read: true ends the catch-up there (what was embedded is
        stored; the rest stays pending). `progress(n)` follows each stored pool; raising
        `CatchUpStopped` there ends the catch-up too (a pool embedded ahead is left
        pending). A turn another catch-up of this store object is embedding is left to it
        (tiers.catchup.Claims) unless `read_claimed` (supersession's catch-up of the turns
        before a correction): then it is embedded here too, and the first to commit keeps
        its vector and runs its hook."""
        ...

    def wait_decided(self, conversation_id: str, positions: Sequence[int] | None, timeout_s: float) -> bool:
        """Wait, at most `timeout_s` seconds, until no catch-up of this store object holds
        any of `positions` (None: any turn of the conversation) between its read and the
        end of its `on_embedded` hook (tiers.catchup.Deciding): whether none does now.
        Another process's catch-ups are not seen."""
        ...

    def undecided_conversations(self) -> set[str]:
        """The conversations (keys) with turns a catch-up of this store object holds now
        (`wait_decided`'s): in memory, no statement."""
        ...

    def embeddings(self, conversation_id: str, positions: Sequence[int]) -> dict[int, np.ndarray]:
        """position -> float32 vector for those of `positions` that have one."""
        ...

    def turn_census(self, conversation_id: str) -> tuple[int, float, int] | None:
        """(first turn's id, first turn's created_at, last position), None without turns:
        how a cached copy of a conversation tells that it only grew."""
        ...

    def turn_facts(self, conversation_id: str, *, after: int = -1,
                   positions: Sequence[int] | None = None, limit: int | None = None) -> list[TurnFact]:
        """`TurnFact`s of the turns after `after` (the first `limit` of them when given),
        or at `positions` (then without the text), in log order. A turn-index row the index
        cannot use is salvaged and left out; a page still holds `limit` turns unless the
        log ends there."""
        ...

    def indexed_texts(self, conversation_id: str, positions: Sequence[int]) -> dict[int, str]:
        """position -> the text the keyword index holds, for those of `positions` that have a
        turn and an indexed text: the very text a `turn_facts` load read (the turn cache
        derives another zone's told periods from it), without the vectors and names."""
        ...

    # -- reads ---------------------------------------------------------------------------

    def history(self, conversation_id: str, *, start: int = 0, end: int | None = None) -> list[StoredMessage]:
        """Messages at positions start..end (inclusive; end None: to the last), in order,
        exactly as appended; bad rows salvaged."""
        ...

    def get(self, conversation_id: str, positions: Sequence[int]) -> list[StoredMessage]:
        """The messages at `positions` (missing ones absent), in log order."""
        ...

    def get_many(self, keys: Sequence[tuple[str, int]]) -> list[StoredMessage]:
        """Messages for (key, position) pairs across conversations."""
        ...

    def latest_checkpoint(self, conversation_id: str, at_or_before: int | None = None) -> Checkpoint | None:
        """The checkpoint with the highest position <= `at_or_before` (newest among equals)."""
        ...

    def active(self, conversation_id: str) -> tuple[Checkpoint | None, list[StoredMessage]]:
        """The latest checkpoint and the messages after it (all of them without one)."""
        ...

    def turns(self, conversation_id: str, *, start: int = 0, end: int | None = None) -> list[TurnRow]:
        """Turn-index rows (labels and explicit pins included) at start..end, in order."""
        ...

    def turns_and_pin_version(self, conversation_id: str, *, start: int = 0,
                              end: int | None = None) -> tuple[list[TurnRow], int]:
        """`turns` and `pin_version` read in one statement (one snapshot: the version
        counts exactly the pin changes the rows show), so the hot tier's check of the
        version on every read and admit (tiers.hot, pin versions) costs no round trip of
        its own; only a range without turns reads the version in a second one."""
        ...

    def turns_at(self, conversation_id: str, positions: Sequence[int]) -> list[TurnRow]:
        """Turn-index rows at `positions`, in log order."""
        ...

    def turns_at_many(self, keys: Sequence[tuple[str, int]]) -> list[TurnRow]:
        """Turn-index rows for (key, position) pairs across conversations, in one
        statement (per `TURN_KEYS_PER_READ` pairs), not one per conversation: grouped by
        conversation in first-seen order, each in log order (missing ones absent)."""
        ...

    def tail_turns(self, conversation_id: str, limit: int) -> list[TurnRow]:
        """The last `limit` turns, in log order."""
        ...

    def pinned_turns(self, conversation_id: str) -> list[TurnRow]:
        """Turns pinned explicitly or labeled load-bearing (superseded ones included)."""
        ...

    def pin_candidates(self, conversation_id: str, *, min_priority: int, limit: int) -> list[TurnRow]:
        """Explicit pins and unsuperseded load-bearing turns of at least `min_priority`,
        best first (priority, then newest), at most `limit`."""
        ...

    def control_rows(self, conversation_ids: Sequence[str]) -> dict[str, list[tuple[int, dict[str, Any]]]]:
        """Per conversation, its control rows (tiers.formats: retractions, clears) as
        (position, body) in log order: what `hidden_positions` reads to hide items from
        every context, view and search, wherever they are in the log."""
        ...

    def pin_version(self, conversation_id: str) -> int:
        """A counter that moves, in the database, for every writer in any process,
        whenever `pin_candidates` or `superseded_pins` could answer differently; 0
        before any. Never moves backwards for a key."""
        ...

    def supersession_version(self, conversation_id: str) -> int:
        """A counter that moves, in the database, for every writer in any process, whenever
        supersession could answer differently: a turn's `superseded_by` set, changed or
        cleared (a turn written or deleted with one set too), a statement-level
        supersession row written or deleted. Nothing else moves it (an append, a label, a
        pin: `pin_version` moves for those); 0 before any. Never moves backwards for a key."""
        ...

    def superseded_pins(self, conversation_id: str, *, min_priority: int, limit: int) -> list[TurnRow]:
        """Load-bearing turns of at least `min_priority` that a later turn superseded
        and nobody pinned, newest first."""
        ...

    def latest_position(self, conversation_id: str, role: str, *, after: int = -1,
                        skip: Collection[int] = ()) -> int | None:
        """The last position of a turn of `role` after `after`, not in `skip`; or None."""
        ...

    def plans(self, conversation_id: str, last_position: int | None = None) -> list[dict[str, Any]]:
        """Stored plans (`store_plan`), oldest first, optionally those at one last position."""
        ...

    def plan_turns(self, conversation_id: str, *, before: int | None = None, limit: int) -> list[int]:
        """The distinct last positions that stored plans were made at, newest first, those
        below `before` (None: from the newest), at most `limit`; no plan is read."""
        ...

    def plans_at(self, conversation_id: str, last_position: int, *, after: int | None = None,
                 limit: int) -> tuple[list[dict[str, Any]], int | None]:
        """A page of the plans stored at one last position, oldest first: those after
        the turn's first `after` (None: from the first), at most `limit` read and decoded
        (as `plans`', each with "number", its place among the turn's plans from 1), and
        the next page's cursor (the number of the last plan read), None when this page
        reaches the end. A row that cannot be decoded is salvaged, so a page may show
        fewer than `limit` (the numbers of the others stay). Never a row id: the table is
        every namespace's, so its ids count others' plans (design invariant 10)."""
        ...

    # -- derived labels and user state ------------------------------------------------------

    def set_labels(self, conversation_id: str, labels: Sequence[tuple[int, str, bool, int, str]]) -> None:
        """(position, intent, load_bearing, priority, reason) for turns; derived data.
        Many turns are written in short transactions in position order (tiers.dialect
        LABEL_BATCH_TURNS), so the conversation's appends wait one batch at most; a reader
        may see the pass part done, and one that fails (busy) leaves the batches before it
        written: calling it again with the same labels finishes it."""
        ...

    def set_superseded(self, conversation_id: str, pairs: Sequence[tuple[int, int]],
                       labels: Sequence[tuple[int, str, bool, int, str]] = ()) -> tuple[int, int] | None:
        """(old position, superseding position) pairs; a derived fact, messages untouched;
        with `labels` (as `set_labels`'s) written in the same transaction (a correction
        labelled as its target was). Returns the `pin_version` this write moved it to (read
        in its transaction) and how many moves were its own (one per turn whose
        superseded_by, load_bearing or priority it changed: the last ones up to that
        version, no other writer's among them), None when it moved nothing: the hot tier
        applies them as its own (tiers.hot, pin versions)."""
        ...

    def set_superseded_statements(self, conversation_id: str, rows: Sequence[StatementRow], *,
                                  over: Collection[int] = ()) -> None:
        """Statement-level supersession rows (tiers/statements.py): derived, messages
        untouched; a row already recorded stays as it is, unless the turn it names is one
        of `over` (turns a pop hides): then the new row replaces it."""
        ...

    def superseded_statements(self, conversation_id: str, positions: Sequence[int] | None = None
                              ) -> list[StatementRow]:
        """The statement-level supersessions of the conversation (of `positions` only,
        when given), by position and start."""
        ...

    def superseded_within(self, conversation_id: str, *, start: int, end: int) -> list[tuple[int, int]]:
        """(position, recorded `superseded_by`) of the turns from `start` to `end` (both
        included) that a later turn superseded whole, in log order: what a caller's
        checkpoint covering them was written before (planner.candidates `summary`). As
        recorded (a popped correction still named: tiers.statements `Hidden` reads past
        it). One range read of the conversation's turns, in the database."""
        ...

    def fork_links(self, conversation_ids: Collection[str]) -> dict[str, tuple[str, int]]:
        """Of the conversation keys given, those a `fork` made: key -> (the parent's key,
        the last position copied from it), as recorded when the fork was made (the
        parent's key stays, also once the parent is erased). One read by primary key per
        FORK_LINKS_PER_READ keys."""
        ...

    def turns_superseded_by(self, conversation_id: str, by: Collection[int], *, start: int, end: int) -> list[int]:
        """The positions from `start` to `end` (both included) of the turns whose recorded
        `superseded_by` is one of `by`, in log order: what popped corrections had
        superseded (consolidation.views `_restored`). As recorded: a popped correction's
        targets keep it (tiers.statements `Hidden` reads past it). No index holds
        `superseded_by`: a range read of the conversation's turns, in the database."""
        ...

    def superseded_statements_many(self, keys: Sequence[tuple[str, int]]) -> list[tuple[str, StatementRow]]:
        """The statement-level supersessions of the turns at (key, position) pairs across
        conversations, in one statement (per `TURN_KEYS_PER_READ` pairs), as (key, row):
        grouped by conversation in first-seen order, each by position and start."""
        ...

    def set_pin(self, conversation_id: str, position: int, priority: int | None) -> int | None:
        """Record (priority) or clear (None) an explicit pin; `PositionOutOfRange` past the
        log, `ConversationNotFound` for a gone key. Returns the `pin_version` this write
        moved it to (read in its transaction, so no other writer's change), None when it
        changed nothing (a clear of a position not pinned): the hot tier's check that its
        set missed no pin change before this one (tiers.hot, pin versions)."""
        ...

    def store_plan(self, conversation_id: str, plan_json: str) -> None:
        """Keep a context() plan, tagged with the log's last position."""
        ...

    # -- checkpoint, fork, retention -------------------------------------------------------

    def checkpoint(self, conversation_id: str, summary: str, position: int,
                   metadata: dict[str, Any] | None = None) -> Checkpoint:
        """A fold: `summary` stands in for positions <= `position`. Deletes nothing."""
        ...

    def fork(self, conversation_id: str, up_to: int, *, new_id: str | None = None,
             max_id_chars: int = DEFAULT_FORK_MAX_ID_CHARS) -> str:
        """Copy positions 0..up_to (messages, turn rows, FTS rows, vectors, the latest
        checkpoint at or before up_to, the newest rolling view version ending at or
        before up_to, explicit pins) into a new conversation named
        `new_id` (unique in the parent's namespace, `ValidationError` otherwise; none:
        `fork_id` of the parent's name, at most `max_id_chars` characters);
        returns the child's key. Undecodable rows stay gaps. Whole or not at all to
        every reader: PostgreSQL in one transaction; SQLite, whose write lock stalls
        every other writer, copies a long prefix in batches under a key bound to no
        name and publishes it in one short transaction (a process killed mid-way
        leaves nothing reachable; the next open deletes its rows)."""
        ...

    def prune(self, older_than: float, *, namespace: str | None = None, all_namespaces: bool = False,
              on_erased: Callable[[Sequence[str]], None] | None = None) -> ErasureReport:
        """Delete whole conversations of exactly `namespace` (or, only when asked, of
        every namespace) idle since before `older_than`: whose last message is older, and,
        for a fork, its creation too (`tiers.dialect.PRUNE_IDLE_SQL`: a fork carries its
        parent's message times), with every derived row; tombstones left. Each conversation goes whole or not at all;
        SQLite commits per batch of conversations (`delete_namespace`, also for
        `on_erased`)."""
        ...

    def prune_preview(self, older_than: float, *, namespace: str | None = None,
                      all_namespaces: bool = False) -> ErasureReport:
        """What `prune` with these arguments would erase now, erasing and writing
        nothing: its conversations, messages and keys in ERASURE_ORDER, no tombstones,
        `bytes_after == bytes_before` (`tiermem prune --dry-run`)."""
        ...

    def delete_conversation(self, conversation_id: str, *,
                            on_erased: Callable[[Sequence[str]], None] | None = None) -> ErasureReport:
        """Erase one key on request: every row, derived or not; a tombstone left;
        `ConversationNotFound` if it is not live. SQLite erases a conversation larger
        than a batch (`cold.ERASE_BATCH_MESSAGES`) in two steps: one transaction detaches
        it (tombstone written, its metadata row deleted: no read reaches it from then
        on, its id is free), then its rows go in batches, so the write lock is never
        held for its whole length; a process killed between them leaves its rows owed,
        deleted by the next open or erasure. `on_erased(keys)` runs after the commit
        that makes it unreachable (and, on SQLite, again once its rows are gone)."""
        ...

    def delete_namespace(self, namespace: str, *, on_erased: Callable[[Sequence[str]], None] | None = None
                         ) -> ErasureReport:
        """Erase `namespace` and the namespaces below it (`a` takes `a/b`, not `ab`).
        Each conversation goes whole or not at all. PostgreSQL erases in one
        transaction (its row locks stall nobody else); SQLite, whose write lock stalls
        every writer, commits per batch of conversations (`cold.ERASE_BATCH_MESSAGES`),
        so a process killed meanwhile leaves part of the namespace, which a retry
        erases. `on_erased(keys)` runs after each commit with the keys it erased (once
        on PostgreSQL), so the caller drops its copies of them as they go, also when a
        later batch fails."""
        ...

    def finish_owed_scrub(self, *, owed_for_s: float) -> bool:
        """A long-lived process's periodic look (tiermem.Memory's indexer thread): an
        erasure's scrub or rows left owed (its process killed after a commit, a scrub
        busy or failed) wait for the next open or erasure, which a serving process never
        does; this finishes them as an open would, once this process has seen them owed
        for `owed_for_s` seconds (an erasure running in another process owes them until
        its end, and is not raced). One read when nothing is owed. Returns whether it
        tried (what it could not do stays owed, logged)."""
        ...

    def reclaim(self) -> bool:
        """Hand the space of deleted rows back to the engine/file system; True when no
        data file holds a deleted byte afterwards (`ErasureReport.scrubbed`)."""
        ...

    def tombstones(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """What is left of pruned and erased conversations: id (the name), namespace,
        reason, counts, created_at, deleted_at; no content. The oldest erasure first, one
        erasure's conversations as its report lists them (`dialect.TOMBSTONE_ORDER`)."""
        ...

    def tombstones_and_erasure_mark(self, namespace: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """`tombstones` and `erasure_mark` read by one statement (none listed: two)."""
        ...

    def erasure_mark(self) -> int:
        """The newest tombstone's id (0: none yet); ids grow in commit order."""
        ...

    def erasures_of(self, namespace: str, names: Sequence[str]) -> dict[str, Erasure]:
        """Each of `names` in `namespace` erased on request (not pruned): name -> its
        latest erasure's time and the newest created_at among the messages its erasures
        took (`Erasure`), which an import compares the lines it would write with."""
        ...

    def key_and_erasure_mark(self, namespace: str, name: str) -> tuple[str | None, int]:
        """`key_of` and `erasure_mark` read by one statement."""
        ...

    def erased_after(self, mark: int, limit: int) -> tuple[int, list[tuple[int, str]]]:
        """The newest tombstone's id and the (tombstone id, key) of the conversations
        erased or pruned after `mark`, oldest first, at most `limit`, read by one
        statement: how an erasure reaches every process sharing the store (a newest id
        below `mark`: the store went back, a backup restored under the process)."""
        ...

    def defer_purge(self, keys: Sequence[str]) -> None:
        """Remember erased keys whose Redis keys are not deleted yet. Every erasure and
        prune records its keys here in its own transaction (a process killed after the
        commit leaves them owed, not forgotten); `purged` crosses them off."""
        ...

    def deferred_purges(self) -> list[str]:
        """The keys `defer_purge` remembered, oldest first."""
        ...

    def purged(self, keys: Sequence[str]) -> None:
        """Forget keys whose Redis keys are now deleted."""
        ...

    # -- search ----------------------------------------------------------------------------

    def search_dense(self, query_vec: np.ndarray, k: int, *, conversation_id: str | None = None,
                     namespace: str | None = None, exclude: str | None = None,
                     before: int | None = None) -> list[tuple[str, int, float]]:
        """(key, position, L2 distance) of the k nearest turns of a key or of exactly a
        namespace (without `exclude`), nearest first. [] without vectors. `before` (with
        a key): the k nearest among positions below it only."""
        ...

    def search_bm25(self, query: str, k: int, *, conversation_id: str | None = None,
                    namespace: str | None = None, exclude: str | None = None) -> list[tuple[str, int, float]]:
        """(key, position, score) of the k best keyword matches, best first; lower
        scores are better (bm25 convention). No user text can break the query syntax."""
        ...

    def search(self, query: str, k: int = 10, *, conversation_id: str | None = None, namespace: str | None = None,
               query_vec: np.ndarray | None = None, rrf_k: int = 60, depth: int | None = None,
               dense: bool = True) -> list[SearchHit]:
        """Hybrid search: dense and keyword lists fused by reciprocal rank (`dense` False:
        the keyword list alone)."""
        ...

    # -- rebuild and stats -------------------------------------------------------------------

    def rebuild(self, *, progress: Callable[[int], None] | None = None, embed: bool = True) -> dict[str, int]:
        """Recompute the turn index, FTS and vectors from the messages; labels from
        `labeler` when set (else cleared), supersession cleared for its replay. SQLite
        rewrites in batches of messages, its lock free between them: every message
        keeps its turn and FTS rows at every commit, and a rebuild killed mid-way
        leaves a store that reads correctly, re-embeds at its next catch-up and is
        finished by a rerun."""
        ...

    def integrity(self) -> dict[str, int]:
        """Counts of messages, turns, fts and vectors rows (equal when nothing drifted)."""
        ...

    def stats(self) -> dict[str, Any]:
        """conversations, messages, namespaces, checkpoints, pending_embeddings,
        salvaged_rows, schema_version, db_bytes, path (where the data lives)."""
        ...

    def namespace_stats(self, namespace: str) -> dict[str, Any]:
        """conversations, messages, pending_embeddings of exactly `namespace`."""
        ...

    def stats_and_erasure_mark(self) -> tuple[dict[str, Any], int]:
        """`stats`, and `erasure_mark` read by its counts' statement."""
        ...

    def namespace_stats_and_erasure_mark(self, namespace: str) -> tuple[dict[str, Any], int]:
        """`namespace_stats`, and `erasure_mark` read by its counts' statement."""
        ...

    # -- the warm tier's tables (tiers.warm) -------------------------------------------------

    def latest_summaries(self, conversation_id: str, kind: str, key: str, limit: int) -> list[SummaryRow]:
        """The newest `limit` stored versions of one view, newest first."""
        ...

    def summary_version(self, conversation_id: str, kind: str, key: str, version: int) -> SummaryRow | None:
        """One stored version of a view."""
        ...

    def summary_versions(self, conversation_id: str, kind: str, key: str) -> list[int]:
        """The stored version numbers of a view, ascending."""
        ...

    def turn_and_newest_view(self, conversation_id: str, position: int, kind: str,
                             key: str) -> tuple[TurnRow | None, tuple[int, float] | None]:
        """The turn-index row at `position` (None: the log holds none there, or one that
        cannot be used, as `turns_at` leaves it out) and the (version, created_at) of the
        view's newest stored row whose version is in range (None: it has none), read in
        one statement: the warm cache's check of an entry on every hit (tiers.warm) costs
        no round trip beyond the turn read it already made. Without that turn, the view's
        part is None too (not read: the entry is dropped anyway)."""
        ...

    def latest_session_summaries(self, conversation_id: str) -> list[SummaryRow]:
        """The newest stored version of every `session` view, by start position, key."""
        ...

    def session_summary_ends(self, conversation_id: str) -> dict[str, int]:
        """session id -> end_position of its newest stored version."""
        ...

    def session_summary_keys(self, conversation_id: str, after: str | None, limit: int) -> list[str]:
        """The session ids that have a stored `session` view, in order (the engine's
        collation, as conversation listings sort), those after `after` (None: from the
        first), at most `limit`: one page, read without reading every session's rows."""
        ...

    def summary_errors(self, conversation_id: str, kind: str, key: str, limit: int) -> list[tuple[str, float]]:
        """(error, at) of a view's recent refresh errors, newest first."""
        ...

    def load_bearing_between(self, conversation_id: str, after: int, end: int) -> list[TurnRow]:
        """Load-bearing turns at positions in (after, end], in log order."""
        ...

    def session_turns(self, conversation_id: str, session_id: str, after: int, end: int) -> list[TurnRow]:
        """Turns of one session at positions in (after, end], in log order."""
        ...

    def view_frontier(self) -> list[FrontierRow]:
        """One `FrontierRow` per live conversation with messages whose views may be
        behind (`VIEWS_BEHIND_SQL`), through a partial index: the sweep's cost follows
        the conversations written since their views were last found current, not the
        store's size."""
        ...

    def mark_views_current(self, conversation_id: str, seq: int, through: int) -> bool:
        """Record that every view of the conversation covered the log through position
        `through` when its `views_seq` was `seq` (as `view_frontier` read them). Only if
        `views_seq` is still `seq`: an append since (which bumped it) keeps the
        conversation behind. True when recorded."""
        ...

    def turn_times(self, conversation_id: str, after: int, *, session_id: str | None = None,
                   limit: int | None = None) -> list[tuple[int, str | None, float]]:
        """(position, session id, created_at) of turns after `after`, in log order."""
        ...

    def turn_created_at(self, conversation_id: str, position: int) -> float | None:
        """created_at of one turn, or None."""
        ...

    def unlabeled_tail(self, conversation_id: str, after: int) -> list[tuple[int, float]]:
        """(position, created_at) of turns after `after` without an intent label."""
        ...

    def put_summary(self, row: SummaryRow, *, fold_text: str | None, keep_versions: int | None,
                    keep_current: Callable[[SummaryRow], bool]) -> tuple[int, SummaryRow | None]:
        """Store `row` (its version field ignored) as the view's next version in one
        transaction. `ConversationNotFound` for a key that is gone (its conversation
        row: also one detached by an erasure whose batches are still deleting its rows)
        or has no messages;
        `ValidationError` when its end_position is past the log. If the newest stored
        version ends after `row` and `keep_current(newest)` is true, nothing is written
        and (newest version, newest) is returned; else (new version, None). With
        `fold_text`, the same transaction writes a checkpoint at end_position holding it
        (metadata source 'warm'). With `keep_versions`, versions older than the newest
        `keep_versions` of the view, and of the conversation's warm folds, are deleted.
        A `row` equal to the newest version (same range, summarizer and body: a second
        refresher of the same log) is not written either, nor folded again. A fold's
        metadata carries its lines' source positions (`Checkpoint.lines`)."""
        ...

    def claim_view(self, conversation_id: str, kind: str, key: str, holder: str, ttl_s: float, *,
                   replacing: str | None = None) -> bool:
        """Take the lease to refresh one view for `ttl_s` seconds (a `view_claims` row):
        True when `holder` holds it now (it was free, expired, already `holder`'s, or
        `replacing`'s: a holder the caller knows is dead), False while another holder's
        lease is live. Across processes and engines, so a summarizer (perhaps a paid LLM)
        does not run twice for the same view. Expiry is by the database's clock, not the
        caller's (hosts sharing a log may disagree by minutes)."""
        ...

    def renew_view(self, conversation_id: str, kind: str, key: str, holder: str, ttl_s: float) -> bool:
        """`claim_view` for a refresh going on with its view (before each chunk of a
        backlog), only while the conversation exists: ConversationNotFound, and no
        `view_claims` row, once it is gone (erased while the refresh waited on a
        summarizer). The check and the claim are one transaction, which an erasure
        cannot slip into."""
        ...

    def view_holder(self, conversation_id: str, kind: str, key: str) -> str | None:
        """Who holds the lease on a view, live or expired (None: nobody)."""
        ...

    def release_view(self, conversation_id: str, kind: str, key: str, holder: str) -> None:
        """Give back `holder`'s lease on a view (nothing if it holds none)."""
        ...

    def record_summary_error(self, conversation_id: str, kind: str, key: str, error: str, *, keep: int) -> None:
        """Record a failed refresh of a view, keeping its newest `keep` errors. Nothing
        is written once the conversation is gone (erased while its refresh waited on a
        summarizer: the error may quote its turns); the check and the write are one
        transaction, which an erasure cannot slip into."""
        ...

    def view_failure(self, conversation_id: str, kind: str, key: str) -> ViewFailureRow | None:
        """The view's `view_failures` row: None when its latest refresh did not fail."""
        ...

    def put_view_failure(self, row: ViewFailureRow) -> None:
        """Write (insert or replace) a view's `view_failures` row. It holds no text. Its
        times are the database's clock (`database_now`). Nothing is written once the
        conversation is gone, as for `record_summary_error`."""
        ...

    def clear_view_failure(self, conversation_id: str, kind: str, key: str) -> None:
        """Delete the view's `view_failures` row (a refresh of it succeeded)."""
        ...

    def database_now(self) -> float:
        """The database's clock in unix seconds: what a view's lease expires by and its
        failure backoff is timed by, alike for every host sharing the log (a host's own
        clock may be minutes off; SQLite's database is on this host anyway)."""
        ...

    def views_held_back(self, now: float) -> list[tuple[str, str, str]]:
        """(conversation key, kind, key) of the failing views whose retry time is after
        `now`, for every process's scheduler to leave alone until then."""
        ...

    def view_failure_stats(self) -> tuple[int, float | None]:
        """(failing views, when the oldest of their failures in a row began; None when
        none fails): the operator's figures, one aggregate over `view_failures`."""
        ...


class SqlAccess(Protocol):
    """Raw access for the storage layer's own tools that run their own SQL on either
    engine (`tiers.migrate_store`), so they need no engine's private members. Never for
    the planner, consolidation or the facade: they use `ColdLog` only."""

    @property
    def dialect(self) -> Dialect:
        """How the engine's SQL text differs (placeholders, GREATEST) (tiers.dialect)."""
        ...

    def reading(self) -> contextlib.AbstractContextManager[Any]:
        """A connection for a sequence of reads (SQLite: the store's lock is held meanwhile)."""
        ...

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """One write transaction: committed when the block ends, rolled back if it raises."""
        ...

    def maintenance(self) -> contextlib.AbstractContextManager[None]:
        """Within it, this thread's connections get the deadline of work long by design
        (PostgreSQL: its maintenance_timeout_s instead of the per-operation timeout, after
        which a checkout is cut; SQLite: none, nothing changes): for one statement or
        transaction that must cover the whole store (every issued key at once), never
        for a loop over conversations, which takes one connection per conversation."""
        ...

    def ensure_vector_width(self, dim: int, model: str | None = None) -> None:
        """Make the vector index `dim` wide, its vectors recorded as `model`'s (the
        embedder's `model_identity()`; None: unrecorded); a different width or recorded
        model than stored drops the derived vectors and marks every turn for re-embedding."""
        ...


if TYPE_CHECKING:  # mypy proves both engines satisfy the interface
    from tiermem.tiers.cold import ColdStore
    from tiermem.tiers.postgres import PostgresStore

    def _sqlite_is_a_cold_log(store: ColdStore) -> ColdLog:
        return store

    def _postgres_is_a_cold_log(store: PostgresStore) -> ColdLog:
        return store

    def _sqlite_gives_sql_access(store: ColdStore) -> SqlAccess:
        return store

    def _postgres_gives_sql_access(store: PostgresStore) -> SqlAccess:
        return store
