"""`Memory`: the facade an agent calls every turn.

It validates at the edge (nothing invalid reaches a tier), writes the cold log first
(the source of truth), then updates what is derived: turn labels, the hot working set
in Redis, embeddings (in a background thread, outside any write lock), warm views.
A failure of a derived tier never fails an append whose cold write committed: the hot
tier is rebuilt from the log when Redis returns, embeddings are caught up from
`turns.embedded = 0`. So is the embedding model: when it cannot be loaded (its
directory deleted or damaged after start: `model_unavailable_errors`; any other error of
the embedder is a bug, raised as itself), `context` ranks by keywords only and its plan
says why (planner.build), so does `search` (its answer's `degraded`); both name the error's
type only, as they reach tenants over HTTP and MCP (its message names the model's path:
the log and `stats()` keep it), `stats()` and /healthz report the embedder `degraded` until a
vector is computed again, appends store, and their turns get their vectors when the
model is back. Such an episode is logged once in full (when it starts), then in one short
line at most every `DEGRADED_LOG_INTERVAL_S`, and ends with an info line (`_EpisodeLog`);
each of those records names its episode (`EPISODE_ATTR`), so that a one-shot process (the
CLI) may say the degradation in one line of its own instead.

Thread-safe: one instance can serve every thread of a web server.

Whatever it does with a conversation's text (labels, supersession, keyword stems, token
counts, vectors: append, the catch-up's hooks, context, search, facts, relabel, and
every view refresh, the scheduler's and a sweep's too, by `ViewMaintainer.refresh`; a
rebuild's rows by the store) runs within that conversation's memo scope (`tiers.memo`),
so the process-wide caches
answer a text from memory only for the conversation that wrote it: no caller's latency
says what another tenant wrote.

An erasure or prune reaches every process that shares the store, not only the one that
erased: each public call that touches the store (append, context, search, facts, history,
active, pin, unpin, checkpoint, fork, catch_up, consolidate, rebuild, an erasure or prune,
and conversations, tombstones, stats, purge_deferred, warm_up, which read no text but may
be all a process calls) reads the newest tombstone's id in passing, with the statement
that looks its conversation up (an append: on PostgreSQL in its one statement, on SQLite
after its write), so a call that names a conversation makes no round trip more (a
namespace's search, catch-up, sweep, rebuild, warm-up, erasure, prune or deferred purge
reads it with one index seek of its own, `ColdLog.erased_after`; a listing, tombstones
and stats read it as a column of the statement they send anyway, `*_and_erasure_mark`).
Past the last
one this Memory acted on, the tombstones since (`_catch_erasures`) name what to drop:
what this process keeps of those conversations (`_drop_copies`: the text memos, the
turn cache, the planner's pin candidates and statements, every epoch state that is or
shows one of them, the known keys), so no process holds an erased text past its next
call; the indexer's thread checks too (every `INDEXER_WAKE_S`), so an idle process
drops it within that. A call already under way when its process drops those copies
(another thread's check, or this process's own erasure) may have read the text before
the erasure committed and fill a cache with it after the drop (its epoch state, the turn
cache, a memo): each call that can fill one notes, at its start, this Memory's drops of
copies so far (`_drops`) and its mark, and when the drops moved on before it returns, it
drops again the copies of every conversation erased past that mark (`_erasures_during`,
the indexer's catch-up and each view the scheduler's thread refreshes too, whose runs
also check first: `make_scheduler`; one index seek, only then). A newest tombstone below
the mark (a backup restored under the running process: tombstone ids start again below it,
and every erasure would be skipped until they passed it) is a reset: every copy is
dropped and the store's mark taken (`_catch_erasures`).

At interpreter exit, the background work of every Memory not closed (the indexer, the
scheduler) is stopped and waited for (`_stop_background_at_exit`): onnxruntime aborts
the process when it exits while a daemon thread is inside a model call, so a script
that appends and exits without `close()` would report a crash after its work was done.
A stopped indexer (exit or `close()`) reads no further pool and stores what it embedded;
the rest stays pending for the next catch-up, so the wait is about a pool (pools are cut
by characters too: tiers.store.INDEX_POOL_MAX_CHARS), not a backlog.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime as dt
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from tiermem.config import MAX_ID_CHARS_LIMIT, Config
from tiermem.consolidation.classify import TurnClassifier
from tiermem.consolidation.classify import clear_memo as forget_labels
from tiermem.consolidation.supersede import INLINE_INDEX_ROWS, Appended, Recorded, Superseder, Validity
from tiermem.consolidation.supersede import clear_memo as forget_slots
from tiermem.tiers.catchup import PendingTurn
from tiermem.tiers.cold import KEY_SEPARATOR, ColdStore
from tiermem.tiers.embed import Embedder, query_embedding
from tiermem.tiers.embed_onnx import build_embedder, embedder_loaded, model_unavailable_errors, start_build
from tiermem.tiers.errors import (
    BudgetTooSmall,
    ConversationNotFound,
    EmbeddingModelConflict,
    EmbeddingUnavailable,
    PositionMismatch,
    ValidationError,
)
from tiermem.tiers.formats import hidden_positions, is_control
from tiermem.tiers.lexical import forget_terms
from tiermem.tiers.memo import memo_scope, move_scope, new_conversation_scope, remembered_for
from tiermem.tiers.models import (
    FOLD_LINES_KEY,
    INCARNATION_DIGEST_BYTES,
    MAX_BUDGET_TOKENS,
    AppendOutcome,
    Checkpoint,
    ErasureReport,
    FoldLine,
    Message,
    PruneReport,
    SearchHit,
    SearchHits,
    StoredMessage,
    append_fingerprint,
    check_idempotency_key,
    check_int,
    check_position,
    check_summary,
    check_text,
    incarnation_token,
    is_incarnation_token,
    key_name,
    message_text,
    parse_message,
    speaker_name,
    stamped,
    validate_id,
    validate_namespace,
)
from tiermem.tiers.recount import Recount
from tiermem.tiers.statements import turn_states
from tiermem.tiers.store import INDEX_POOL_BATCHES, ColdLog
from tiermem.tiers.tokens import REPLY_PRIMING_TOKENS, BpeTokenCounter, TokenCounter
from tiermem.tiers.turncache import PENDING_RECHECK_TURNS, TurnCache
from tiermem.tiers.zones import Zone, optional_timezone

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

    from tiermem.consolidation.scheduler import Consolidated, ConsolidationScheduler
    from tiermem.hotlink import HotLink
    from tiermem.planner.build import HotView, Planner, SummaryBlock
    from tiermem.planner.plan import Context
    from tiermem.tiers.hot import RedisClient
    from tiermem.tiers.postgres import PostgresStore
    from tiermem.tiers.store import SqlAccess

log = logging.getLogger("tiermem")

DEFAULT_NAMESPACE = "default"
MAX_SEARCH_K = 200
MAX_BATCH_MESSAGES = 10_000
MAX_HISTORY_PAGE = 10_000  # messages per history page
DEFAULT_CONVERSATIONS_PAGE = 100  # conversation ids per page of a namespace's listing
MAX_CONVERSATIONS_PAGE = 1_000  # at most this many ids in one page
DEFAULT_BUDGET_TOKENS = 2000
DEFAULT_PIN_PRIORITY = 50
MIN_PIN_PRIORITY = 0  # demoted first under pressure
MAX_PIN_PRIORITY = 100
# (intent, load_bearing, priority, reason) of a control row (tiers.formats: a pop, a clear)
CONTROL_LABEL: tuple[str, bool, int, str] = ("chitchat", False, 0, "control row: hides items, never sent")
MAX_AGE_S = 1e12  # seconds (~31,700 years): a prune age past it selects nothing anyway
# checkpoints looked at, newest first, for one that may stand in for what it covers (an
# older one is needed only when a later pop hides an item inside a fold that lacks its
# lines' positions, or every line of a fold)
MAX_FOLDS_TRIED = 16
# conversations whose key an append finds without a lookup (Memory._keys): ~3.5 MB at
# most with 40-character namespaces and ids; emptied when full
MAX_KNOWN_KEYS = 10_000
# logged once per process when an append's `expect_incarnation` is a conversation's key (what
# `incarnation` was before 0784bc0, saved by a caller) rather than its token
LEGACY_INCARNATION_WARNING = ("expect_incarnation was given a conversation key, as append_outcome answered "
                              "`incarnation` before 0784bc0: taken for that incarnation's token for now; pass the "
                              "token append_outcome answers (logged once per process)")
_legacy_incarnation_lock = threading.Lock()
_legacy_incarnation_warned = False
# the key a conditional append expects when the token it was given stands for no live
# incarnation: no key is empty (a name is never empty), so the append's own check
# refuses it as an incarnation gone since
NO_KEY = ""
# the longest an append waits (seconds) for another catch-up of this process (the
# background indexer, a context's or a search's) that read its correction first to
# record the correction's supersession (`ColdLog.wait_decided`), so that it is recorded
# before the append returns whoever embeds it: that catch-up's pool (up to ~13 s of
# embedding on 2 cores, tiers.store.INDEX_POOL_MAX_CHARS), the pool it stores first, and
# its hooks. Past it the append returns and that catch-up records it when its hook runs.
SUPERSESSION_WAIT_S = 30.0
# how much of the embedder's error the stats quote (a path, a library's message: a plan
# names the type only, as it goes to tenants)
MAX_EMBED_REASON_CHARS = 300
# what a search answers as `degraded` when its query has no vector: the error's type only,
# as /healthz says it (its message names the model's path, which no tenant is shown)
SEARCH_KEYWORDS_ONLY = "keyword (BM25) ranking only, no query vector: the embedding model cannot be used ({error})"
# while a failure repeats at every call (the embedding model lost, a catch-up of pending
# turns that fails), the most often a short line says it is still there, after the
# traceback its first occurrence logged (`_EpisodeLog`): an agent's every turn would
# otherwise repeat the same stack
DEGRADED_LOG_INTERVAL_S = 300.0
# the attribute of an episode's log records (`_EpisodeLog`) that names the episode: the
# CLI, one call per process, says a degraded embedder in one line of its own and leaves
# out the records of its episode (their traceback comes with --debug)
EPISODE_ATTR = "tiermem_episode"
EMBEDDER_EPISODE = "embedder"  # the embedding model cannot be used
CATCH_UP_EPISODE = "catch-up"  # pending turns cannot be embedded before reads, for another reason
# erased conversations (tombstones) one read of `Memory._catch_erasures` takes: a
# namespace's erasure of more is read page by page within the same check
ERASURES_PAGE = 1000
# keys this Memory erased itself and has dropped already, remembered until its check of
# erasures reads their tombstones (`Memory._dropped_here`); emptied when full, which
# costs one more dropping of copies already gone
MAX_DROPPED_HERE = 100_000
# seconds between the background indexer's looks for pending turns (and for erasures
# other processes committed: an idle process drops their copies within this)
INDEXER_WAKE_S = 5.0
# An erasure's scrub (or a detached conversation's rows) left owed (its process killed
# after a commit, a scrub busy) waits for the next open or erasure of the store, which a
# serving process never does: the indexer's thread looks every INDEXER_WAKE_S and
# finishes one it has seen owed this long (seconds; ColdLog.finish_owed_scrub). Not
# sooner: an erasure running in another process owes them until its own end (a
# 20,000-turn conversation's rows took 21.5 s), and would be raced for nothing
OWED_SCRUB_AFTER_S = 60.0
# A Memory without the indexer's thread (background_indexing=False) looks for an owed
# scrub from its own calls instead (each append and context, `_look_for_owed_scrub`), at
# most once this often (seconds, as the thread's INDEXER_WAKE_S): between two looks a call
# pays a clock read and a compare; a look costs one read when nothing is owed
OWED_SCRUB_LOOK_S = 5.0
# catch-up pools of its conversation's pending turns a context embeds inline before it
# plans (a pool: INDEX_POOL_BATCHES batches of embedding_batch_size turns, 1,024 at the
# default 64, cut at INDEX_POOL_MAX_CHARS characters: ~5 s of chat turns on 2 idle cores,
# ~13 s of texts at the model's length). The rest is left to the background indexer and
# the plan says how many turns dense ranking could not see (`Plan.vectors_pending`). Unbounded
# before, the first context after importing 20,000 turns embedded them all: 250 s.
# A search embeds as many of its scope's (the conversation's, or the namespace's) and
# says the rest in its answer (`SearchHits.vectors_pending`); unbounded before too.
CONTEXT_EMBED_POOLS = 1
# the key of `Plan.timings_ms` (cumulative, as every key there) when the context's inline
# catch-up of pending turns ended: its own time is `stage_ms[EMBED_PENDING_STAGE]`
EMBED_PENDING_STAGE = "embed_pending"
# the longest a context (or a search) waits (seconds) for turns of its conversation (of
# its scope) that another catch-up of this process (the background indexer, another
# call's) read first, and so left out of its own catch-up (tiers.catchup.Claims), until
# their vectors are stored and their hooks ran (`ColdLog.wait_decided`, one home:
# `Memory._await_claimed`): without it the plan (the ranking) scored whichever of the
# newest turns the indexer had not finished without a vector, and the same appends and
# calls gave different contexts (hits) run to run. About a small pool's embedding (an
# append's few turns) and hooks at p99 on 2 cores; past it the call goes on without them
# and says so (`Plan.vectors_pending` and `Plan.retrieval`, `SearchHits.vectors_pending`)
CLAIMED_WAIT_S = 0.2
MS_PER_S = 1000.0  # Plan.timings_ms is in milliseconds


class _PoolsBound:
    """An `index_pending` stop (asked before each pool's read) that ends the catch-up once
    `reads` pools were read; `fired` says whether it did (a catch-up that ran out of
    pending turns first never asks again)."""

    def __init__(self, reads: int) -> None:
        self.reads = reads
        self.asked = 0
        self.fired = False

    def __call__(self) -> bool:
        self.asked += 1
        self.fired = self.asked > self.reads
        return self.fired


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _fills_caches(method: Callable[Concatenate[Memory, _P], _R]) -> Callable[Concatenate[Memory, _P], _R]:
    """A public call that can fill a cache of this process with a conversation's text:
    it runs within `Memory._erasures_during` (module docstring)."""

    @functools.wraps(method)
    def call(self: Memory, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._erasures_during():
            return method(self, *args, **kwargs)

    return call


class _EpisodeLog:
    """How a failure that repeats call after call is logged: in full (its traceback) when
    an episode starts, then one short line at most every DEGRADED_LOG_INTERVAL_S while
    it lasts, and an info line when it ends (`ended`). Thread-safe."""

    def __init__(self, name: str, started: str, still: str, ended: str) -> None:
        self._started, self._still, self._ended = started, still, ended
        self._extra = {EPISODE_ATTR: name}  # on each of its records
        self._since: float | None = None  # time.monotonic() when the episode started
        self._logged = 0.0  # when it was last logged
        self._lock = threading.Lock()

    def failed(self, exc: BaseException, reason: str) -> None:
        now = time.monotonic()
        with self._lock:
            since = self._since
            if since is not None and now - self._logged < DEGRADED_LOG_INTERVAL_S:
                return
            self._since = now if since is None else since
            self._logged = now
        if since is None:
            log.warning(self._started, exc_info=exc, extra=self._extra)
        else:
            log.warning("%s for %.0fs (%s)", self._still, now - since, reason, extra=self._extra)

    def ended(self) -> None:
        with self._lock:
            since, self._since = self._since, None
        if since is not None:
            log.info(self._ended, time.monotonic() - since, extra=self._extra)


@dataclass(frozen=True)
class ActiveView:
    """`active()`: the latest fold (if any) and the messages after it."""

    checkpoint: Checkpoint | None
    messages: list[StoredMessage]


# Every Memory not yet closed (weakly: one that is collected needs no stopping).
_OPEN: weakref.WeakSet[Memory] = weakref.WeakSet()


def _stop_background_at_exit() -> None:
    """At exit, stop the background threads of every Memory still open (see the module
    docstring). The stores are left to the process's end, as a crash would leave them:
    the log is committed, and what is derived is caught up by the next process."""
    for memory in list(_OPEN):
        if not memory._closed:
            with contextlib.suppress(Exception):  # an exit must go on whatever one Memory does
                memory._stop_background()


atexit.register(_stop_background_at_exit)


class _Indexer(threading.Thread):
    """Embeds appended turns in the background so `append` returns after the commit."""

    def __init__(self, memory: Memory) -> None:
        super().__init__(name="tiermem-indexer", daemon=True)
        self.memory = memory
        self.wake = threading.Event()
        self.stopping = threading.Event()

    def run(self) -> None:
        owed_look = time.monotonic() + INDEXER_WAKE_S  # the next look for an owed scrub
        # the models and widths of the embedding-model conflict logged last (None: none
        # now): another live process won the store and every wake's catch-up fails alike
        # until it changes, so it is logged once, not at every wake
        conflict: tuple[int, str | None, int, str | None] | None = None
        while not self.stopping.is_set():
            woken = self.wake.wait(timeout=INDEXER_WAKE_S)
            self.wake.clear()
            if self.stopping.is_set():
                break
            if not woken:  # idle: drop what others erased too (a busy process does at each call)
                try:
                    self.memory._catch_erasures()
                except Exception:  # a locked or unreachable store: the next wake or call retries
                    log.warning("could not read the erasures since the last check; will retry", exc_info=True)
            if time.monotonic() >= owed_look:  # busy or idle: no call of the process does it
                owed_look = time.monotonic() + INDEXER_WAKE_S
                try:
                    self.memory.cold.finish_owed_scrub(owed_for_s=OWED_SCRUB_AFTER_S)
                except Exception:  # a locked or unreachable store: the next look retries
                    log.warning("could not finish an erasure's owed scrub; will retry", exc_info=True)
            if not embedder_loaded(self.memory.embedder):
                continue  # no process pays for the model just to append: see Memory.warm_up
            try:
                # a backlog's catch-up ends at the next pool once close() or an exit asks:
                # the rest stays pending for the next catch-up, and the wait is at most
                # about a pool (seconds: tiers.store.INDEX_POOL_MAX_CHARS), not the backlog
                with self.memory._erasures_during():  # it fills memos with the texts it embeds
                    stored = self.memory.cold.index_pending(batch=self.memory.config.embedding_batch_size,
                                                            stop=self.stopping.is_set)
                if stored:  # it stores again (nothing pending tells nothing): a conflict is news again
                    conflict = None
            except EmbeddingModelConflict as e:  # its message names embedding_model and both models
                state = (e.stored_dim, e.stored_model, e.ours_dim, e.ours_model)
                if state != conflict:
                    conflict = state
                    log.warning("background embedding stopped until the conflict changes: %s", e)
            except Exception:  # a derived index must never kill the process
                log.exception("background embedding failed; will retry")


def _legacy_incarnation(given: str, known: str | None) -> str:
    """The key a conditional append expects for `expect_incarnation` `given`, a key of its
    conversation's name as the library answered `incarnation` before 0784bc0 (a caller
    that saved one keeps working): `known`, the caller's own live key of the conversation
    in its namespace, if `given` is it (the key the caller was given: nothing new to it),
    else NO_KEY (another incarnation of the name: gone since, refused as a stale token is,
    `PositionMismatch`). Logs LEGACY_INCARNATION_WARNING once per process. The HTTP and
    MCP appends never get here: they always answered tokens and refuse anything else."""
    global _legacy_incarnation_warned
    with _legacy_incarnation_lock:
        first, _legacy_incarnation_warned = not _legacy_incarnation_warned, True
    if first:
        log.warning(LEGACY_INCARNATION_WARNING)
    return known if known is not None and given == known else NO_KEY


def _refuse_unfinished(store: ColdStore | PostgresStore, spec: str | Path, schema: str) -> None:
    """Close `store` and raise MigrationUnfinished where it is the target of a
    `migrate-store` run into an empty store that never verified its copy
    (tiers.migrate_store check_finished): it may hold part of the source's history only,
    and would be served as the whole. An unfinished merge into a store with data of its
    own opens (that data is whole; the merged conversations may be partial): a warning
    per source, and `stats()` lists them."""
    from tiermem.tiers.migrate_store import check_finished, store_label

    try:
        merges = check_finished(store, spec, schema)
    except BaseException:
        store.close()
        raise
    for mark in merges:
        began = dt.datetime.fromtimestamp(mark.started_at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        log.warning("%s holds an unfinished merge from %s (a `tiermem migrate-store` run into it, which held data "
                    "of its own, began at %s and never verified its copy): the store's own data is whole, but "
                    "conversations of that source may be missing or partial; rerun that migrate-store to finish it, or, if the source is "
                    "gone, `tiermem migrate-store --to <this store> [--schema <its schema>] --accept-unfinished` to keep it as it is",
                    store_label(spec, schema), mark.source, began)


class Memory:
    """Tiered memory for one data dir. Use as a context manager or call `close()`.

    Components passed in (an embedder, a token counter, a Redis client) are the
    caller's and are not closed here; what Memory creates, it closes.
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        embedder: Embedder | None = None,
        tokens: TokenCounter | None = None,
        redis_client: RedisClient | None = None,
        background_indexing: bool = True,
        hot: bool = True,
    ) -> None:
        self.config = config or Config()
        self.tokens: TokenCounter = tokens or BpeTokenCounter(self.config.tokenizer)
        # lazy: nothing is loaded until something needs a vector (tiers/embed_onnx.py)
        self.embedder: Embedder = embedder or build_embedder(
            self.config.embedding_model, runtime=self.config.embedding_runtime,
            batch_size=self.config.embedding_batch_size, query_precision=self.config.embedding_query_precision,
            cache_dir=self.config.embedding_cache_dir,
        )
        self.cold: ColdLog
        # the same store, for migrate-store's unfinished-copy marks only (stats())
        self._marked: SqlAccess
        # the turns' tokens the store recounted on open, counted under another tokenizer
        # before (tiers.recount): what Redis holds of the old counts is dropped below
        self.tokenizer_recount: Recount | None
        if self.config.cold_url is not None:  # PostgreSQL + pgvector; it opens and closes its own pool
            from tiermem.tiers.postgres import PostgresStore

            self.cold = PostgresStore(self.config.cold_url, tokens=self.tokens, embedder=self.embedder,
                                      schema=self.config.cold_schema,
                                      synchronous_commit=self.config.cold_synchronous_commit,
                                      erase_scrub=self.config.cold_erase_scrub,
                                      pool_mode=self.config.cold_pool_mode,
                                      pool_max=self.config.cold_pool_size,
                                      pool_wait_s=self.config.cold_pool_wait_s,
                                      operation_timeout_s=self.config.cold_operation_timeout_s,
                                      lock_timeout_ms=self.config.busy_timeout_ms)
            self.tokenizer_recount = self.cold.tokenizer_recount
            _refuse_unfinished(self.cold, self.config.cold_url, self.config.cold_schema)
            self._marked = self.cold
        else:
            self.cold = ColdStore(self.config.db_path, tokens=self.tokens, embedder=self.embedder,
                                  busy_timeout_ms=self.config.busy_timeout_ms,
                                  synchronous=self.config.sqlite_synchronous)
            self.tokenizer_recount = self.cold.tokenizer_recount
            _refuse_unfinished(self.cold, self.config.db_path, self.config.cold_schema)
            self._marked = self.cold
        # supersession searches by meaning, so it runs when a turn is embedded (by
        # whichever process embeds it), not at append: appending never loads the model
        self.cold.on_embedded = self._on_embedded
        self.cold.on_hooked = self._after_hooks  # a pool's rechecks, after its hooks
        self.cold.texts_ahead = self._texts_ahead  # embedded with the pool: the hook's meaning search
        self.cold.labeler = self._label  # a rebuild labels its turn rows as appends do
        self._supersede_on_embed = True  # off while rebuild replays supersession itself
        self._closed = False
        # (time.time(), why) of the embedder's last failure; None once it computes a vector
        # again (or never failed): what stats() and /healthz report as `degraded`
        self._embed_failure: tuple[float, str] | None = None
        self._embed_log = _EpisodeLog(
            EMBEDDER_EPISODE,
            "the embedding model is unavailable; contexts and searches rank by keywords only until it is back",
            "the embedding model is still unavailable", "the embedding model answers again after %.1fs")
        # a catch-up of pending turns before a read that fails for another reason than the
        # model (a full disk, a locked database): logged as an episode of its own
        self._catch_up_log = _EpisodeLog(
            CATCH_UP_EPISODE,
            "could not embed pending turns before a read; they are found by keywords and the tail until a "
            "catch-up succeeds", "pending turns still cannot be embedded before reads",
            "pending turns are embedded again before reads after %.1fs")
        # (namespace, name) -> key of the conversations this Memory has met: an append's
        # memo scope without a lookup (on PostgreSQL a round trip on top of the append's
        # one statement). Only the scope rides on it: a key gone stale (erased and created
        # again by another process) costs that one append's results, remembered under the
        # old key's scope (the same conversation's), and the append corrects it
        self._keys: dict[tuple[str, str], str] = {}
        # the newest tombstone this Memory has acted on (`_catch_erasures`): erasures
        # committed before it opened left it nothing to drop
        self._erasure_mark = self.cold.erasure_mark()
        self._erasure_lock = threading.Lock()
        # how many times this Memory dropped copies for erasures (its own, or others' it
        # read), and how many of those were resets (every copy): a call under way
        # meanwhile drops again what it may have filled since (`_erasures_during`)
        self._drops = 0
        self._resets = 0
        # keys this Memory erased and dropped itself, so that its next check of erasures
        # does not drop every memo a second time for them
        self._dropped_here: set[str] = set()
        self.classifier = TurnClassifier()
        # derived copies of each conversation's vectors and turn facts for the planner
        # (and for supersession's meaning search, which scores them in memory)
        # told days are the user's (Config.timezone, or a call's own zone): "yesterday" at
        # 21:00 in Los Angeles is the day before there, not in UTC
        self.turns = TurnCache(self.cold, max_bytes=self.config.turn_cache_mb * 1024 * 1024,
                               derive=_told, zone=self.config.timezone)
        self.superseder = Superseder(self.cold, self.embedder, self.classifier, turns=self.turns)
        # the same rules without the meaning search, for appends: they need no model
        self._rules = Superseder(self.cold, None, self.classifier)
        self._planner: Planner | None = None  # built by the first context() (`planner`)
        self._planner_lock = threading.Lock()
        self.hot: HotLink | None = None
        # why the hot tier is off when it was asked for and could not start (set by
        # `open_with_fallback`: "Type: message"), and since when (wall clock): stats and
        # /healthz report it unhealthy rather than absent, as they do an unreachable Redis
        self.hot_unavailable: str | None = None
        self.hot_unavailable_since: float | None = None
        if hot:
            from tiermem.hotlink import HotLink

            self.hot = HotLink(self.config, self.cold, redis_client=redis_client)
            if self.tokenizer_recount is not None:  # the sets and the epoch states hold the old counts
                self.hot.drop_counted()
            # keys of conversations erased while Redis could not be reached: deleted when
            # it answers again, and now, for those an earlier process left recorded
            self.hot.on_recover = self._purge_deferred_quietly
            self._purge_deferred_quietly()
        from tiermem.consolidation.summarize import build_summarizer
        from tiermem.consolidation.views import ViewMaintainer
        from tiermem.tiers.warm import WarmStore

        # the warm tier caches in the hot tier's Redis (short timeouts), SQLite is its truth;
        # while the hot link is degraded its reads leave Redis alone (the hot read waited)
        hot_link = self.hot
        self.warm = WarmStore(self.cold, redis_client=hot_link.client if hot_link is not None else None,
                              keep_versions=self.config.warm_keep_versions,
                              usable=(lambda: hot_link.healthy) if hot_link is not None else (lambda: True))
        self.views = ViewMaintainer(
            self.cold,
            self.warm,
            # the extractive summarizer reads the vectors the cold tier already stored
            # instead of running the model itself, so a refresh never competes with requests
            build_summarizer(
                self.config.summarizer, tokens=self.tokens, embedder=None,
                llm_base_url=self.config.llm_base_url, llm_model=self.config.llm_model,
                llm_api_key_env=self.config.llm_api_key_env, llm_timeout_s=self.config.llm_timeout_s,
            ),
            self.tokens,
            target_tokens=self.config.summary_target_tokens,
            max_turns_behind=self.config.warm_max_turns_behind,
            max_seconds_behind=self.config.warm_max_seconds_behind,
        )
        self.scheduler: ConsolidationScheduler | None = None
        # called with the report of every prune or erasure this Memory does, after its own
        # derived copies are gone, so that what others keep of it (the service's
        # per-namespace metrics) goes too; a hook that raises is logged, the erasure stands
        self.erasure_hooks: list[Callable[[ErasureReport], None]] = []
        self._indexer: _Indexer | None = None
        # without the indexer: when a call of this process next looks for an owed scrub,
        # and one look at a time (`_look_for_owed_scrub`)
        self._owed_look_at = time.monotonic() + OWED_SCRUB_LOOK_S
        self._owed_looking = threading.Lock()
        if background_indexing:
            self._indexer = _Indexer(self)
            self._indexer.start()
            self._indexer.wake.set()  # catch up whatever a crash left behind
        _OPEN.add(self)

    @property
    def planner(self) -> Planner:
        """The context planner, built on first use: appends and reads never import it."""
        if self._planner is not None:
            return self._planner
        from tiermem.planner.build import Planner, PlannerSettings

        with self._planner_lock:  # one planner per Memory: it keeps state between calls
            if self._planner is None:
                self._planner = Planner(
                    self.cold,
                    self.tokens,
                    self._query_vectors,
                    PlannerSettings(
                        shares={k: v.model_dump() for k, v in self.config.slice_shares.items()},
                        retrieval_k=self.config.retrieval_k,
                        tool_trim_tokens=self.config.tool_trim_tokens,
                        tail_anchor=self.config.tail_anchor_turns,
                        retrieved_placement=self.config.retrieved_placement,
                        system_messages=self.config.system_messages,
                        context_format=self.config.context_format,
                        layers=self.config.layer_shares.model_dump(),
                        epochs=self.config.context_epochs,
                        timezone=self.config.timezone,
                        cache_ttl_s=self.config.cache_ttl_s,
                        cache_min_prefix=self.config.pricing.min_prefix_tokens,
                    ),
                    turns=self.turns,
                    # with a hot tier, every process on its Redis extends one lineage per conversation
                    epochs=self.hot.epochs() if self.hot is not None else None,
                )
        return self._planner

    def _query_vectors(self, texts: list[str]) -> Any:
        """The planner's query vectors (`query_embedding`); where the embedder's model
        cannot be loaded or run (`model_unavailable_errors`), EmbeddingUnavailable, and the
        failure is reported until a vector is computed again. Any other error is a bug,
        raised as itself: keyword ranking would hide it."""
        try:
            vecs = query_embedding(self.embedder)(texts)
        except model_unavailable_errors() as exc:
            raise self._embedding_failed(exc) from exc
        self._embedding_answered()
        return vecs

    def _embedding_failed(self, exc: BaseException) -> EmbeddingUnavailable:
        """Record the embedder's failure `exc` (logged as an episode: `_EpisodeLog`). The
        error returned, what tenants are shown (a plan, a search's `degraded`) and what
        /healthz reads from the reason's front, is `exc`'s type. A caller's embedder that
        raised EmbeddingUnavailable itself is shown as that type too, whatever `error` it
        gave: that is the caller's free text (a service's message, a URL with its key, the
        texts of a batch that held other tenants' turns); its `error` and `reason` (what
        its service said) follow in the reason, for the operator (the log, `stats()`)."""
        error = type(exc).__name__
        if isinstance(exc, EmbeddingUnavailable):
            said = exc.reason if exc.reason.startswith(f"{exc.error}: ") else f"{exc.error}: {exc.reason}"
            reason = f"{error}: {said}"
        else:
            reason = f"{error}: {exc}"
        if len(reason) > MAX_EMBED_REASON_CHARS:
            reason = reason[:MAX_EMBED_REASON_CHARS] + "..."
        self._embed_log.failed(exc, reason)
        self._embed_failure = (self._embed_failure[0] if self._embed_failure is not None else time.time(), reason)
        return EmbeddingUnavailable(error, reason)

    def _embedding_answered(self) -> None:
        self._embed_log.ended()
        self._embed_failure = None

    def _caught_up(self, failure: Exception | None) -> None:
        """After the catch-up of pending turns before a read (which goes on either way):
        its `failure`, if any, logged as an episode. While the embedder is degraded, it
        is that episode's (the catch-up cannot load the model either), logged as such."""
        if failure is None:
            self._catch_up_log.ended()
        elif self._embed_failure is None:
            reason = f"{type(failure).__name__}: {failure}"[:MAX_EMBED_REASON_CHARS]
            self._catch_up_log.failed(failure, reason)

    @property
    def embedding_failure(self) -> str | None:
        """Why the embedder last failed, while it has not computed a vector since (None:
        it has, or never failed)."""
        failure = self._embed_failure
        return failure[1] if failure is not None else None

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop_background()
        if self.hot is not None:
            self.hot.close()
        self.cold.close()

    def _stop_background(self) -> None:
        """Stop the scheduler and the indexer and wait for what they are doing: the
        indexer's catch-up reads no further pool and stores what it embedded.
        No timeout: one would leave the indexer writing to a closed store, and inside
        onnxruntime as the interpreter exits (an abort)."""
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=True)
        if self._indexer is not None:
            self._indexer.stopping.set()
            self._indexer.wake.set()
            self._indexer.join()

    def namespaced(self, namespace: str, *, timezone: str | None = None) -> NamespacedMemory:
        """A view whose every call is confined to `namespace` (a user or tenant);
        `timezone`: that user's IANA zone, its calls' default (None: `Config.timezone`)."""
        return NamespacedMemory(self, namespace, timezone=timezone)

    # -- validation helpers -----------------------------------------------------------------

    # `max_id_chars` bounds the ids a conversation or namespace is CREATED under (an
    # append, a fork's new id, an import): lowering it must not strand what a higher one
    # made. Every other call names stored data, so it checks an id against the bound of
    # any config (MAX_ID_CHARS_LIMIT): a conversation made under the old limit is still
    # read, pinned, exported and erased (the right to erasure needs no config change).

    def _conv(self, conversation_id: object) -> str:
        """A conversation id that names stored data (a lookup): any config's bound."""
        return validate_id(conversation_id, "conversation_id", MAX_ID_CHARS_LIMIT)

    def _ns(self, namespace: object | None) -> str:
        """A namespace that names stored data (a lookup): any config's bound."""
        return validate_namespace(namespace if namespace is not None else DEFAULT_NAMESPACE, "namespace",
                                  MAX_ID_CHARS_LIMIT)

    def _new_conv(self, conversation_id: object) -> str:
        """A conversation id an append writes under: this config's `max_id_chars`. Checked
        on every append, not only the first: an append to a conversation made under a
        higher limit is refused naming today's (lowering the limit stops its growth; it
        stays readable and erasable)."""
        return validate_id(conversation_id, "conversation_id", self.config.max_id_chars)

    def _new_ns(self, namespace: object | None) -> str:
        """A namespace an append writes in: this config's `max_id_chars` (see `_new_conv`)."""
        return validate_namespace(namespace if namespace is not None else DEFAULT_NAMESPACE, "namespace",
                                  self.config.max_id_chars)

    def _text(self, value: object, field: str) -> str:
        return check_text(value, field, self.config.max_content_bytes)

    def _parse(self, message: Message | dict[str, Any], *, stamp: bool = True, **envelope: Any) -> Message:
        return parse_message(
            message,
            max_content_bytes=self.config.max_content_bytes,
            max_metadata_bytes=self.config.max_metadata_bytes,
            stamp=stamp,
            **envelope,
        )

    def _key(self, conversation_id: object, namespace: object | None) -> tuple[str, str, str]:
        """(name, namespace, key) of a live conversation; ConversationNotFound, with the
        same message whether the id is unused or used only in another namespace."""
        name = self._conv(conversation_id)
        ns = self._ns(namespace)
        key = self._lookup(ns, name)
        if key is None:
            raise ConversationNotFound(name, ns)
        self._know(ns, name, key)
        return name, ns, key

    def _lookup(self, ns: str, name: str) -> str | None:
        """The key of the live conversation `name` of `ns`, or None. Every call that looks
        a conversation up learns of erasures with that lookup (one statement), and drops
        what they took before it reads (`_catch_erasures_past`)."""
        key, mark = self.cold.key_and_erasure_mark(ns, name)
        self._catch_erasures_past(mark)
        return key

    def _know(self, ns: str, name: str, key: str) -> None:
        """Keep a conversation's key for its next append's memo scope (`_keys`)."""
        if len(self._keys) >= MAX_KNOWN_KEYS:
            self._keys.clear()  # a lookup per conversation again, never a wrong answer
        self._keys[(ns, name)] = key

    def _erased(self, report: ErasureReport) -> ErasureReport:
        """After a retention operation: the report as its caller sees it (the keys gone
        answered as their incarnations' tokens, `incarnation_token`: a key would tell that
        an id is, or was, used in another namespace), and tell `erasure_hooks` what went
        (in that report, with the keys themselves in `internal_keys`). This Memory's derived copies are gone already: the store's
        `on_erased` (`_forget`) dropped them batch by batch, so a batch that failed after
        others committed leaves none of theirs."""
        shown = dataclasses.replace(report, keys=[self._token(k) for k in report.keys], internal_keys=[])
        if not shown.keys:
            return shown
        # the hooks are the store owner's (registered in this process, never by a route):
        # told the keys too, as they were before 0784bc0 (`ErasureReport.internal_keys`)
        told = dataclasses.replace(shown, internal_keys=list(report.keys))
        for hook in list(self.erasure_hooks):
            try:
                hook(told)
            except Exception:
                log.exception("an erasure hook failed; the erasure itself is done")
        return shown

    def _token(self, key: str) -> str:
        """A conversation's incarnation as callers see it (`incarnation_token`), never its key."""
        return incarnation_token(self.cold.db_uuid, key)

    def _forget(self, keys: Sequence[str]) -> None:
        """After a retention operation this Memory did: drop every derived copy of these
        incarnations outside the store (this process's: `_drop_copies`; the shared epoch
        states and every Redis key). Redis keys that cannot be reached now are recorded
        and deleted when Redis answers again. It runs after the erasure's commit, so it
        raises nothing for the store's failures."""
        self.warm.forget(keys)
        if keys:
            with self._erasure_lock:
                self._drops += 1
        self._drop_copies(keys)
        with self._erasure_lock:
            if len(self._dropped_here) + len(keys) > MAX_DROPPED_HERE:
                self._dropped_here.clear()
            self._dropped_here.update(keys)
        if self._planner is not None:  # one never built remembers nothing
            for key in keys:
                self._planner.forget(key)  # its shared epoch state too
        if self.hot is not None and keys:
            # the erasure recorded every key as owed (ColdLog.defer_purge's table) in its own
            # transaction; those deleted now are crossed off, the rest wait for Redis
            left = set(self.hot.erase(list(keys)))
            if done := [k for k in keys if k not in left]:
                try:
                    self.cold.purged(done)
                except Exception:  # no connection in time, a busy or read-only store
                    # this runs after the erasure's commit, which must not fail for it: the
                    # keys stay owed, crossed off by the next purge_deferred (the next
                    # Memory to open, Redis's recovery, or a call); their Redis keys are
                    # gone, so deleting them again then is a no-op
                    log.warning("erasure: the Redis keys are deleted but the store could not record it now; "
                                "they stay owed until the next purge_deferred()", exc_info=True)
                else:
                    if not left:  # a restart from a snapshot taken from now on scans nothing for it
                        self.hot.note_purged()

    def _drop_copies(self, keys: Sequence[str] | None) -> None:
        """Drop what this process keeps of these erased or pruned incarnations, whoever
        erased them (None: of every conversation, a reset): the known keys, the turn
        cache, the planner's pin candidates, statements and epoch states (and every epoch
        state that shows their turns), and the memos of caller text, all scopes (an
        erasure is rare; a recomputation is all it costs). Nothing here asks Redis or the
        store."""
        if keys is not None and not keys:
            return
        self._keys.clear()  # an erased key is not the scope of the conversation's next incarnation
        if keys is None:
            self.turns.drop()
        else:
            for key in keys:
                self.turns.drop(key)
        if self._planner is not None:  # one never built remembers nothing
            self._planner.forget_local(keys)
        # the embedder remembers recent texts' vectors keyed by the text itself
        clear_memo = getattr(self.embedder, "clear_memo", None)
        if callable(clear_memo):
            clear_memo()
        # the classifier, supersession, keyword stems and the token counter remember texts too
        forget_labels()
        forget_slots()
        forget_terms()
        clear_counts = getattr(self.tokens, "clear_memo", None)
        if callable(clear_counts):
            clear_counts()

    def _catch_erasures_past(self, mark: int | None) -> None:
        """`_catch_erasures` when `mark` (the newest tombstone's id, read by a call's own
        statement) is not the last erasure this Memory acted on (below it: a restored
        backup), or was not read (None: SQLite's append); no statement otherwise."""
        if mark is None or mark != self._erasure_mark:
            self._catch_erasures()

    def _catch_erasures(self) -> None:
        """Drop this process's copies of the conversations erased or pruned since the last
        check, by this process or another sharing the store (module docstring): read
        from their tombstones, whose ids grow in commit order (`ColdLog.erased_after`).
        Costs one index seek when nothing was erased. A newest tombstone below the mark
        read before it cannot be a later commit: the store went back (a backup restored
        under this process), so every copy is dropped and the store's mark taken."""
        while True:
            mark = self._erasure_mark
            newest, rows = self.cold.erased_after(mark, ERASURES_PAGE)
            if newest < mark:
                self._reset_erasures(newest)
                continue  # the tombstones past the store's mark, if any came since
            if not rows:
                return
            with self._erasure_lock:
                keys = [k for _id, k in rows if k not in self._dropped_here]
                self._dropped_here.difference_update(k for _id, k in rows)
                if keys:
                    self._drops += 1
            self._drop_copies(keys)
            with self._erasure_lock:
                # another thread may have read past it meanwhile: the mark only grows (a
                # reset aside)
                self._erasure_mark = max(self._erasure_mark, rows[-1][0])
            if len(rows) < ERASURES_PAGE:
                return

    def _reset_erasures(self, newest: int) -> None:
        """The store's newest tombstone is below this Memory's mark (`_catch_erasures`):
        drop every copy this process keeps and take the store's mark. The keys this
        Memory erased are forgotten too: a restored conversation erased again has a
        tombstone to act on."""
        with self._erasure_lock:
            self._drops += 1
            self._resets += 1
            self._dropped_here.clear()
        self._drop_copies(None)
        with self._erasure_lock:
            # another thread's reset may have read the store later and gone on past it:
            # going back to an earlier mark costs one more dropping, never a missed one
            self._erasure_mark = min(self._erasure_mark, newest)
        log.warning("the store's newest erasure is older than the last one this process acted on (a backup "
                    "restored under it?): every copy of conversation text this process kept is dropped")

    @contextlib.contextmanager
    def _erasures_during(self) -> Iterator[None]:
        """Around a call that can fill this process's caches with a conversation's text:
        when this Memory dropped copies for erasures while the call ran (another thread's
        check, its own erasure), what the call read before an erasure committed may have
        gone into a cache after the drop, so the copies of every conversation erased past
        the mark the call started at are dropped again before it returns (every copy,
        after a reset). Costs nothing when no drop happened (module docstring)."""
        mark, drops, resets = self._erasure_mark, self._drops, self._resets
        try:
            yield
        finally:
            if self._resets != resets:
                self._drop_copies(None)
            elif self._drops != drops:
                self._drop_again(mark)

    def _drop_again(self, mark: int) -> None:
        """Drop this process's copies of the conversations erased past `mark` again
        (`_erasures_during`), not counted as a drop: calls under way meanwhile do not
        drop again for it. Where the store cannot be read, every copy is dropped."""
        keys: list[str] = []
        try:
            while True:
                _newest, rows = self.cold.erased_after(mark, ERASURES_PAGE)
                keys.extend(k for _id, k in rows)
                if len(rows) < ERASURES_PAGE:
                    break
                mark = rows[-1][0]
        except Exception:  # a locked or unreachable store: the call itself succeeded
            log.warning("could not read the erasures a call raced; every copy of conversation text is dropped",
                        exc_info=True)
            self._drop_copies(None)
            return
        self._drop_copies(keys)

    def _purge_deferred_quietly(self) -> None:
        try:
            if n := self.purge_deferred():
                log.info("deleted the Redis keys of %d conversation(s) erased while Redis was unreachable", n)
        except Exception:  # a read-only store, a locked database: the next recovery retries
            log.warning("could not delete the Redis keys of erased conversations", exc_info=True)

    def purge_deferred(self) -> int:
        """Delete the Redis keys of conversations erased while Redis was unreachable;
        returns how many conversations were purged. Runs by itself when the hot tier
        recovers from a failure and when a Memory opens; callable by hand too."""
        self._catch_erasures()
        pending = self.cold.deferred_purges()
        if not pending or self.hot is None:
            return 0
        left = set(self.hot.erase(pending))
        done = [k for k in pending if k not in left]
        self.cold.purged(done)
        if not left:
            self.hot.note_purged()
        return len(done)

    # -- writes ---------------------------------------------------------------------------------

    def append(
        self,
        conversation_id: str,
        message: Message | dict[str, Any],
        *,
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        created_at: float | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
        expect_position: int | None = None,
        expect_incarnation: str | None = None,
    ) -> int:
        """Append one message; returns its position. Invalid input raises
        `ValidationError` and writes nothing. `idempotency_key`, `expect_position` and
        `expect_incarnation`: see `append_outcome`."""
        if idempotency_key is not None:  # at the edge, before the message is read
            check_idempotency_key(idempotency_key)
        # unstamped: a created_at left to default must not enter the key's fingerprint
        return self._append_outcome(
            conversation_id,
            [self._parse(message, session_id=session_id, metadata=metadata, created_at=created_at, stamp=False)],
            parsed_here=True, namespace=namespace, session_id=None, idempotency_key=idempotency_key,
            expect_position=expect_position, expect_incarnation=expect_incarnation,
        ).positions[0]

    def _check_controls(self, conv: str, ns: str, parsed: Sequence[Message]) -> None:
        """A control row that names a position (a retraction) must name an earlier row: one
        naming itself or a row not written yet would hide the message that later takes
        that position. Race-free: positions only grow, so a row's own position is past
        the last one read here."""
        bodies = [m.body() for m in parsed]
        named = [(i, b["position"]) for i, b in enumerate(bodies) if is_control(b) and "position" in b]
        if not named:
            return
        key = self._lookup(ns, conv)
        last = self.cold.last_position(key) if key is not None else -1
        for i, pos in named:
            if pos > last + i:  # the rows before it in this batch come first
                field = "position" if len(parsed) == 1 else f"messages[{i}].position"
                raise ValidationError(field, f"must name an earlier message: {pos} is not written yet "
                                      f"(the latest is {last + i})" if last + i >= 0 else
                                      "must name an earlier message: the conversation has none yet")

    def append_many(
        self,
        conversation_id: str,
        messages: Sequence[Message | dict[str, Any]],
        *,
        namespace: str | None = None,
        session_id: str | None = None,
        idempotency_key: str | None = None,
        expect_position: int | None = None,
        expect_incarnation: str | None = None,
    ) -> list[int]:
        """Append a batch in one transaction (all or nothing); returns the positions.
        `idempotency_key`, and `expect_position` / `expect_incarnation` (the whole batch
        written only where the conversation goes on there, else `PositionMismatch` and
        nothing written): see `append_outcome`."""
        return self.append_outcome(conversation_id, messages, namespace=namespace, session_id=session_id,
                                   idempotency_key=idempotency_key, expect_position=expect_position,
                                   expect_incarnation=expect_incarnation).positions

    def append_outcome(
        self,
        conversation_id: str,
        messages: Sequence[Message | dict[str, Any]],
        *,
        namespace: str | None = None,
        session_id: str | None = None,
        idempotency_key: str | None = None,
        expect_position: int | None = None,
        expect_incarnation: str | None = None,
    ) -> AppendOutcome:
        """`append_many`, saying whether the answer is a replay. With an idempotency key
        (1..MAX_IDEMPOTENCY_KEY_CHARS visible ASCII characters, the caller's id of this
        request), a retry of a request whose answer was lost is safe: the first append
        records the key with the request's fingerprint (each message's role, body,
        session, metadata, and created_at where given: `append_fingerprint`) in its own
        transaction; a later append of the same request under the key writes nothing
        (no turn, no hot-tier admit, no embedding) and returns the first one's positions
        with `replayed=True`; another request under it raises `IdempotencyKeyReused` and
        writes nothing. Keys belong to the conversation (its namespace's, and only this
        incarnation's: erased or pruned, it takes its keys with it) and live as long as
        it does: no expiry.

        `expect_position` makes the append conditional: written only if the conversation
        goes on at that position (holds positions 0..expect_position-1; 0: it does not
        exist yet), and with `expect_incarnation` (an earlier outcome's `incarnation`: an
        opaque token, `incarnation_token`, never the store's key; a key of this
        conversation's name, as `incarnation` was before 0784bc0, is taken for its token
        with a warning logged once per process, `_legacy_incarnation`; any other string is
        refused as bad input) only if it is still that incarnation, not erased or pruned
        since (and written again). Checked inside the append's write transaction, after a replay is
        answered; else `PositionMismatch` (the position expected and the one found; or the
        incarnation expected, as sent, and the conversation's now, or that it has none) and
        nothing written. `tiermem import` appends so: an erasure during an import stops
        it instead of re-creating the conversation holding only the file's tail."""
        return self._append_outcome(conversation_id, messages, parsed_here=False, namespace=namespace,
                                    session_id=session_id, idempotency_key=idempotency_key,
                                    expect_position=expect_position, expect_incarnation=expect_incarnation)

    @_fills_caches
    def _append_outcome(
        self,
        conversation_id: str,
        messages: Sequence[Message | dict[str, Any]],
        *,
        parsed_here: bool,
        namespace: str | None,
        session_id: str | None,
        idempotency_key: str | None,
        expect_position: int | None,
        expect_incarnation: str | None,
    ) -> AppendOutcome:
        """`append_outcome`. `parsed_here`: `messages` are `append`'s own parse of its message
        (unstamped, under this memory's limits), which no caller holds: not parsed again (a
        second parse would find nothing the first did not, and checking is paid per message)."""
        conv = self._new_conv(conversation_id)
        ns = self._new_ns(namespace)
        if idempotency_key is not None:  # at the edge, before anything is read
            check_idempotency_key(idempotency_key)
        if expect_position is not None:
            check_position(expect_position, "expect_position")
        if expect_incarnation is not None:
            if expect_position is None:
                raise ValidationError("expect_incarnation", "needs expect_position (the position it goes on at)")
            if not isinstance(expect_incarnation, str):
                raise ValidationError("expect_incarnation",
                                      f"must be a string (an outcome's incarnation), got {type(expect_incarnation).__name__}")
            # a key of this conversation's name (the bare name, or name~suffix) is what the
            # library answered before 0784bc0: resolved against the caller's own key below
            if not is_incarnation_token(expect_incarnation) and key_name(expect_incarnation) != conv:
                raise ValidationError("expect_incarnation", "must be an incarnation an append answered (an "
                                      f"outcome's `incarnation`: {2 * INCARNATION_DIGEST_BYTES} lowercase hex digits)")
        if isinstance(messages, str | bytes | dict) or not isinstance(messages, Iterable):
            raise ValidationError("messages", f"must be a list of messages, got {type(messages).__name__}")
        messages = list(messages)
        if len(messages) > MAX_BATCH_MESSAGES:
            raise ValidationError("messages", f"{len(messages)} messages exceed the batch limit of "
                                  f"{MAX_BATCH_MESSAGES}")
        parsed: list[Message] = []
        for i, m in enumerate(messages):
            if parsed_here and isinstance(m, Message):
                parsed.append(m)
                continue
            try:
                # a Message object passed pydantic but not the configured limits: parse it
                # too; unstamped until fingerprinted (a defaulted created_at is not the caller's)
                parsed.append(self._parse(m, session_id=session_id, stamp=False))
            except ValidationError as exc:
                # name the message in the batch, keeping the class (LimitExceeded carries
                # the value and the limit); raised as it was, its cause and traceback kept
                exc.renamed(f"messages[{i}].{exc.field}")
                raise
        fingerprint = append_fingerprint(parsed) if idempotency_key is not None else None
        parsed = [stamped(m) for m in parsed]
        self._check_controls(conv, ns, parsed)
        # labelled and counted within the conversation's memo scope (tiers.memo), so what
        # is remembered of the text answers this conversation's next calls and nobody
        # else's; a conversation not created yet has no key: its namespace and name stand
        # in, and what was remembered under them moves to the key the append issued
        # a conditional append on an incarnation reads the key now (a kept one may be of
        # an incarnation another process erased since): the token it names stands for
        # that key if it is its token, else for NO_KEY, which no conversation has, so the
        # append's own check (inside its transaction: race-free) refuses it as gone since
        known = self._keys.get((ns, conv)) if expect_incarnation is None else None
        if known is None:
            known = self._lookup(ns, conv)
        expect_key = (None if expect_incarnation is None
                      else known if known is not None and self._token(known) == expect_incarnation else NO_KEY)
        if expect_key == NO_KEY and key_name(expect_incarnation or "") == conv:
            # a key saved from a library before 0784bc0 (`_legacy_incarnation`): the
            # caller's own key of this conversation stands for its token; another of this
            # name is an incarnation gone since, as a stale token is
            expect_key = _legacy_incarnation(expect_incarnation or "", known)
        scope = (self._scope(known) if known is not None
                 else new_conversation_scope(self.cold.db_uuid, ns, conv))
        with remembered_for(scope):
            labels = [self._label(m.text(), m.role, m.body()) for m in parsed]
            try:
                res = self.cold.append_batch(conv, parsed, namespace=ns, labels=labels,
                                             idempotency_key=idempotency_key, fingerprint=fingerprint,
                                             expect_position=expect_position, expect_key=expect_key)
            except PositionMismatch as exc:
                if expect_incarnation is not None:  # the store's check knows the key it stands for: named as sent
                    exc.naming(expect_incarnation)
                raise
        # the erasures since the last check, before this call returns: PostgreSQL's append
        # reads the newest tombstone in passing, so only an erasure costs a read of its own
        # (an append stays one round trip); SQLite's read is local
        self._catch_erasures_past(res.erasure_mark)
        key, positions = res.key, res.positions
        if key != known:
            if known is None:
                move_scope(scope, self._scope(key))
            self._know(ns, conv, key)
        if res.replayed:  # an earlier append stored this request: what followed it was done then
            self._look_for_owed_scrub()
            return AppendOutcome(positions, replayed=True, incarnation=self._token(key))
        if res.created and self.hot is not None:
            # a new key is never one issued before, but Redis may predate this database's
            # key registry (a database from before incarnations): start from nothing
            self.hot.erase([key])
        turns = [Appended(p, m.role, m.text(), lab[0], lab[1], speaker_name(m.body()))
                 for p, m, lab in zip(positions, parsed, labels, strict=True)]
        if self.hot is not None:
            # the set admits the new turns before their supersession is recorded, as the log
            # has them: the supersession's unpins then apply its own pin changes only, so
            # the set is not rebuilt for them (tiers.hot, pin versions; _release)
            self.hot.on_append(key, positions)
            self._hot_follows_pops(key, parsed)
        # Supersession is decided when the turns are embedded (_on_embedded), since it
        # searches by meaning: before append returns when the model is here and the batch
        # is a live one, else by whoever embeds them. An import-sized batch is decided by
        # the rules now, without the model (consolidation.supersede: rules first for
        # those). A live one's corrections while the model is not loaded (appending never
        # loads it) are decided by the rules now only where the meaning search could not
        # decide otherwise (Superseder.record's `final`: no user turn before the window,
        # no kind told by meaning); the rest wait for the embedding, as before. Without
        # that, a process that only appended and refreshed views decided nothing: the
        # corrected value stayed current in the log and its views until a process
        # embedded it. A rules pick beyond that was wrong for good: "The cabin was
        # freezing last night." in the window taken for the wifi password 50 turns back
        try:
            with remembered_for(self._scope(key)):
                if len(parsed) > INLINE_INDEX_ROWS:
                    self._release(key, self._rules.record(key, turns))
                elif not embedder_loaded(self.embedder):
                    if any(self._rules.assertion(t) for t in turns):
                        self._release(key, self._rules.record(key, turns, final=True))
                elif asserting := [t.position for t in turns if self.superseder.assertion(t)]:
                    self.cold.index_pending(conversation_id=key, batch=self.config.embedding_batch_size)
                    # a correction that another catch-up of this process read first (the
                    # background indexer, woken by the append before) was left to it, and it
                    # records the supersession in its hook, after its commit: waited for, so
                    # a context right after this append never shows the old value as current
                    if not self.cold.wait_decided(key, asserting, SUPERSESSION_WAIT_S):
                        log.warning("the supersession of %s's new turns %s was not recorded within %.0f s by "
                                    "the catch-up embedding them; the append returns before it",
                                    key, asserting, SUPERSESSION_WAIT_S)
        except Exception:
            # the batch is committed: a busy lock here must not answer the append as failed
            # (a retry would store it twice). Its turns are still unembedded, so whoever
            # embeds them decides their supersession (_on_embedded)
            log.warning("could not embed or decide supersession for %s's new turns now; it waits for "
                        "their embedding", key, exc_info=True)
        if self._indexer is not None:
            self._indexer.wake.set()
        self._look_for_owed_scrub()
        return AppendOutcome(positions, incarnation=self._token(key))

    def _hot_follows_pops(self, key: str, parsed: Sequence[Message]) -> None:
        """After a batch holding retractions: the hot set follows the log's pin state of
        the turns they pop and of what those had superseded, wholly or a statement
        (tiermem.hotlink `as_seen`): a popped correction is unpinned in the set, and a
        load-bearing turn it had superseded, current again, is the classifier's pin again.
        A pop moves no pin version, so nothing else brought the set there (a rebuild read
        the raw rows the same way). Reads only when the batch pops something."""
        named = sorted({b["position"] for m in parsed if is_control(b := m.body())
                        and isinstance(b.get("position"), int) and not isinstance(b.get("position"), bool)})
        if not named or self.hot is None:
            return
        try:
            targets = set(self.cold.turns_superseded_by(key, named, start=0, end=named[-1]))
            targets.update(s.position for s in self.cold.superseded_statements(key) if s.superseded_by in named)
        except Exception:  # the retraction is committed: the set's next rebuild reads it right
            log.warning("could not read what %s's popped turns %s had superseded; the hot set keeps their "
                        "pins until it is rebuilt", key, named, exc_info=True)
            return
        for position in sorted(set(named) | targets):
            self.hot.unpin(key, position)  # follows the log's pin state, either way

    def _look_for_owed_scrub(self) -> None:
        """An erasure's scrub that a killed process left owed waits for the next open or
        erasure of the store, and the indexer's thread of a running Memory finishes it
        once it has seen it owed OWED_SCRUB_AFTER_S (`_Indexer.run`). Without that thread
        (background_indexing=False) nothing else ran it, so a long-lived process left the
        erased text in the files for as long as it ran: its appends and contexts look
        instead, at most every OWED_SCRUB_LOOK_S (a clock read otherwise), and the call
        whose look finds it owed that long does what an open does, after its own work.
        A failure is logged, never the call's (its write is committed)."""
        if self._indexer is not None or time.monotonic() < self._owed_look_at:
            return
        if not self._owed_looking.acquire(blocking=False):
            return  # another thread of this process is looking
        try:
            self._owed_look_at = time.monotonic() + OWED_SCRUB_LOOK_S
            self.cold.finish_owed_scrub(owed_for_s=OWED_SCRUB_AFTER_S)
        except Exception:  # a locked or unreachable store: a later call's look retries
            log.warning("could not finish an erasure's owed scrub; will retry", exc_info=True)
        finally:
            self._owed_looking.release()

    def _scope(self, key: str) -> str:
        """The memo scope of a conversation's text (tiers.memo): the classifier's,
        supersession's, the stems', the token counts' and the embedder's memory of it
        answer only calls made for that conversation."""
        return memo_scope(self.cold.db_uuid, key)

    def _label(self, text: str, role: str, body: dict[str, Any]) -> tuple[str, bool, int, str]:
        if is_control(body):
            # a pop or a clear is stored with the system role but instructs nobody: never
            # load-bearing, so never pinned, never in the hot set's pins
            return CONTROL_LABEL
        # rules only at append time: the turn's embedding does not exist yet (it is made
        # after the commit), and rules decide the large majority of turns
        lab = self.classifier.classify(text, role)
        return (lab.intent, lab.load_bearing, lab.priority, lab.reason)

    def _on_embedded(self, stored: list[tuple[str, int, Any]]) -> None:
        """After `index_pending` stored vectors: supersession of the turns among them, in
        log order, each turn once (exactly one process flips a turn's `embedded`)."""
        if not self._supersede_on_embed:
            return
        by_conv: dict[str, list[int]] = {}
        for conv, pos, _vec in stored:
            by_conv.setdefault(conv, []).append(pos)
        for conv, positions in by_conv.items():
            rows = {r.position: r for r in self.cold.turns_at(conv, sorted(positions))}
            if not any(r.role == "user" for r in rows.values()):
                continue
            # a salvaged row is not returned by get(): nothing to supersede with
            turns = [Appended(m.position, m.role, m.text, rows[m.position].intent or "statement",
                              bool(rows[m.position].load_bearing), speaker_name(m.body))
                     for m in self.cold.get(conv, sorted(rows))]
            with remembered_for(self._scope(conv)):  # a catch-up's pool spans conversations
                if any(self.superseder.assertion(t) for t in turns):
                    decided = self.superseder.record(conv, turns)
                    self._release(conv, decided)
                    if decided.again:
                        # the catch-up embedding the turns before it may have looked for
                        # rechecks already (_after_hooks): whatever has its vectors now
                        self._recheck(conv)

    def _after_hooks(self, conversations: list[str]) -> None:
        """Once a catch-up's pool ran all its hooks: the corrections decided while its
        turns had no vector, searched again now that every turn before them has one
        (Superseder.recheck, in log order; an indexed read per conversation when none waits)."""
        if not self._supersede_on_embed:
            return
        for conv in conversations:
            with remembered_for(self._scope(conv)):
                self._recheck(conv)

    def _recheck(self, conv: str) -> None:
        for done in self.superseder.recheck(conv):
            self._release(conv, done)

    def _texts_ahead(self, turns: list[PendingTurn]) -> list[tuple[str, str]]:
        """The texts `_on_embedded` will embed for these turns (the corrections' assertive
        parts, for supersession's meaning search), so the catch-up embeds them with the
        pool, in parallel, and the hook finds them in the embedder's memo."""
        if not self._supersede_on_embed:
            return []
        out = []
        for t in turns:
            if t.role == "user":
                with remembered_for(self._scope(t.conversation_id)):  # where _on_embedded asks again
                    a = self.superseder.assertion(Appended(t.position, t.role, message_text(t.body),
                                                           t.intent or "statement", t.load_bearing))
                if a:
                    out.append((t.conversation_id, a))
        return out

    def _release(self, conv: str, done: Recorded | Sequence[tuple[int, int]]) -> None:
        """Bring the hot set to the log's pin state after a supersession: its superseded
        turns unpinned, the corrections it labelled load-bearing pinned (HotLink.unpin
        follows the log's pin state either way). With what its write moved
        (`Recorded.moved`: the log's pin version and how many moves up to it were its
        own), those calls apply its changes as theirs, the last one claiming them all
        (tiers.hot LogPins), so a set that holds every change before them is not rebuilt;
        a set that misses one (another process's change landed first) still is. Without
        it (a replay's pairs), none is claimed: the set is checked against the log's."""
        if isinstance(done, Recorded):
            pairs, moved, relabelled = done.pairs, done.moved, done.relabelled
        else:
            pairs, moved, relabelled = list(done), None, []
        if self.hot is None or not (pairs or relabelled):
            return
        from tiermem.tiers.hot import LogPins  # redis only where a hot tier is configured

        # every turn the write changed, a caller's pin too (the set keeps it, as the log
        # does): so there is always a last call, to claim every change of the write
        touched = sorted({old for old, _new in pairs} | set(relabelled))
        for i, position in enumerate(touched):
            claim = None
            if moved is not None:
                version, own = moved
                claim = LogPins(version - own, version if i == len(touched) - 1 else version - own)
            self.hot.unpin(conv, position, log_pins=claim)

    @_fills_caches
    def checkpoint(
        self, conversation_id: str, summary: str, position: int, *, namespace: str | None = None
    ) -> Checkpoint:
        """Fold: `summary` stands in for positions <= `position`; nothing is deleted."""
        name, _ns, key = self._key(conversation_id, namespace)
        check_summary(summary, self.config.max_content_bytes)
        check_position(position, "position")
        return dataclasses.replace(self.cold.checkpoint(key, summary, position), conversation_id=name)

    @_fills_caches
    def fork(
        self, conversation_id: str, up_to: int, *, new_id: str | None = None, namespace: str | None = None
    ) -> str:
        """A new conversation holding positions 0..up_to of this one; the parent is unchanged.
        Named `new_id`, or (none given) `<parent>.fork-<12 hex>` with the parent's part cut
        so that the id fits `max_id_chars` (`tiers.models.fork_id`): the child is appended
        to under that limit, as every id this config creates."""
        _name, _ns, key = self._key(conversation_id, namespace)
        self._new_ns(_ns)  # the child is a new conversation of `_ns`: written under this config's limit
        if new_id is not None:
            new_id = validate_id(new_id, "new_id", self.config.max_id_chars)
        check_position(up_to, "up_to")
        child = self.cold.fork(key, up_to, new_id=new_id, max_id_chars=self.config.max_id_chars)
        if self.hot is not None:
            self.hot.erase([child])
            self.hot.refresh(child)
        named = self.cold.name_of(child)
        if named is None:  # erased between the fork's commit and now
            raise ConversationNotFound(new_id or key_name(child), _ns)
        return named[1]

    def prune(self, older_than: dt.timedelta | dt.datetime | float, *, namespace: str | None = None,
              all_namespaces: bool = False, dry_run: bool = False) -> PruneReport:
        """Delete whole conversations idle for longer than `older_than` (an age, or a
        cutoff datetime, or an age in seconds): whose last message is older, and, for a
        fork, whose creation is too (`tiers.dialect.PRUNE_IDLE_SQL`), with every derived byte;
        reclaims disk. Like every method, it acts on `namespace` (default: "default")
        only; every namespace only with `all_namespaces=True`. A conversation written to
        while the prune runs is no longer idle and is kept whole (each batch checks again
        before it erases); the report counts only what was erased. `dry_run=True`: the
        report of what it would erase now (conversations, messages, ids, incarnations),
        erasing and writing nothing (no tombstone, no byte reclaimed, no erasure hook
        told); it says so (`dry_run` True, `scrubbed` and `wal_truncated` False). A
        snapshot: a prune run after it keeps what was written to since, and takes what
        became idle since."""
        now = time.time()
        # an age below zero or a cutoff in the future would erase conversations still being
        # written to: refused whichever way it is given
        if isinstance(older_than, dt.timedelta):
            if older_than < dt.timedelta(0):
                raise ValidationError("older_than", f"must be a non-negative age, got {older_than}")
            cutoff = now - older_than.total_seconds()
        elif isinstance(older_than, dt.datetime):
            cutoff = older_than.timestamp()
            if cutoff > now:
                raise ValidationError("older_than", f"must not be in the future, got {older_than.isoformat()}")
        elif isinstance(older_than, int | float) and not isinstance(older_than, bool) and older_than >= 0:
            if not older_than <= MAX_AGE_S:  # NaN, infinity, and ages a float cannot hold
                raise ValidationError("older_than", f"must be an age of at most {MAX_AGE_S:.0f} seconds")
            cutoff = now - float(older_than)
        else:
            raise ValidationError("older_than", "must be a timedelta, a datetime or a non-negative age in seconds")
        if all_namespaces and namespace is not None:
            raise ValidationError("namespace", "give a namespace or all_namespaces=True, not both")
        if not isinstance(dry_run, bool):  # a truthy string must not decide whether data goes
            raise ValidationError("dry_run", f"must be a boolean, got {type(dry_run).__name__}")
        ns = None if all_namespaces else self._ns(namespace)
        if dry_run:
            preview = (self.cold.prune_preview(cutoff, all_namespaces=True) if ns is None
                       else self.cold.prune_preview(cutoff, namespace=ns))
            return dataclasses.replace(preview, keys=[self._token(k) for k in preview.keys], internal_keys=[])
        self._catch_erasures()
        if ns is None:
            report = self.cold.prune(cutoff, all_namespaces=True, on_erased=self._forget)
        else:
            report = self.cold.prune(cutoff, namespace=ns, on_erased=self._forget)
        return self._erased(report)

    def delete_conversation(self, conversation_id: str, *, namespace: str | None = None) -> ErasureReport:
        """Erase one conversation on request: its messages and every derived byte (turn
        index, FTS, vectors, summaries, checkpoints, plans, pins, Redis keys) in one
        domain action; disk reclaimed; a tombstone with counts and no content remains."""
        _name, _ns, key = self._key(conversation_id, namespace)
        report = self.cold.delete_conversation(key, on_erased=self._forget)
        return self._erased(report)

    def delete_namespace(self, namespace: str) -> ErasureReport:
        """Erase every conversation of `namespace` and of the namespaces below it (a
        user's or a tenant's right to erasure). The namespace is required: None is refused,
        not read as "default" as other methods read it."""
        if namespace is None:
            raise ValidationError("namespace", "Field required (erasure names the namespace it erases)")
        ns = self._ns(namespace)
        self._catch_erasures()
        report = self.cold.delete_namespace(ns, on_erased=self._forget)
        return self._erased(report)

    def tombstones(self, *, namespace: str | None = None) -> list[dict[str, Any]]:
        """What is left of `namespace`'s pruned and erased conversations: counts, no content."""
        stones, mark = self.cold.tombstones_and_erasure_mark(self._ns(namespace))
        self._catch_erasures_past(mark)
        return stones

    @_fills_caches
    def pin(self, conversation_id: str, position: int, *, priority: int = DEFAULT_PIN_PRIORITY,
            namespace: str | None = None) -> None:
        """Keep a turn in the hot set whatever the eviction pressure (until unpinned)."""
        _name, _ns, key = self._key(conversation_id, namespace)
        check_int(priority, "priority", MIN_PIN_PRIORITY, MAX_PIN_PRIORITY)
        check_position(position, "position")
        moved = self.cold.set_pin(key, position, priority)
        if self.hot is not None:
            self.hot.pin(key, position, priority, log_move=moved)

    @_fills_caches
    def unpin(self, conversation_id: str, position: int, *, namespace: str | None = None) -> None:
        _name, _ns, key = self._key(conversation_id, namespace)
        check_position(position, "position")
        moved = self.cold.set_pin(key, position, None)
        if self.hot is not None:
            self.hot.unpin(key, position, log_move=moved)

    # -- reads -------------------------------------------------------------------------------

    def history(self, conversation_id: str, *, namespace: str | None = None, after: int | None = None,
                limit: int | None = None) -> list[StoredMessage]:
        """The messages in order: every one, or a page of at most `limit` positions after
        position `after` (exclusive; None: from the start). `history_page` also says where
        the next page starts."""
        return self.history_page(conversation_id, namespace=namespace, after=after, limit=limit)[0]

    @_fills_caches
    def history_page(self, conversation_id: str, *, namespace: str | None = None, after: int | None = None,
                     limit: int | None = None) -> tuple[list[StoredMessage], int | None]:
        """A page of the log and the cursor of the next page: the `after` to pass next, or
        None when this page reaches the end. The cursor is a position, so a page never
        skips or repeats a message while others append (a row that cannot be decoded is
        skipped, as everywhere, without ending the paging early)."""
        if after is not None:
            check_position(after, "after", low=-1)
        if limit is not None:
            check_int(limit, "limit", 1, MAX_HISTORY_PAGE)
        name, _ns, key = self._key(conversation_id, namespace)
        start = 0 if after is None else after + 1
        end = None if limit is None else start + limit - 1
        msgs = _named(self.cold.history(key, start=start, end=end), key, name)
        more = end is not None and end < self.cold.last_position(key)
        return msgs, (end if more else None)

    @_fills_caches
    def active(self, conversation_id: str, *, namespace: str | None = None) -> ActiveView:
        """The messages after the latest checkpoint, with that checkpoint: the latest that
        may stand in for what it covers, its lines a control row hides left out
        (`_fold`)."""
        name, _ns, key = self._key(conversation_id, namespace)
        fold = self._fold(key)
        cp = fold[0] if fold is not None else None
        msgs = self.cold.history(key, start=(cp.position + 1) if cp is not None else 0)
        return ActiveView(dataclasses.replace(cp, conversation_id=name) if cp is not None else None,
                          _named(msgs, key, name))

    @_fills_caches
    def facts(self, conversation_id: str, *, namespace: str | None = None, start: int = 0,
              end: int | None = None) -> list[Validity]:
        """What the agent believes now, and what it believed before: the load-bearing
        statements that hold, and every superseded one with its validity interval. With
        `start`/`end`, those of the turns at positions start..end only (end None: to the
        last): the same entries, read from those turns and the chains of corrections
        they start, so a page of a long log costs what its rows do."""
        check_position(start, "start")
        if end is not None:
            check_position(end, "end")
        _name, _ns, key = self._key(conversation_id, namespace)
        with remembered_for(self._scope(key)):  # its cues, parses and labels, for it alone
            return self.superseder.facts(key, start=start, end=end)

    def conversations(self, namespace: str | None = None) -> list[str]:
        """The ids of exactly `namespace`'s conversations (not those below it), all of
        them (`conversations_page` reads a namespace of many a page at a time)."""
        names, mark = self.cold.list_names_and_erasure_mark(self._ns(namespace))
        self._catch_erasures_past(mark)
        return names

    def conversations_page(self, namespace: str | None = None, *, after: str | None = None,
                           limit: int = DEFAULT_CONVERSATIONS_PAGE) -> tuple[list[str], str | None]:
        """A page of `conversations(namespace)`: at most `limit` ids in order, those after
        the id `after` (the previous page's cursor; None: from the first), and the cursor
        of the next page (its last id), None when this page reaches the end. A cursor is
        an id, so a page never repeats an id while others create or erase conversations."""
        ns = self._ns(namespace)
        if after is not None:
            # a cursor is a stored id, which a config with a higher max_id_chars may have
            # made: bounded by what any config allows, not this one (it is only compared)
            validate_id(after, "after", MAX_ID_CHARS_LIMIT)
        check_int(limit, "limit", 1, MAX_CONVERSATIONS_PAGE)
        # one more: is there a next page?
        names, mark = self.cold.list_names_and_erasure_mark(ns, after=after, limit=limit + 1)
        self._catch_erasures_past(mark)
        return (names[:limit], names[limit - 1]) if len(names) > limit else (names, None)

    @_fills_caches
    def catch_up(self, conversation_id: str | None = None, *, namespace: str | None = None) -> int:
        """Embed whatever is pending (for one conversation, or all) right now."""
        if conversation_id is None:
            self._ns(namespace)
            self._catch_erasures()
        key = self._key(conversation_id, namespace)[2] if conversation_id is not None else None
        return self.cold.index_pending(conversation_id=key, batch=self.config.embedding_batch_size)

    @_fills_caches
    def search(
        self,
        conversation_id: str | None,
        query: str,
        k: int = 10,
        *,
        namespace: str | None = None,
    ) -> SearchHits:
        """Hybrid search (vectors + bm25, RRF) in one conversation, or across the
        namespace when `conversation_id` is None. Where the query's vector cannot be
        computed (the embedding model cannot be loaded), by keywords only, and the
        answer's `degraded` says so (module docstring). Each hit says whether its message
        still holds in its conversation (`SearchHit.status`: superseded wholly, with the
        turn that did and when, or in part; a popped correction supersedes nothing);
        the order is the ranking's alone (a lookup: a stale value is marked, not moved)."""
        self._text(query, "query")
        check_int(k, "k", 1, MAX_SEARCH_K)
        if conversation_id is not None:
            _name, _ns, key = self._key(conversation_id, namespace)
        else:
            ns = self._ns(namespace)
            self._catch_erasures()
        failure: Exception | None = None
        pending = 0  # turns of the scope left without a vector by CONTEXT_EMBED_POOLS
        try:
            # at most one catch-up pool inline, as a context does: the rest is the indexer's
            most = CONTEXT_EMBED_POOLS * self.config.embedding_batch_size * INDEX_POOL_BATCHES
            bound = _PoolsBound(CONTEXT_EMBED_POOLS)
            if conversation_id is not None:
                stored = self.cold.index_pending(conversation_id=key, batch=self.config.embedding_batch_size,
                                                 max_rows=most, stop=bound)
            else:  # this namespace's backlog only
                stored = self.cold.index_pending(namespace=ns, batch=self.config.embedding_batch_size,
                                                 max_rows=most, stop=bound)
            waited = False
            if not (bound.fired or stored >= most) and self.cold.embedder is not None:
                # turns of the scope its catch-up left to another one of this process (the
                # indexer, woken by the append, claimed the newest): waited for, as a context
                # does, else the ranking depended on which thread claimed them
                held = ([key] if conversation_id is not None else
                        [c for c in sorted(self.cold.undecided_conversations()) if self.cold.namespace_of(c) == ns])
                waited = bool(self._await_claimed(dict.fromkeys(held)))
            if bound.fired or stored >= most or waited:  # not a store without a model (read-only, none)
                # (after a wait: what is still held, or was given up by a failed catch-up)
                pending = (self.cold.pending_embeddings(key) if conversation_id is not None
                           else self.cold.pending_embeddings(namespace=ns))
            if pending and self._indexer is not None:
                self._indexer.wake.set()  # the rest: the background catch-up, from now
        except Exception as exc:
            # as before a context: a catch-up is a write (the model may be lost, the disk
            # full) and a read must still answer; the turns not yet embedded are found by
            # bm25 meanwhile (logged after the query's embedding, as there)
            failure = exc
        # the query finds vectors remembered for this conversation only; a namespace's
        # search has a scope of its own
        scope = (self._scope(key) if conversation_id is not None
                 else memo_scope(self.cold.db_uuid, namespace=ns))
        query_vec: np.ndarray | None = None
        degraded: str | None = None
        if self.cold.embedder is not None and query.strip():
            with remembered_for(scope):
                try:
                    query_vec = self._query_vectors([query])[0]
                except EmbeddingUnavailable as exc:  # a derived part: keyword ranking still answers
                    degraded = SEARCH_KEYWORDS_ONLY.format(error=exc.error)
        self._caught_up(failure)
        # what control rows hide (a popped item, the control rows themselves) is never a
        # hit: ask for as many more as were hidden until k are left or the scope runs out
        want = k
        while True:
            with remembered_for(scope):
                if conversation_id is not None:
                    hits = self.cold.search(query, want, conversation_id=key, rrf_k=self.config.rrf_k,
                                            query_vec=query_vec, dense=degraded is None)
                else:
                    hits = self.cold.search(query, want, namespace=ns, rrf_k=self.config.rrf_k,
                                            query_vec=query_vec, dense=degraded is None)
            hidden_in = {c: hidden_positions(rows)[0]
                         for c, rows in self.cold.control_rows([h.conversation_id for h in hits]).items()}
            hidden = {(c, p) for c, ps in hidden_in.items() for p in ps}
            shown = [h for h in hits if (h.conversation_id, h.position) not in hidden]
            if len(shown) >= k or len(hits) < want:
                hits = shown[:k]
                break
            want = max(2 * want, k + len(hidden))
        keys = [(h.conversation_id, h.position) for h in hits]
        texts = {(m.conversation_id, m.position): m.text for m in self.cold.get_many(keys)}
        names = self.cold.names_of([h.conversation_id for h in hits])
        # each hit marked as its conversation holds it now (superseded wholly or in part,
        # past a popped correction), read for all the hits at once; the order is the
        # search's: a lookup ranks by relevance, marking a stale value rather than hiding it
        states = turn_states(self.cold, keys, hidden_in)
        out = SearchHits()
        for h in hits:
            at = (h.conversation_id, h.position)
            if at not in texts or h.conversation_id not in names:
                continue  # its row failed its model (salvaged), or its conversation went meanwhile
            st = states.get(at)  # None: its turn row went meanwhile (not known)
            out.append(SearchHit(names[h.conversation_id], h.position, h.score, h.ranks, texts[at],
                                 st.status if st is not None else None,
                                 st.superseded_by if st is not None else None,
                                 st.until if st is not None else None))
        out.degraded = degraded
        out.vectors_pending = pending
        return out

    @_fills_caches
    def context(
        self,
        conversation_id: str,
        query: str | None = None,
        budget: int = DEFAULT_BUDGET_TOKENS,
        *,
        system: str | None = None,
        namespace_recall: bool = True,
        namespace: str | None = None,
        truncate_latest: bool = False,
        record: bool = True,
        timezone: str | None = None,
        pending_tokens: int = 0,
        preview: bool = False,
    ) -> Context:
        """The slice of the past to send with this turn: OpenAI-format messages, their
        exact token count (never above `budget`) and the plan that says why. `record=False`:
        a what-if plan (a recall eval's fresh context) that neither advances the prompt-cache
        epoch nor lands in the plans table, so the agent's next call sees no difference;
        planned as the recorded call would be. `preview=True` (the inspector's "what the
        agent would get now"): planned exactly as this call recorded would be, while storing
        nothing (whatever `record` says); today planned as `record=False` is, kept as its own
        argument so that a rule that plans a recorded call differently (84bd649, reverted)
        shows in the preview. `timezone`:
        the user's IANA zone for this call (None: `Config.timezone`): the calendar of the
        days turns tell of and the query names, and the clock of the dates shown; a change
        from the previous call's starts a new prompt-cache epoch. `pending_tokens`: what the
        caller sends after the context, a message the log does not hold yet (a streamed
        Agents run's question, saved after the model call): the context is planned under
        `budget` less them, so the whole request stays within `budget`, while the epoch
        stays keyed by `budget` (the next call, with that message in the log, extends it);
        past the budget beside the reply priming: `BudgetTooSmall` (part pending, field
        `pending_tokens`); a room left too small for the fixed part: `BudgetTooSmall`
        naming the budget less them."""
        tz = optional_timezone(timezone) or self.config.timezone
        name, ns, conv = self._key(conversation_id, namespace)
        if query is not None:
            self._text(query, "query")
        check_int(budget, "budget", 1, MAX_BUDGET_TOKENS, "tokens")
        check_int(pending_tokens, "pending_tokens", 0, MAX_BUDGET_TOKENS, "tokens")
        if pending_tokens and REPLY_PRIMING_TOKENS + pending_tokens > budget:
            raise BudgetTooSmall(budget, REPLY_PRIMING_TOKENS + pending_tokens, priming=REPLY_PRIMING_TOKENS,
                                 pending=pending_tokens)
        if system is not None:
            self._text(system, "system")
        if query:
            # the query's vector needs the model: its load (onnxruntime builds the session
            # in C++, mostly without the GIL) overlaps the turn cache's first load below
            load_in_background(self.embedder)
        # the turn cache's keyword index, the query's label, stems, counts and vector are
        # remembered for this conversation only (tiers.memo)
        record = record and not preview  # a preview stores nothing
        with remembered_for(self._scope(conv)):
            ctx = self._context(conv, query, budget, ns=ns, system=system, namespace_recall=namespace_recall,
                                truncate_latest=truncate_latest, record=record, tz=tz, pending_tokens=pending_tokens,
                                preview=preview)
        _name_plan(ctx.plan, conv, name, self.cold)
        ctx.namespace = ns  # where an adapter reads its rows back (`to_anthropic`)
        if self.config.store_plans and record:
            try:
                self.cold.store_plan(conv, ctx.plan.to_json())
            except Exception as exc:
                from tiermem.tiers.files import storage_problem

                if storage_problem(exc) is None:
                    raise
                # the plan log is a record of how contexts were chosen: a store refusing
                # it (a full disk, read-only, busy) costs that record, not the context
                log.warning("could not store the context's plan, the context is answered: %s", exc)
        self._look_for_owed_scrub()
        return ctx

    def _context(self, conv: str, query: str | None, budget: int, *, ns: str, system: str | None,
                 namespace_recall: bool, truncate_latest: bool, record: bool, tz: str,
                 pending_tokens: int = 0, preview: bool = False) -> Context:
        """`context` for a conversation's key, once its arguments are checked."""
        # a refusal costs no turn table: the latest message alone past the budget is refused
        # before the first read of the conversation derives every turn's keywords and periods
        if not self.turns.holds(conv):
            self.planner.refuse_unfit(conv, budget - pending_tokens, system=system, truncate_latest=truncate_latest,
                                      pending=pending_tokens)
        table = None
        failure: Exception | None = None
        cut = 0  # turns left without a vector by CONTEXT_EMBED_POOLS
        claimed = 0  # turns still without a vector after waiting CLAIMED_WAIT_S for other catch-ups
        given_up = False  # ... none held them any more (a catch-up failed, or they came after its read)
        # the plan's timings start here, not where the planner starts: the stages before it
        # (the turn table, the inline catch-up, the hot and warm reads) are the call's too
        t0 = time.perf_counter()
        stages: dict[str, float] = {}
        try:
            # only when this conversation has turns without a vector (the copy the
            # planner scores from knows): the probe alone costs more than a plan stage
            table = self.turns.get(conv, tz)
            stages["turns"] = (time.perf_counter() - t0) * MS_PER_S
            if not bool(table.has_vec.all()):
                most = CONTEXT_EMBED_POOLS * self.config.embedding_batch_size * INDEX_POOL_BATCHES
                bound = _PoolsBound(CONTEXT_EMBED_POOLS)
                stored = self.cold.index_pending(conversation_id=conv, batch=self.config.embedding_batch_size,
                                                 max_rows=most, stop=bound)
                # a get looks again at PENDING_RECHECK_TURNS of the turns it held without a
                # vector, in log order (the order they were embedded): once per that many
                for _ in range(-(-stored // PENDING_RECHECK_TURNS)):
                    table = self.turns.get(conv, tz)
                if bound.fired or stored >= most:  # not a store without a model (read-only, none)
                    cut = int((~table.has_vec).sum())
                elif self.cold.embedder is not None and not bool(table.has_vec.all()):
                    pending = [int(p) for p in table.positions[~table.has_vec]]
                    waited = self._await_claimed({conv: pending})
                    # read again after the wait (or for vectors committed since the first
                    # read), once per PENDING_RECHECK_TURNS of them, the turns a get rechecks:
                    # whatever the wait's outcome, never once per wake-up
                    for _ in range(-(-len(pending) // PENDING_RECHECK_TURNS)):
                        table = self.turns.get(conv, tz)
                    if waited:
                        claimed = int((~table.has_vec).sum())
                        given_up = not waited[conv]
                if cut and self._indexer is not None:
                    self._indexer.wake.set()  # the rest: the background catch-up, from now
        except Exception as exc:
            # catching up vectors is a write; a read must still answer (full disk, locked
            # db, the model lost): the turns not yet embedded are found by bm25 and the
            # tail meanwhile. Logged once the query's embedding told whether the model is why
            failure = exc
        # the inline catch-up of pending turns (and the table's reads again after it): ~0
        # when every turn had its vector
        stages[EMBED_PENDING_STAGE] = (time.perf_counter() - t0) * MS_PER_S
        hot_view = self._hot_view(conv)
        summaries = self._summaries(conv)
        stages["views"] = (time.perf_counter() - t0) * MS_PER_S  # the hot set's and the warm views' reads
        try:
            ctx = self.planner.build(conv, query, budget, namespace=ns, system=system, hot=hot_view,
                                     summaries=summaries,
                                     namespace_recall=namespace_recall and self.config.namespace_recall,
                                     truncate_latest=truncate_latest, table=table, record=record, timezone=tz,
                                     started=t0, stages=stages, pending_tokens=pending_tokens, preview=preview)
        finally:
            self._caught_up(failure)
        if cut:
            # said, or a reader takes a turn the dense ranking never saw for one it judged unrelated
            ctx.plan.vectors_pending = cut
            ctx.plan.retrieval += (f"; dense ranking partial: {cut} turn(s) have no vector yet (embedded in the "
                                   "background), found by keywords and recency only")
        elif claimed:
            ctx.plan.vectors_pending = claimed
            why = ("have no vector yet" if given_up else "were still being embedded by another catch-up of "
                   f"this process after {CLAIMED_WAIT_S * MS_PER_S:.0f} ms")
            ctx.plan.retrieval += f"; dense ranking partial: {claimed} turn(s) {why}, found by keywords and recency only"
        return ctx

    def _await_claimed(self, turns: Mapping[str, Sequence[int] | None]) -> dict[str, bool]:
        """After a context's or a search's own catch-up left turns of its scope without a
        vector (another catch-up of this process read them first, tiers.catchup.Claims):
        wait, at most CLAIMED_WAIT_S in all, until whichever holds them stored their
        vectors and ran their hooks. `turns`: conversation key -> positions (None: any of
        its turns). Answers the conversations that were held, each with whether it still
        was past the bound (empty: none was held, which costs no wait); the caller reads
        what it needs again once after it. Woken by each release (`ColdLog.wait_decided`),
        never polled. Only this process's catch-ups are seen (claims are not rows):
        another process's claim on a turn never kept this one from embedding it itself,
        as before. Neither waits on the other: the indexer's thread never waits for a
        context or a search (hooks never wait)."""
        deadline = time.monotonic() + CLAIMED_WAIT_S
        # one look without waiting first: the common case (none held) costs no wait
        held = [conv for conv, positions in turns.items() if not self.cold.wait_decided(conv, positions, 0.0)]
        return {conv: not self.cold.wait_decided(conv, turns[conv], max(0.0, deadline - time.monotonic()))
                for conv in held}

    def _hot_view(self, conv: str) -> HotView:
        from tiermem.planner.build import HotView

        if self.hot is None:
            return HotView({}, {}, degraded=True)
        res = self.hot.read(conv)
        if res.hot is None:
            return HotView({}, {}, degraded=True)
        hs = res.hot
        return HotView({t.position: t.payload for t in hs.turns},
                       {t.position: t.priority for t in hs.turns if t.pinned},
                       degraded=False, rebuilt=res.rebuilt, overflow_tokens=hs.overflow_tokens)

    def make_scheduler(self) -> ConsolidationScheduler:
        """A ConsolidationScheduler over this Memory's views (not started). Its thread
        fills this process's caches as a call does: each run drops what others erased
        first, and each view's refresh runs within `_erasures_during` (module docstring)."""
        from tiermem.consolidation.scheduler import ConsolidationScheduler

        return ConsolidationScheduler(self.views, interval_s=self.config.scheduler_interval_s,
                                      max_views_per_run=self.config.scheduler_max_views_per_run,
                                      check=self._catch_erasures, guard=self._erasures_during)

    def start_scheduler(self) -> ConsolidationScheduler:
        """Keep warm views inside their freshness budgets from a background thread. In a
        pre-fork server, call this in each worker after the fork, never before."""
        if self.scheduler is None:
            self.scheduler = self.make_scheduler()
            self.scheduler.start()
        return self.scheduler

    @_fills_caches
    def consolidate(self, conversation_id: str | None = None, *, namespace: str | None = None) -> Consolidated:
        """Refresh warm views now: every view of one conversation (ConversationNotFound
        when it is erased meanwhile; a busy store's refusal raised, as any call's), or,
        without one, a sweep of up to scheduler_max_views_per_run of those over budget,
        as a scheduler run does (`consolidation.scheduler.sweep`):

        - a view whose conversation is erased during the sweep ends there and the sweep
          goes on (`ViewMaintainer.sweep_refresh`);
        - a busy store does not end the call: a conversation whose rows another session
          holds locked past the lock wait (PostgreSQL) has its other views skipped and
          the sweep goes on with the others'; a whole table locked (an erasure's VACUUM
          FULL), or SQLite's write lock held by another process, ends the sweep after
          that one wait (each later view would wait it out too). Nothing is raised: what
          was refused and what was skipped, and why, are in the answer (`Consolidated`:
          `failures`, `skipped`, `refused`, `complete`), and the next call or scheduler
          run picks those views again;
        - anything else a refresh raises (the store read-only, full or unreachable, a
          bug) is raised at once; the views refreshed before it stay refreshed;
        - a view whose summarizer failed keeps its previous version (the failure recorded
          and backed off, as in a scheduler run): it is not counted as refreshed, and is
          in `failures` with its cause (one conversation's refresh too), so `complete`
          is False; so is a refresh whose new version still shows a line superseded or
          retracted before it read its sources (a summarizer restating the old value:
          STILL_OUTDATED_ERROR, recorded and backed off alike, its version stored).

        - a view whose lease another process holds (its refresh under way) while the view
          is still behind the log or has none yet is not counted as refreshed: it is in
          `skipped` (SKIP_HELD, "held by another refresher"), so `complete` is False.

        Answers a `Consolidated`, an int: how many views were refreshed (a new version
        or found current; the erased and the held ones not counted)."""
        from tiermem.consolidation.scheduler import (
            SKIP_HELD,
            Consolidated,
            RefreshFailure,
            SkippedView,
            sweep,
        )
        from tiermem.tiers.files import storage_problem

        if conversation_id is None:
            try:
                self._catch_erasures()
                picked = self.views.stale_views(self.config.scheduler_max_views_per_run)
            except Exception as exc:
                problem = storage_problem(exc)
                if problem is None or not problem.busy:
                    raise
                return Consolidated(0, refused=exc)  # not even the views to refresh could be read
            done = sweep(self.views, picked, raise_unless_busy=True)
            return Consolidated(done.refreshed + done.unchanged, picked=done.picked,
                                failures=done.failures + done.summarizer_failures, skipped=done.skipped)
        _name, _ns, conv = self._key(conversation_id, namespace)
        self.cold.index_pending(conversation_id=conv)
        failed: list[tuple[str, str, Exception]] = []
        held: list[tuple[str, str]] = []
        views = self.views.refresh_all(conv, failed, held)  # each refresh in the conversation's memo scope
        # a view whose summarizer failed keeps its previous version, which refresh_all
        # answers too (none when it had none): refreshed, it is not; nor is one whose
        # lease another process holds while it is behind (its stale version answered)
        left = {(kind, key) for kind, key, _cause in failed} | set(held)
        covering = sum(1 for v in views if (v.kind, v.key) not in left)
        return Consolidated(covering, picked=covering + len(left),
                            failures=tuple(RefreshFailure(conv, kind, key, cause) for kind, key, cause in failed),
                            skipped=tuple(SkippedView(conv, kind, key, SKIP_HELD, "") for kind, key in held))

    def _summaries(self, conv: str) -> list[SummaryBlock]:
        """The warm views the planner may show, with their staleness; the latest fold
        stands in when no view exists yet."""
        from tiermem.planner.build import SummaryBlock
        from tiermem.tiers.warm import staleness  # here: importing tiers must not load the warm tier

        blocks: list[SummaryBlock] = []
        try:
            view = self.warm.latest(conv, "rolling")
        except Exception:  # a derived view that cannot be read is a view we do without
            log.exception("warm view of %s unreadable", conv)
            view = None
        if view is not None:
            st = self.views.staleness(conv, "rolling", view=view)
            current = [sent for sent in view.sentences if sent.status == "current"]
            lines = [(sent.text, tuple(sent.positions)) for sent in current]
            blocks.append(SummaryBlock("rolling", view.version, view.start_position, view.end_position, lines,
                                       st.turns_behind, st.seconds_behind, st.over_budget,
                                       seen_superseded=[sent.seen_superseded for sent in current]))
            return blocks
        fold = self._fold(conv)
        if fold is None:
            return []
        cp, fold_lines = fold
        # a fold's lines keep their source positions, so the planner leaves out what a
        # control row hides as it does for a view; one without them is a single line
        shown: list[tuple[str, tuple[int, ...]]] = [(cp.summary, (cp.position,))]
        if fold_lines is not None:
            shown = [(ln.text, ln.positions) for ln in fold_lines if ln.status == "current"]
        last = self.cold.last_position(conv)
        now = self.views.clock()
        first = self.warm.created_at(conv, cp.position + 1) if last > cp.position else None
        st = staleness(None, last_position=last, last_message_at=first or now, max_turns=self.views.max_turns_behind,
                       max_seconds=self.views.max_seconds_behind, now=now, first_uncovered_at=first,
                       turns_behind=last - cp.position, bound_at=cp.created_at)
        return [SummaryBlock("checkpoint", 1, 0, cp.position, shown, st.turns_behind, st.seconds_behind,
                             st.over_budget, tier="cold", whole=fold_lines is None)]

    def _fold(self, conv: str) -> tuple[Checkpoint, list[FoldLine] | None] | None:
        """The latest checkpoint that may stand in for what it covers (DESIGN invariant
        4: a popped item is hidden everywhere, a fold included), with its lines (None: it
        has no per-line positions). A fold whose lines carry positions loses the lines
        drawn from a hidden item; one without them is passed over when a control row
        after it hides an item inside it (its text may hold that item), and so is a fold
        left with no line: an older checkpoint, or none, stands in instead."""
        rows = self.cold.control_rows([conv]).get(conv, [])
        hidden = hidden_positions(rows)[0]
        at: int | None = None
        for _ in range(MAX_FOLDS_TRIED):
            cp = self.cold.latest_checkpoint(conv, at_or_before=at)
            if cp is None:
                return None
            lines = cp.lines()
            if lines is None:
                later = hidden_positions([r for r in rows if r[0] > cp.position])[0]
                if not any(p <= cp.position for p in later):
                    return cp, None
            else:
                kept = [ln for ln in lines if hidden.isdisjoint(ln.positions)]
                if len(kept) == len(lines):
                    return cp, lines
                if kept:
                    meta = dict(cp.metadata or {})
                    meta[FOLD_LINES_KEY] = [{"positions": list(ln.positions), "status": ln.status} for ln in kept]
                    return dataclasses.replace(cp, summary="\n".join(ln.text for ln in kept), metadata=meta), kept
            if cp.position == 0:
                return None
            at = cp.position - 1
        return None

    def stats(self, *, namespace: str | None = None) -> dict[str, Any]:
        """Counts and health of every tier (only `namespace`'s counts when given)."""
        out: dict[str, Any] = {}
        ns = self._ns(namespace) if namespace is not None else None
        if ns is not None:
            out["cold"], mark = self.cold.namespace_stats_and_erasure_mark(ns)
        else:
            out["cold"], mark = self.cold.stats_and_erasure_mark()
        self._catch_erasures_past(mark)
        if self.hot is not None:
            out["hot"] = self.hot.stats(namespace=namespace)
        elif self.hot_unavailable is not None:
            # the shape of HotLink.stats' health keys: a monitor reading hot.healthy finds
            # it false, as for an external Redis that does not answer (the error only in
            # the unscoped stats, as there)
            out["hot"] = {"healthy": False, "degraded_since": self.hot_unavailable_since,
                          "backend": "external" if self.config.redis_url is not None else "embedded"}
            if namespace is None:
                out["hot"]["last_error"] = self.hot_unavailable
        if namespace is None:
            # bad view rows this process met (a namespace's own count would need its keys);
            # the views whose latest refresh failed, of every namespace (counts and an age:
            # the errors' text stays with their views, WarmStore.errors)
            from tiermem.tiers.migrate_store import unfinished_marks

            # migrate-store merges into this store that never verified their copy (the
            # open warned of each; a store a first copy left unfinished is not opened)
            out["unfinished_copies"] = [m.to_json() for m in unfinished_marks(self._marked)]
            failing, oldest = self.views.failing()
            out["warm"] = {"salvaged_rows": self.warm.salvaged, "views_failing": failing,
                           "oldest_failure_age_s": oldest, "refresh_failures": self.views.failures}
            out["turn_cache"] = self.turns.stats()
            failure = self._embed_failure
            out["embedder"] = {"loaded": embedder_loaded(self.embedder),
                               "runtime": str(getattr(self.embedder, "active_runtime", "external")),
                               "state": "ok" if failure is None else "degraded",
                               "degraded_since": failure[0] if failure is not None else None,
                               "reason": failure[1] if failure is not None else None}
        return out

    def warm_up(self) -> str:
        """Load the embedding model now (a server does, in the background, so its first
        query does not wait) and let the background indexer catch up; returns the runtime.
        It drops what others erased first, as every other call does (module docstring)."""
        try:
            self._catch_erasures()
        except Exception:  # the model is what it is for: a locked or unreachable store is
            # the next call's (or the indexer's) to retry, not a failed model load
            log.warning("could not read the erasures since the last check; will retry", exc_info=True)
        load = getattr(self.embedder, "load", None)
        try:
            if callable(load):
                load()
            else:
                self.embedder.embed(["warm-up"])
        except model_unavailable_errors() as exc:  # another error is a bug, not a degraded model
            self._embedding_failed(exc)
            raise
        self._embedding_answered()
        if self._indexer is not None:
            self._indexer.wake.set()
        return str(getattr(self.embedder, "active_runtime", "external"))

    def _relabel_all(self) -> int:
        """Recompute labels and supersession for every turn, replaying each
        conversation in log order exactly as live appends did."""
        n = 0
        for conv in self.cold.all_keys():
            msgs = self.cold.history(conv)
            with remembered_for(self._scope(conv)):  # as its live appends labelled them
                labels = [self._label(m.text, m.role, m.body) for m in msgs]
                self.cold.set_labels(conv, [(m.position, *lab) for m, lab in zip(msgs, labels, strict=True)])
                self._release(conv, self.superseder.replay(
                    conv, [Appended(m.position, m.role, m.text, lab[0], lab[1], speaker_name(m.body))
                           for m, lab in zip(msgs, labels, strict=True)]))
                # a correction the replay searched while turns before it had no vector
                # (its chunk's catch-up embeds INLINE_INDEX_ROWS of them): those embedded
                # by now are searched again here, the rest by the hook of their catch-up
                self._recheck(conv)
            n += len(msgs)
        return n

    @_fills_caches
    def rebuild(self, *, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Recompute every derived structure from the log: turn index, FTS, vectors, the
        hot sets. Proves invariant 2: nothing derived holds data the log lacks, this
        process's copies included: it drops what others erased before it reads."""
        self._catch_erasures()
        self._supersede_on_embed = False  # labels are cleared until _relabel_all replays them
        try:
            report: dict[str, Any] = dict(self.cold.rebuild(progress=progress))
            self.turns.drop()
            report["labeled"] = self._relabel_all()
        finally:
            self._supersede_on_embed = True
            # the replay's supersession reads through the turn cache: what it loaded on
            # the way goes too, so nothing read during the rebuild outlives it
            self.turns.drop()
        if self.hot is not None:
            report["hot_rebuilt"] = self.hot.rebuild_all()
        return report


def load_in_background(embedder: object) -> threading.Thread | None:
    """Start loading `embedder`'s model in a thread, when it has one to load and
    has not: a caller that embeds meanwhile waits for that load (the embedder's lock),
    and a load that fails there is retried, and raises, in the caller's own call."""
    load = getattr(embedder, "load", None)
    if not callable(load) or embedder_loaded(embedder):
        return None  # (two calls before it is loaded: the second thread waits on the first's lock)

    def run() -> None:
        try:
            load()
        except Exception:  # the caller's own embed call loads again and raises
            log.debug("background model load failed; the next embed call retries", exc_info=True)

    # not a daemon: onnxruntime aborts the process ("terminate called without an active
    # exception", rc 134) when the interpreter exits while a thread builds its session,
    # so an exit waits for the load (a fraction of a second) instead; none starts at exit
    return start_build(run, "tiermem-model-load")


def _told(text: str | None, created: float, zone: Zone) -> tuple[tuple[float, float] | None, bool]:
    """planner.timeline.told, imported when the turn cache first loads a turn."""
    from tiermem.planner.timeline import told

    return told(text, created, zone)


def _named(msgs: list[StoredMessage], key: str, name: str) -> list[StoredMessage]:
    """Messages as their owner knows them: under the conversation's id, not its key."""
    if key == name:
        return msgs
    return [dataclasses.replace(m, conversation_id=name) for m in msgs]


def _name_plan(plan: Any, key: str, name: str, cold: ColdLog) -> None:
    """Replace conversation keys in a plan by the ids their owner knows."""
    keys = {it.conversation_id for it in [*plan.items, *plan.left_out]} - {key}
    names = cold.names_of(sorted(keys)) if any(KEY_SEPARATOR in k for k in keys) else {}
    names[key] = name
    plan.conversation_id = name
    # copies: the items are also the planner's record of what this epoch showed (by key);
    # renamed in place, the next call would find "its" turns gone and start a new epoch
    plan.items = [dataclasses.replace(it, conversation_id=names.get(it.conversation_id, it.conversation_id))
                  for it in plan.items]
    plan.left_out = [dataclasses.replace(it, conversation_id=names.get(it.conversation_id, it.conversation_id))
                     for it in plan.left_out]


class NamespacedMemory:
    """`Memory` confined to one namespace: a conversation of another namespace does not
    exist for it. Every method is spelled out (no pass-through of attributes), so a
    method added to Memory is not reachable here until it is confined too. Closing the
    view, or leaving its `with` block, does not close the Memory it came from."""

    def __init__(self, memory: Memory, namespace: str, *, timezone: str | None = None) -> None:
        self.memory = memory
        self.namespace = memory._ns(namespace)
        # the user's zone: the default of this view's calls (None: the Memory's config)
        self.timezone = optional_timezone(timezone)

    def __enter__(self) -> NamespacedMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """A no-op: the Memory belongs to whoever opened it."""

    @property
    def config(self) -> Config:
        return self.memory.config

    def namespaced(self, namespace: str, *, timezone: str | None = None) -> NamespacedMemory:
        """A view of a namespace below this one (`acme` -> `acme/alice`); `timezone`: its
        calls' default (None: this view's)."""
        sub = self.memory._ns(f"{self.namespace}/{namespace}")
        return NamespacedMemory(self.memory, sub, timezone=timezone if timezone is not None else self.timezone)

    def append(self, conversation_id: str, message: Message | dict[str, Any], *, session_id: str | None = None,
               metadata: dict[str, Any] | None = None, created_at: float | None = None,
               idempotency_key: str | None = None, expect_position: int | None = None,
               expect_incarnation: str | None = None) -> int:
        return self.memory.append(conversation_id, message, session_id=session_id, metadata=metadata,
                                  created_at=created_at, namespace=self.namespace, idempotency_key=idempotency_key,
                                  expect_position=expect_position, expect_incarnation=expect_incarnation)

    def append_many(self, conversation_id: str, messages: Sequence[Message | dict[str, Any]], *,
                    session_id: str | None = None, idempotency_key: str | None = None,
                    expect_position: int | None = None, expect_incarnation: str | None = None) -> list[int]:
        return self.memory.append_many(conversation_id, messages, session_id=session_id, namespace=self.namespace,
                                       idempotency_key=idempotency_key, expect_position=expect_position,
                                       expect_incarnation=expect_incarnation)

    def append_outcome(self, conversation_id: str, messages: Sequence[Message | dict[str, Any]], *,
                       session_id: str | None = None, idempotency_key: str | None = None,
                       expect_position: int | None = None, expect_incarnation: str | None = None) -> AppendOutcome:
        return self.memory.append_outcome(conversation_id, messages, session_id=session_id, namespace=self.namespace,
                                          idempotency_key=idempotency_key, expect_position=expect_position,
                                          expect_incarnation=expect_incarnation)

    def checkpoint(self, conversation_id: str, summary: str, position: int) -> Checkpoint:
        return self.memory.checkpoint(conversation_id, summary, position, namespace=self.namespace)

    def fork(self, conversation_id: str, up_to: int, *, new_id: str | None = None) -> str:
        return self.memory.fork(conversation_id, up_to, new_id=new_id, namespace=self.namespace)

    def prune(self, older_than: dt.timedelta | dt.datetime | float, *, dry_run: bool = False) -> PruneReport:
        return self.memory.prune(older_than, namespace=self.namespace, dry_run=dry_run)

    def delete_conversation(self, conversation_id: str) -> ErasureReport:
        return self.memory.delete_conversation(conversation_id, namespace=self.namespace)

    def delete_namespace(self) -> ErasureReport:
        """Erase this view's namespace and every namespace below it."""
        return self.memory.delete_namespace(self.namespace)

    def tombstones(self) -> list[dict[str, Any]]:
        return self.memory.tombstones(namespace=self.namespace)

    def pin(self, conversation_id: str, position: int, *, priority: int = DEFAULT_PIN_PRIORITY) -> None:
        self.memory.pin(conversation_id, position, priority=priority, namespace=self.namespace)

    def unpin(self, conversation_id: str, position: int) -> None:
        self.memory.unpin(conversation_id, position, namespace=self.namespace)

    def history(self, conversation_id: str, *, after: int | None = None, limit: int | None = None
                ) -> list[StoredMessage]:
        return self.memory.history(conversation_id, namespace=self.namespace, after=after, limit=limit)

    def history_page(self, conversation_id: str, *, after: int | None = None, limit: int | None = None
                     ) -> tuple[list[StoredMessage], int | None]:
        return self.memory.history_page(conversation_id, namespace=self.namespace, after=after, limit=limit)

    def active(self, conversation_id: str) -> ActiveView:
        return self.memory.active(conversation_id, namespace=self.namespace)

    def conversations(self) -> list[str]:
        return self.memory.conversations(self.namespace)

    def conversations_page(self, *, after: str | None = None, limit: int = DEFAULT_CONVERSATIONS_PAGE
                           ) -> tuple[list[str], str | None]:
        return self.memory.conversations_page(self.namespace, after=after, limit=limit)

    def catch_up(self, conversation_id: str) -> int:
        return self.memory.catch_up(conversation_id, namespace=self.namespace)

    def search(self, conversation_id: str | None, query: str, k: int = 10) -> SearchHits:
        return self.memory.search(conversation_id, query, k, namespace=self.namespace)

    def context(self, conversation_id: str, query: str | None = None, budget: int = DEFAULT_BUDGET_TOKENS, *,
                system: str | None = None, namespace_recall: bool = True, truncate_latest: bool = False,
                record: bool = True, timezone: str | None = None, pending_tokens: int = 0,
                preview: bool = False) -> Context:
        return self.memory.context(conversation_id, query, budget, system=system, namespace_recall=namespace_recall,
                                   truncate_latest=truncate_latest, namespace=self.namespace, record=record,
                                   timezone=timezone if timezone is not None else self.timezone,
                                   pending_tokens=pending_tokens, preview=preview)

    def consolidate(self, conversation_id: str) -> int:
        """Refresh one conversation's warm views now (the all-namespace sweep is the
        scheduler's, not a tenant's)."""
        return self.memory.consolidate(conversation_id, namespace=self.namespace)

    def facts(self, conversation_id: str) -> list[Validity]:
        return self.memory.facts(conversation_id, namespace=self.namespace)

    def stats(self) -> dict[str, Any]:
        return self.memory.stats(namespace=self.namespace)


def hot_start_errors() -> tuple[type[BaseException], ...]:
    """What `Memory(hot=True)` raises when the hot tier cannot be reached or started;
    every one leaves the cold log usable, so a caller may go on without the hot tier."""
    import redis

    from tiermem.tiers.errors import RedisBinaryNotFound, RedisStartError

    return (
        RedisBinaryNotFound,
        RedisStartError,
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
        # a read-only data dir: the embedded server's directory cannot be prepared, and
        # read commands go on from the cold log (opened read-only)
        OSError,
    )


def open_with_fallback(config: Config, *, embedder: Embedder | None = None,
                       background_indexing: bool = False) -> tuple[Memory, BaseException | None]:
    """A Memory with the hot tier when it can be reached or started, else a cold-only one
    whose `hot_unavailable` says why (stats and /healthz report the hot tier unhealthy);
    the second value is that error (None when the hot tier is on). The cold store's own
    errors (read-only and must not be read, unreachable) are raised, not retried."""
    # the tuple before the try: evaluated in the except clause, it imported redis there, and
    # after a Ctrl-C that cut that import short the half-made module raised AttributeError
    # (chained on the KeyboardInterrupt: exit 1, not 130)
    errors = hot_start_errors()
    try:
        return Memory(config, embedder=embedder, hot=True, background_indexing=background_indexing), None
    except errors as exc:
        from tiermem.tiers.errors import StorageReadOnly, StoreUnavailable

        if isinstance(exc, StorageReadOnly | StoreUnavailable):
            raise  # the cold store's own (OSError too): a second open would meet it again, and wait again
        mem = Memory(config, embedder=embedder, hot=False, background_indexing=background_indexing)
        mem.hot_unavailable = f"{type(exc).__name__}: {exc}"
        mem.hot_unavailable_since = time.time()
        return mem, exc
