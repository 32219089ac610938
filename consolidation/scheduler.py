"""The consolidation scheduler: an APScheduler 3.x job that refreshes warm views that
are over their freshness budget.

- One interval job, `max_instances=1` (a slow run is never doubled up), `coalesce=True`
  (runs missed while one was in progress or the process was suspended collapse into
  one), `misfire_grace_time` of one interval. A run that outlasts the interval is let
  finish: each tick that finds it still going is skipped (counted in `overlapped`) and
  the runs go on at the first tick after it ends, said in one WARNING line per such run
  ("the previous run is still going", with its age and the interval), not APScheduler's
  "maximum number of running instances reached" per tick (its scheduler logs to
  `APSCHEDULER_LOG`, which leaves that line out). Each run refreshes at most
  `max_views_per_run` views, most-behind first (`ViewMaintainer.stale_views`),
  leaving out the views whose refresh failed and whose backoff has not run out
  (`ViewMaintainer.held_back`: a `view_failures` row, so every process's scheduler
  waits alike; `held_back` in the stats counts those the run passed over).
- No scheduler state is durable: what is stale is computed from the summaries and
  the log, so a new scheduler (after a restart, or in another process) resumes where
  the previous one stopped. The one mark a run leaves is derived too: a conversation
  whose views all cover its log is marked current (`WarmStore.mark_current`) and left
  out of later runs until its next append, so a run costs what was written since, not
  the number of conversations (`tiers.store.VIEWS_BEHIND_SQL`).
- **Start it after fork.** The job runs in a thread of the process that called
  `start()`; a child forked afterwards (pre-fork servers: gunicorn, uvicorn
  --workers) inherits no running thread, and its copy of the SQLite connection must
  not be used. `start()` records the pid, and a run in a process with another pid
  refuses to do anything and logs why. Start the scheduler in each worker after the
  fork, or run it as its own process.
- A view whose conversation is erased while the run refreshes it (an LLM summarizer
  can wait minutes) ends there: one debug line, not an error, and the run goes on
  (`ViewMaintainer.sweep_refresh`, which `Memory.consolidate()`'s sweep shares).
- Erased text stays out of the process's caches as it does for a public call (the
  scheduler `Memory.make_scheduler` builds): a run first drops what other processes
  erased (`check`: `Memory._catch_erasures`, as `Memory.consolidate()`'s sweep does),
  and each view's refresh runs within `guard` (`Memory._erasures_during`): a refresh
  whose summarizer answered after the process dropped an erased conversation's copies
  (its own erasure, or another thread's check of another process's) counted and parsed
  that answer after the drop, and the memos it filled are dropped again before the run
  goes on. The summary itself is the store's to refuse (`put_summary`: the
  conversation is gone), and the warm views' Redis cache is written only for a stored
  version whose conversation still exists (`WarmStore._cache_set`).
- `shutdown(wait=True)` stops scheduling, lets the run in progress stop between two
  views, and waits for it.
- In-process runs compete with request threads for the GIL and the ColdStore lock:
  `evals.bench_warm` measures the effect on append latency. A heavy summarizer belongs
  in its own process.
- A refresh that raises is counted (`stats.errors`), kept in `last_failures` (the
  last run's, replaced whole by each run) and logged as one debug record with its
  traceback; the run says it in one WARNING line per failed run (`failure_causes`:
  each distinct cause once, a busy store in `tiers.files.storage_problem`'s words),
  its tracebacks only where the logger is enabled for debug (`tiermem --debug`).
  A one-shot caller that reports the failures itself (`tiermem consolidate`) passes
  `log_failures=False`. A refresh whose summarizer failed raises nothing (the view keeps
  its previous version, the failure is recorded and backed off, one WARNING line from
  the views): it is no error here, kept apart in `last_summarizer_failures` (the
  last run's), which a one-shot caller reports as a failure (`tiermem consolidate`
  exits 1; `Memory.consolidate()` lists it in `failures`). A refresh the whole store refused (SQLite busy past its
  timeout: the file's one write lock; read-only, full, failing, unreachable, closed)
  ends the run: every view after it would meet the same store, a busy one making each
  wait the whole busy timeout (50 views at the default 5 s: over four minutes) for
  nothing. A refusal that is one conversation's (`row_refused`: PostgreSQL's lock or
  statement timeout, serialization failure or deadlock, which another session's locks
  on that conversation's rows cause, a long import into it or its erasure) skips that
  conversation's other views for the run, and the run goes on with the next
  conversation's: one locked conversation, often the most behind and so first in every
  run, stopped every view's refresh until it was released. Such a view is not backed
  off (`view_failures`): the row's write checks the conversation under FOR SHARE, so
  while the lock lasts it would wait the lock timeout once more and fail, and a lock
  is contention, not a failing view (`ViewMaintainer.failing`); it heads the next run
  again and costs that run one lock wait while the lock lasts. A lock on a whole table
  (an erasure's or reclaim()'s VACUUM FULL: `table_refused`) ends the run after its one
  lock wait: every view after it would wait the same lock out (N views cost N lock
  waits before), so they are left to the next run. A lock timeout does not say what it
  waited for: one without a row's context ("while locking tuple ...": a second waiter
  queued on a row has none either) ends the run only when the store finds one of its
  tables so locked (`PostgresStore.locked_table`).
- A run's views left untried (the rest of a locked conversation's, those after a
  refusal that ended the run, those after shutdown) are in `last_skipped`, each with why
  (`SkippedView`). `sweep` is the loop, which `Memory.consolidate()`'s sweep shares: it
  keeps going past a refusal the same way, and raises what is not the store being busy.
- `stats.lag_turns` / `lag_seconds` are the largest lag over every namespace: they are
  the operator's figures (`/metrics`, `tiermem stats`). A tenant's view of the lag is
  `lag(owns)`, over the views of the conversations `owns` accepts only, so one
  namespace's figures never reflect another's writes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    EVENT_JOB_SUBMITTED,
    JobEvent,
    JobSubmissionEvent,
)
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from tiermem.consolidation.views import Swept, ViewKey, ViewMaintainer
from tiermem.tiers.files import BUSY_SQLSTATES, storage_problem

log = logging.getLogger("tiermem.scheduler")
# APScheduler's own log lines (started, added, store errors) for this scheduler: its
# per-tick "maximum number of running instances reached" is left out (OneLinePerOverrun),
# the run that overran is said once by the scheduler instead (`_overran`)
APSCHEDULER_LOG = logging.getLogger("tiermem.scheduler.apscheduler")
MAX_INSTANCES_TEXT = "maximum number of running instances reached"  # in APScheduler's message


class OneLinePerOverrun(logging.Filter):
    """Drops APScheduler's warning for each tick skipped because the run is still going."""

    def filter(self, record: logging.LogRecord) -> bool:
        return MAX_INSTANCES_TEXT not in str(record.msg)


APSCHEDULER_LOG.addFilter(OneLinePerOverrun())

JOB_ID = "tiermem-consolidation"
LOCK_TIMEOUT_SQLSTATE = "55P03"  # lock_not_available: PostgreSQL's lock_timeout (or NOWAIT)
# Where a PostgreSQL lock wait on a row was, in the error's context: "while locking tuple
# (0,2) in relation ...", "while updating tuple", "while inserting index tuple", "while
# locking updated version (0,3) of tuple in relation ..." (the server's XactLockTableWait).
# A wait for a table's own lock has none, and neither has a second waiter queued on a row
# (its wait is for the row's tuple lock), so its absence alone does not make a table's.
ROW_WAIT_CONTEXT = re.compile(r"\btuple\b[^\n]* in relation ")

# Why a sweep left a picked view untried (`SkippedView.reason`)
SKIP_ROW_LOCKED = "its conversation's rows were locked by another session past the lock wait"
SKIP_TABLE_LOCKED = "a table of the store was locked whole by another session (an erasure's VACUUM FULL)"
SKIP_STORE_REFUSED = "the store refused an earlier refresh of this sweep"
SKIP_STOPPED = "the scheduler was shut down"
# another process's refresh of the view holds its lease, the view still behind (Swept.HELD)
SKIP_HELD = "held by another refresher"


@dataclass
class SchedulerStats:
    runs: int = 0
    refreshed_total: int = 0
    last_run_at: float | None = None  # by the scheduler's clock
    last_duration_s: float | None = None
    last_selected: int = 0  # views over budget picked by the last run
    last_refreshed: int = 0  # of those, how many got a new version
    saturated: bool = False  # the last run hit max_views_per_run (more may be waiting)
    lag_turns: int = 0  # most turns behind among the views the last run found over budget
    lag_seconds: float = 0.0  # most seconds behind among them
    schedule_lag_s: float | None = None  # how late the last job started vs its scheduled time
    missed: int = 0  # runs skipped past misfire_grace_time
    overlapped: int = 0  # runs skipped because one was still running (max_instances=1)
    errors: int = 0  # view refreshes that raised (summarizer failures are not errors)
    last_failed: int = 0  # of the last run's views, how many raised (`last_failures`)
    refused_forked: int = 0  # runs refused in a process forked after start()
    held_back: int = 0  # views over budget the last run left alone: their refresh failed, backoff not over


@dataclass(frozen=True)
class RefreshFailure:
    """A view refresh of a run that raised: the view, and what it raised."""

    conversation: str
    kind: str
    key: str
    error: Exception


@dataclass(frozen=True)
class SkippedView:
    """A view a sweep picked and left untried (the next sweep picks it again): why
    (SKIP_*), and the one-line cause (`failure_cause`) of the refusal that made it so
    (empty after a shutdown)."""

    conversation: str
    kind: str
    key: str
    reason: str
    cause: str


@dataclass(frozen=True)
class SweepResult:
    """What one sweep (`sweep`) did with the views it was given (`picked`): how many
    refreshes ended in a new version, with the view found current or left as it was
    (`unchanged`: another stored it meanwhile) and at an erasure (`erased`); the refreshes
    that raised (`failures`: a busy store's refusals, and in a scheduler's run anything
    else too), those whose summarizer failed (`summarizer_failures`: recorded and backed
    off, the previous version kept; the cause is `ViewMaintainer.take_failure`'s) and the
    views not tried (`skipped`, each with why: SKIP_HELD for a view whose lease another
    process holds while it is still behind)."""

    picked: int = 0
    refreshed: int = 0
    unchanged: int = 0
    erased: int = 0
    failures: tuple[RefreshFailure, ...] = ()
    skipped: tuple[SkippedView, ...] = ()
    summarizer_failures: tuple[RefreshFailure, ...] = ()


class Consolidated(int):
    """What `Memory.consolidate()` answers: an int, how many views were refreshed (a new
    version, or found current; the erased not counted), as it always was, and what the
    sweep could not do, as a scheduler run keeps it (`last_failures`, `last_skipped`):

    - `failures`: the refreshes a busy store refused and those whose summarizer failed
      (the view keeps its previous version; the failure is recorded and backed off)
      (`RefreshFailure`: the view and the exception, its traceback dropped;
      `failure_cause` says it in one line);
    - `skipped`: the views picked and not tried, each with why (`SkippedView`), and
      those left to another process's refresh holding their lease while they are
      still behind (SKIP_HELD: not refreshed, so not counted);
    - `refused`: the busy store's refusal that kept the sweep from picking any view (its
      first step, reading what others erased and the views over budget), else None;
    - `picked`: how many views the sweep picked; `complete`: nothing failed or was
      skipped."""

    picked: int
    failures: tuple[RefreshFailure, ...]
    skipped: tuple[SkippedView, ...]
    refused: Exception | None

    def __new__(cls, done: int, *, picked: int = 0, failures: tuple[RefreshFailure, ...] = (),
                skipped: tuple[SkippedView, ...] = (), refused: Exception | None = None) -> Consolidated:
        self = super().__new__(cls, done)
        self.picked, self.failures, self.skipped, self.refused = picked, failures, skipped, refused
        return self

    @property
    def complete(self) -> bool:
        return not self.failures and not self.skipped and self.refused is None

    def __repr__(self) -> str:
        return (f"Consolidated({int(self)}, picked={self.picked}, failures={len(self.failures)}, "
                f"skipped={len(self.skipped)}, refused={self.refused!r})")


def failure_cause(exc: BaseException) -> str:
    """One line saying why a refresh failed: the storage's problem in
    `storage_problem`'s words (what `tiermem append` says of the same store) with the
    driver's message, else the exception's type and message."""
    text = " ".join(str(exc).split())
    problem = storage_problem(exc)
    if problem is not None:
        return f"{problem.detail} ({text})" if text else problem.detail
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def row_refused(exc: BaseException) -> bool:
    """Whether `exc` is the store refusing one conversation rather than every one: a
    busy refusal (`storage_problem`) from PostgreSQL (a lock or statement timeout, a
    serialization failure, a deadlock: BUSY_SQLSTATES), whose locks are its rows', so
    another conversation's refresh does not meet them. SQLite's busy is its file's one
    write lock, and every other storage problem is the whole store's: not this."""
    problem = storage_problem(exc)
    if problem is None or not problem.busy:
        return False
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if getattr(e, "sqlstate", None) in BUSY_SQLSTATES:
            return True
        e = e.__cause__ or e.__context__
    return False


def _postgres_errors(exc: BaseException) -> list[BaseException]:
    """`exc` and what it was raised from that carry a PostgreSQL SQLSTATE."""
    out: list[BaseException] = []
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if getattr(e, "sqlstate", None) is not None:
            out.append(e)
        e = e.__cause__ or e.__context__
    return out


def table_refused(exc: BaseException, locked_table: Callable[[], str | None] | None) -> str | None:
    """The table whose lock made `exc` (a `row_refused` refusal) wait out the lock
    timeout, when a table's lock did: a lock timeout without a row's context
    (ROW_WAIT_CONTEXT) while the store finds one of its tables locked whole by another
    session (`locked_table`: `PostgresStore.locked_table`; None where the store has no
    such locks, SQLite's being its file's). None: one conversation's rows, as before.
    A `locked_table` that fails answers None (logged): the sweep goes on as for a row."""
    if locked_table is None or not row_refused(exc):
        return None
    timeouts = [e for e in _postgres_errors(exc) if getattr(e, "sqlstate", None) == LOCK_TIMEOUT_SQLSTATE]
    if not timeouts:
        return None  # a statement timeout, a serialization failure, a deadlock: a row's
    for e in timeouts:
        context = getattr(getattr(e, "diag", None), "context", None) or ""
        if ROW_WAIT_CONTEXT.search(context):
            return None  # the server says it waited on a row
    try:
        return locked_table()
    except Exception as probe:  # the store too busy to ask: treat it as a row's, as before
        log.debug("which table is locked: %s", failure_cause(probe))
        return None


def sweep(maintainer: ViewMaintainer, picked: Sequence[ViewKey], *,
          guard: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext,
          stopping: Callable[[], bool] = lambda: False, raise_unless_busy: bool = False) -> SweepResult:
    """Refresh each of `picked` in order (`ViewMaintainer.sweep_refresh`, within
    `guard`), going on past what the store refuses (module docstring): a refusal that is
    one conversation's (`row_refused`) skips that conversation's other views; one that
    is a whole table's (`table_refused`) or the whole store's (any other
    `storage_problem`: SQLite's busy write lock, read-only, full, unreachable) ends the
    sweep, its remaining views skipped. Anything else that a refresh raises is recorded
    and the sweep goes on, or with `raise_unless_busy` (`Memory.consolidate()`) raised
    at once unless it is the store being busy (`storage_problem(...).busy`): the views
    refreshed before it stay refreshed. `stopping` is asked before each view."""
    locked_table: Callable[[], str | None] | None = getattr(maintainer.cold, "locked_table", None)
    counts = {outcome: 0 for outcome in Swept}
    failures: list[RefreshFailure] = []
    summarizer_failed: list[RefreshFailure] = []
    skipped: list[SkippedView] = []
    row_locked: dict[str, str] = {}  # conversation -> cause: its rows stay locked this sweep
    for i, (conv, kind, key) in enumerate(picked):
        if stopping():
            skipped.extend(SkippedView(c, k, v, SKIP_STOPPED, "") for c, k, v in picked[i:])
            break
        if conv in row_locked:
            # each of its views would wait the lock out again
            skipped.append(SkippedView(conv, kind, key, SKIP_ROW_LOCKED, row_locked[conv]))
            continue
        try:
            # a conversation erased since the sweep picked the view is no error
            with guard():
                outcome = maintainer.sweep_refresh(conv, kind, key)
                counts[outcome] += 1
                summarized = maintainer.take_failure()
                if outcome is Swept.FAILED and summarized is not None:
                    summarizer_failed.append(RefreshFailure(conv, kind, key, summarized))
                elif outcome is Swept.HELD:
                    # not refreshed here, and still behind: that holder's refresh (or,
                    # when it dies, the next sweep's) brings it up to date
                    skipped.append(SkippedView(conv, kind, key, SKIP_HELD, ""))
        except Exception as exc:
            problem = storage_problem(exc)
            if raise_unless_busy and (problem is None or not problem.busy):
                raise
            log.debug("refresh of %s/%s/%s failed", conv, kind, key, exc_info=True)
            cause = failure_cause(exc)
            failures.append(RefreshFailure(conv, kind, key, _without_frames(exc)))
            table = table_refused(exc, locked_table)
            if table is None and row_refused(exc):
                row_locked[conv] = cause  # that conversation's: the others' views go on
                continue
            if table is not None or problem is not None:
                # every view after it would meet the same lock or store: the next sweep's
                reason = SKIP_TABLE_LOCKED if table is not None else SKIP_STORE_REFUSED
                skipped.extend(SkippedView(c, k, v, SKIP_ROW_LOCKED if c in row_locked else reason,
                                           row_locked.get(c, cause)) for c, k, v in picked[i + 1:])
                break
    return SweepResult(picked=len(picked), refreshed=counts[Swept.NEW_VERSION], unchanged=counts[Swept.UNCHANGED],
                       erased=counts[Swept.ERASED], failures=tuple(failures), skipped=tuple(skipped),
                       summarizer_failures=tuple(summarizer_failed))


def _without_frames(exc: Exception) -> Exception:
    """`exc` and what it was raised from, their tracebacks dropped: `last_failures`
    outlives the run, and a traceback's frames would keep the refresh's locals (a
    conversation's text, which an erasure must leave nowhere) until the next run."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        e = e.__cause__ or e.__context__
    return exc


def failure_causes(failures: tuple[RefreshFailure, ...],
                   describe: Callable[[BaseException], str] = failure_cause) -> list[tuple[str, int]]:
    """(cause, how many views) for each distinct cause among `failures`, in the order
    first met: one line per cause, not one per view."""
    counts: dict[str, int] = {}
    for f in failures:
        cause = describe(f.error)
        counts[cause] = counts.get(cause, 0) + 1
    return list(counts.items())


class ConsolidationScheduler:
    """Refreshes over-budget warm views in the background (see module docstring)."""

    def __init__(
        self,
        maintainer: ViewMaintainer,
        *,
        interval_s: float,
        max_views_per_run: int,
        misfire_grace_s: float | None = None,
        clock: Callable[[], float] = time.time,
        check: Callable[[], object] | None = None,
        guard: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext,
    ) -> None:
        """`check`: called at the start of each run, `guard`: around each view's refresh
        (module docstring: erased text; a scheduler over a bare ViewMaintainer needs
        neither)."""
        if interval_s <= 0 or max_views_per_run < 1:
            raise ValueError("interval_s must be > 0 and max_views_per_run >= 1")
        self.maintainer = maintainer
        self.interval_s = float(interval_s)
        self.max_views_per_run = int(max_views_per_run)
        self.misfire_grace_s = misfire_grace_s if misfire_grace_s is not None else max(1.0, self.interval_s)
        self.clock = clock
        self.check = check
        self.guard = guard
        self.stats = SchedulerStats()
        self._scheduler: BackgroundScheduler | None = None
        self._pid: int | None = None
        self._stopping = threading.Event()
        self._run_lock = threading.Lock()
        # the run in progress: its number and monotonic start (for `_overran`), and the
        # number of the last run whose overrun was said (one line per run, not per tick)
        self._run_number = 0
        self._run_started: float | None = None
        self._overrun_said = 0
        # (conversation key, turns behind, seconds behind) of each view the last run found
        # over budget; replaced whole by each run, so a reader needs no lock
        self._lagging: tuple[tuple[str, int, float], ...] = ()
        # the last run's refreshes that raised; replaced whole by each run, as _lagging
        self.last_failures: tuple[RefreshFailure, ...] = ()
        # the last run's refreshes whose summarizer failed (no error: module docstring)
        self.last_summarizer_failures: tuple[RefreshFailure, ...] = ()
        # the last run's views left untried, and why; replaced whole by each run
        self.last_skipped: tuple[SkippedView, ...] = ()

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._scheduler is not None and self._scheduler.running and self._pid == os.getpid()

    def start(self, *, run_now: bool = False) -> None:
        """Start the background job in this process (after any fork, see module doc)."""
        if self._scheduler is not None:
            raise RuntimeError("scheduler already started")
        self._pid = os.getpid()
        self._stopping.clear()
        sched = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=1)},
            timezone=dt.UTC,
            daemon=True,
            logger=APSCHEDULER_LOG,
        )
        sched.add_listener(self._on_event,
                           EVENT_JOB_SUBMITTED | EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES | EVENT_JOB_ERROR)
        first = dt.datetime.now(dt.UTC) if run_now else None
        kwargs: dict[str, Any] = {"next_run_time": first} if first is not None else {}
        sched.add_job(
            self._job, "interval", seconds=self.interval_s, id=JOB_ID, name=JOB_ID,
            max_instances=1, coalesce=True, misfire_grace_time=max(1, round(self.misfire_grace_s)),
            replace_existing=True, **kwargs,
        )
        sched.start()
        self._scheduler = sched
        log.info("consolidation scheduler started (pid %d, every %.1f s, up to %d views per run)",
                 self._pid, self.interval_s, self.max_views_per_run)

    def shutdown(self, wait: bool = True) -> None:
        """Stop scheduling; the run in progress stops between views. With `wait`, block
        until it has. Safe to call twice, and in a forked child (where it only forgets
        the parent's scheduler)."""
        sched, self._scheduler = self._scheduler, None
        self._stopping.set()
        if sched is None:
            return
        forked = self._pid is not None and self._pid != os.getpid()
        try:
            sched.shutdown(wait=wait and not forked)
        except Exception as exc:  # SchedulerNotRunningError and the like: nothing to stop
            log.debug("scheduler shutdown: %s", exc)

    def __enter__(self) -> ConsolidationScheduler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(wait=True)

    # -- runs ----------------------------------------------------------------------------------

    def _on_event(self, event: JobEvent) -> None:
        if event.code == EVENT_JOB_SUBMITTED and isinstance(event, JobSubmissionEvent):
            times = event.scheduled_run_times
            if times:
                self.stats.schedule_lag_s = max(0.0, (dt.datetime.now(dt.UTC) - times[-1]).total_seconds())
        elif event.code == EVENT_JOB_MISSED:
            self.stats.missed += 1
        elif event.code == EVENT_JOB_MAX_INSTANCES:
            self.stats.overlapped += 1
            self._overran()
        elif event.code == EVENT_JOB_ERROR:
            self.stats.errors += 1

    def _overran(self) -> None:
        """A tick found the run still going: say so once for that run (the ticks it
        outlasts are counted in `overlapped`), with how long it has run and the interval."""
        run, started = self._run_number, self._run_started
        if started is None or run == self._overrun_said:
            return
        self._overrun_said = run
        log.warning("consolidation run skipped: the previous run is still going (running for %.1f s, interval "
                    "%g s); the next starts at the first interval after it ends", time.monotonic() - started,
                    self.interval_s)

    def _job(self) -> None:
        try:
            self.run_once()
        except Exception as exc:  # never let one bad run kill the schedule
            self.stats.errors += 1
            # one line per failed run; the traceback only where debug is wanted (a
            # store busy for an hour would otherwise log one per interval)
            log.warning("consolidation run failed: %s", failure_cause(exc), exc_info=log.isEnabledFor(logging.DEBUG))

    def run_once(self, *, log_failures: bool = True) -> int:
        """Refresh up to `max_views_per_run` views that are over budget; returns how
        many got a new version. The refreshes that raised are in `last_failures` and,
        with `log_failures`, said in one WARNING line (module docstring). Refuses
        (returns 0) in a process forked after start(), and when another run of this
        scheduler is in progress."""
        if self._pid is not None and os.getpid() != self._pid:
            self.stats.refused_forked += 1
            log.warning("consolidation run refused: this process (pid %d) was forked after the scheduler "
                        "started in pid %d; start the scheduler after fork", os.getpid(), self._pid)
            return 0
        if not self._run_lock.acquire(blocking=False):
            self.stats.overlapped += 1
            return 0
        try:
            self._run_number += 1
            self._run_started = time.monotonic()
            refreshed = self._run()
        finally:
            self._run_started = None
            self._run_lock.release()
        if log_failures and self.last_failures:
            log.warning("consolidation run: %s", self.failures_line())
        return refreshed

    def failures_line(self) -> str:
        """The last run's failed refreshes in one line: how many, how many of the views
        it picked were refreshed, and each distinct cause once."""
        failed, s = self.last_failures, self.stats
        causes = "; ".join(cause if n == len(failed) else f"{cause} [{n} view(s)]"
                           for cause, n in failure_causes(failed))
        return (f"{len(failed)} view refresh(es) failed, {s.last_refreshed} of {s.last_selected} "
                f"refreshed: {causes}")

    def _run(self) -> int:
        t0 = time.perf_counter()
        self.stats.last_run_at = self.clock()
        # a run that raises before its views leaves none of the last run's
        self.last_failures, self.last_skipped, self.last_summarizer_failures = (), (), ()
        if self.check is not None:
            self.check()
        m = self.maintainer
        held = m.held_back()
        # the failing views still count in the lag (they are behind), but take no place
        # from the views this run can refresh
        over = m.stale_views_detailed(self.max_views_per_run + len(held))
        detailed = [(k, st) for k, st in over if k not in held][:self.max_views_per_run]
        done = sweep(m, [k for k, _st in detailed], guard=self.guard, stopping=self._stopping.is_set)
        refreshed, failures = done.refreshed, done.failures
        self.stats.errors += len(failures)
        self.last_failures, self.last_skipped = failures, done.skipped
        self.last_summarizer_failures = done.summarizer_failures
        s = self.stats
        s.last_failed = len(failures)
        s.runs += 1
        s.refreshed_total += refreshed
        s.last_selected = len(detailed)
        s.last_refreshed = refreshed
        s.saturated = len(detailed) >= self.max_views_per_run
        s.held_back = sum(1 for k, _st in over if k in held)
        lagging = [*detailed, *((k, st) for k, st in over if k in held)]
        self._lagging = tuple((conv, st.turns_behind, st.seconds_behind) for (conv, _k, _key), st in lagging)
        s.lag_turns, s.lag_seconds = self.lag()
        s.last_duration_s = time.perf_counter() - t0
        return refreshed

    def lag(self, owns: Callable[[str], bool] | None = None) -> tuple[int, float]:
        """(turns, seconds): the largest lag among the views the last run found over
        budget whose conversation key `owns` accepts (None: every view, the figure of
        `stats`). `owns` is asked once per conversation; (0, 0.0) when none is lagging."""
        lagging = self._lagging
        if owns is not None:
            mine = {conv: owns(conv) for conv in {conv for conv, _t, _s in lagging}}
            lagging = tuple(v for v in lagging if mine[v[0]])
        return max((t for _c, t, _s in lagging), default=0), max((sec for _c, _t, sec in lagging), default=0.0)

    def snapshot(self) -> dict[str, Any]:
        """The stats as a plain dict (for `stats()` and the HTTP service)."""
        d = asdict(self.stats)
        d.update(running=self.running, interval_s=self.interval_s, max_views_per_run=self.max_views_per_run,
                 pid=self._pid)
        return d
