"""What a session view's freshness check costs in a conversation of many sessions.

    python -m tiermem.evals.bench_session_fresh [--data DIR] [--turns 20000,60000] [--calls 30] [--json]

A SQLite store holds one conversation of N imported turns in N / TURNS_PER_SESSION
sessions, one after another, and another tenant's 30-turn one (evals.huge_store with
sessions); `--data` takes an existing data dir of that layout instead (copied first: the
original is never written; its huge conversation must have sessions). Every session gets
a view covering its turns (written as a summarizer's would be, `WarmStore.put`; no
summarizer runs). Two copies of that store are opened in one process and alternate call
by call:

- `walk`: the store before m026 (its turns_by_session index dropped): a session's reads
  walk the primary key (conversation_id, position) from the view's end to the end of the
  log, testing each turn's session_id;
- `seek`: the shipped store: the same statements seek turns_by_session to the session's
  turns after the view's end.

Timed per side (median and p99 of `--calls` calls, ms):

- `staleness_oldest`: `ViewMaintainer.staleness` of the oldest session's view (the first
  session panel of the inspector's first page; every later turn of the log follows it),
- `staleness_middle`: the same for the session in the middle of the log,
- `refresh_covered`: `ViewMaintainer.refresh` of the oldest session's view, which covers
  its session (the sweep's and `consolidate`'s check that nothing is new; no summarizer),
- `views_page`: the inspector's first views page (`view_panels`: the rolling and
  constraints views and 48 session views, each with its lag),
- `append_1` and `append_batch`: the write cost of the index, one turn and
  IMPORT_BATCH_TURNS turns with a session each (every turn an index entry: the partial
  index's worst case) appended to a third conversation of the store (so the huge
  conversation's reads stay what they were).

The load averages are printed before and after: the machine is shared.
"""

from __future__ import annotations

import functools
import shutil
import time
from pathlib import Path
from typing import Any

from tiermem.evals import huge_store
from tiermem.evals.baselines import timed
from tiermem.evals.bench import load_average
from tiermem.evals.huge_store import HUGE, data_dir, opened, print_sides, sides_out, sql_rows
from tiermem.evals.retention import IMPORT_BATCH_TURNS
from tiermem.inspector.data import view_panels
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import MAX_POSITION, Message
from tiermem.tiers.schema import SESSION_TURNS_INDEX
from tiermem.tiers.warm import Sentence, SummaryView

SIDES = ("walk", "seek")
TURNS_PER_SESSION = 10  # 20,000 turns: 2,000 sessions
CALLS = ("staleness_oldest", "staleness_middle", "refresh_covered", "views_page", "append_1", "append_batch")
INGEST = ("bench", "ingest")  # (namespace, name) of the conversation the appends write
# the statement a session's freshness check sends (tiers.dialect.SharedQueries.turn_times)
_SESSION_TIMES_SQL = ("SELECT position, tokens, created_at, priority, superseded_by, session_id FROM turns "
                      "WHERE conversation_id = ? AND position > ? AND position <= ? AND session_id = ? "
                      "ORDER BY position")


def _sessions(cold: ColdStore, key: str) -> list[tuple[str, int, int]]:
    """(session id, first position, last position) of the huge conversation's sessions, by id."""
    return [(str(r[0]), int(r[1]), int(r[2])) for r in sql_rows(
        cold, "SELECT session_id, MIN(position), MAX(position) FROM turns WHERE conversation_id = ? "
              "AND session_id IS NOT NULL GROUP BY session_id ORDER BY session_id", (key,))]


def _write_views(data: Path) -> None:
    """A view per session of the huge conversation, covering the session's turns."""
    with opened(data) as (mem, cold, key):
        sessions = _sessions(cold, key)
        if not sessions:
            raise SystemExit(f"{data}: the conversation {HUGE[1]!r} has no sessions to measure")
        if mem.warm.session_ends(key):
            return  # a copy of a data dir measured before: its views are there
        now = time.time()
        for sid, first, last in sessions:
            mem.warm.put(SummaryView(key, "session", sid, 0, first, last,
                                     (Sentence(f"session {sid} in brief", (first,)),), 0, "extractive", now))


def _drop_index(cold: ColdStore) -> None:
    """The store as it was before m026: the same rows, without turns_by_session."""
    with cold.transaction() as c:
        c.execute(f"DROP INDEX {SESSION_TURNS_INDEX}")


def _plan(cold: ColdStore, key: str, sid: str, after: int) -> list[str]:
    return [str(r[-1]) for r in sql_rows(cold, "EXPLAIN QUERY PLAN " + _SESSION_TIMES_SQL,
                                         (key, after, MAX_POSITION, sid))]


def measure(data: Path, calls: int) -> dict[str, Any]:
    _write_views(data)
    root = data.parent
    for side in SIDES:
        shutil.copytree(data, root / side)
    load_before = load_average()
    times: dict[str, dict[str, list[float]]] = {s: {c: [] for c in CALLS} for s in SIDES}
    plans: dict[str, list[str]] = {}
    with opened(root / "walk") as walk, opened(root / "seek") as seek:
        _drop_index(walk[1])
        sides = {"walk": walk, "seek": seek}
        sessions = _sessions(walk[1], walk[2])
        oldest, middle = sessions[0], sessions[len(sessions) // 2]
        turns = walk[1].last_position(walk[2]) + 1
        for side, (mem, cold, key) in sides.items():
            plans[side] = _plan(cold, key, oldest[0], oldest[2])
            # untimed: each side's first reads warm its page cache and the inspector's imports
            view_panels(mem, *HUGE)
        for i in range(calls):
            for side in (SIDES if i % 2 == 0 else SIDES[::-1]):
                mem, cold, key = sides[side]
                t = times[side]
                t["staleness_oldest"].append(timed(functools.partial(mem.views.staleness, key, "session", oldest[0]))[1])
                t["staleness_middle"].append(timed(functools.partial(mem.views.staleness, key, "session", middle[0]))[1])
                t["refresh_covered"].append(timed(functools.partial(mem.views.refresh, key, "session", oldest[0]))[1])
                t["views_page"].append(timed(functools.partial(view_panels, mem, *HUGE))[1])
                one = Message(role="user", content=f"one more turn {i}", session_id=f"one-{i}")
                t["append_1"].append(timed(functools.partial(cold.append, INGEST[1], one, namespace=INGEST[0]))[1])
                batch = [Message(role="user", content=f"imported turn {i}.{j}", session_id=f"batch-{i}-{j // TURNS_PER_SESSION}")
                         for j in range(IMPORT_BATCH_TURNS)]
                t["append_batch"].append(timed(functools.partial(cold.append_many, INGEST[1], batch,
                                                                 namespace=INGEST[0]))[1])
        # the answers are the same on both sides: each measured session's turns from the
        # start and after its view, and its view's lag
        for sid, first, last in (oldest, middle, sessions[-1]):
            for after in (-1, first, last):
                got = {s: sides[s][1].turn_times(sides[s][2], after, session_id=sid) for s in SIDES}
                assert got["walk"] == got["seek"], (sid, after)
            lag = {s: sides[s][0].views.staleness(sides[s][2], "session", sid).turns_behind for s in SIDES}
            assert lag["walk"] == lag["seek"], (sid, lag)
    out: dict[str, Any] = {"turns": turns, "sessions": len(sessions), "calls": calls, "load_before": load_before,
                           "load_after": load_average(), "plans": plans}
    out.update(sides_out(times, SIDES))
    out["append_batch_turns"] = IMPORT_BATCH_TURNS
    return out


def run(turns: int | None, source: Path | None, calls: int) -> dict[str, Any]:
    sessions = turns // TURNS_PER_SESSION if turns is not None else 0
    with data_dir(turns, source, "tiermem-bench-session-fresh-", sessions=sessions) as data:
        return measure(data, calls)


def print_row(r: dict[str, Any]) -> None:
    print(f"{r['turns']:,} turns in {r['sessions']:,} sessions, {r['calls']} calls a side; "
          f"load {r['load_before']} -> {r['load_after']}")
    print_sides(r, SIDES, list(CALLS))
    print(f"(append_batch: {r['append_batch_turns']} turns, each in a session)")


def main(argv: list[str] | None = None) -> int:
    return huge_store.main(argv, __doc__, run, print_row)


if __name__ == "__main__":
    raise SystemExit(main())
