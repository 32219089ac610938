"""What the pin reads cost when a conversation is huge.

    python -m tiermem.evals.bench_pin_candidates [--data DIR] [--turns 20000,60000] [--calls 30] [--json]

A SQLite store holds one conversation of N imported turns, all embedded, about half of
them load-bearing (evals.huge_store, the layout of bench_turncache_load and
bench_pending_seek, unit vectors), and another tenant's 30-turn one; `--data` takes an existing data dir of that
layout instead (copied first: the original is never written). On the huge conversation,
in one process against the same store, two sides alternate call by call:

- `sort`: the reads before m023, through turns_load_bearing (by position): every
  unsuperseded load-bearing turn of the conversation read and sorted by priority for
  `pin_candidates` (USE TEMP B-TREE FOR ORDER BY), every load-bearing turn tested for
  `superseded_pins` (the plans the shipped statements had; set through
  `ColdStore._PIN_CANDIDATES_INDEX` / `_SUPERSEDED_PINS_INDEX`);
- `index`: the shipped reads, through turns_pin_candidates and turns_superseded_pins.

Timed per side (median and p99 of `--calls` calls, ms): the reads alone, as their
callers ask (the planner's pinned block: `pin_candidates(min_priority=70, limit=51)` and
`superseded_pins(limit=50)`; supersession's: `pin_candidates(min_priority=0, limit=64)`);
a whole `Memory.append` of a correction (its supersession reads the candidates inline);
`context()` right after it (the correction is load-bearing: the pin version moved, the
planner's kept pin set is stale and both reads run); and `context()` after an assistant
turn (the version did not move: the kept set serves, no pin read). The load averages
are printed before and after: the machine is shared.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from tiermem.consolidation.supersede import MAX_PIN_CANDIDATES
from tiermem.evals import huge_store
from tiermem.evals.baselines import timed
from tiermem.evals.bench import load_average
from tiermem.evals.huge_store import HUGE, data_dir, opened, print_sides, sides_out, sql_rows
from tiermem.planner.candidates import AUTO_PIN_MIN_PRIORITY, PLAN_LEFT_OUT_PER_SLICE
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message

SIDES = ("sort", "index")
OLD_INDEX = "turns_load_bearing"  # what both reads walked before m023
# a user turn with a correction cue: load-bearing (priority 90), and supersession embeds
# it inline and reads the pin candidates (Memory.append)
CORRECTION = "Actually, my router is the model R{i} now."
FILLER = "noted, thanks ({i})"
QUERY = "which router do I have?"
PLANNER_LIMIT = PLAN_LEFT_OUT_PER_SLICE + 1  # pin_set's read at the default budget's room


def _plans(cold: ColdStore, key: str) -> list[str]:
    """The pin_candidates load-bearing read's plan, then superseded_pins'."""
    out = []
    for index, where in ((cold._PIN_CANDIDATES_INDEX, cold._PIN_CANDIDATES_WHERE),
                         (cold._SUPERSEDED_PINS_INDEX, cold._SUPERSEDED_PINS_WHERE)):
        sql = cold._turns_through(index) + where  # the shipped statement's text
        out.append("; ".join(str(r[-1]) for r in sql_rows(cold, "EXPLAIN QUERY PLAN " + sql, (key, 0, 1))))
    return out


CALL_NAMES = ("planner_reads", "supersede_read", "append", "context_after_correction", "context_after_filler")


def measure(data: Path, calls: int) -> dict[str, Any]:
    saved = (ColdStore._PIN_CANDIDATES_INDEX, ColdStore._SUPERSEDED_PINS_INDEX)
    load_before = load_average()
    times: dict[str, dict[str, list[float]]] = {s: {n: [] for n in CALL_NAMES} for s in SIDES}
    try:
        with opened(data) as (mem, cold, key):
            indexes = {"sort": (OLD_INDEX, OLD_INDEX), "index": saved}
            plans: dict[str, list[str]] = {}
            turns = cold.last_position(key) + 1
            bearing = sql_rows(cold, "SELECT COUNT(*) FROM turns WHERE conversation_id = ? AND load_bearing = 1 "
                               "AND superseded_by IS NULL", (key,))[0][0]

            def planner_reads() -> object:
                return (cold.pin_candidates(key, min_priority=AUTO_PIN_MIN_PRIORITY, limit=PLANNER_LIMIT),
                        cold.superseded_pins(key, min_priority=AUTO_PIN_MIN_PRIORITY, limit=PLAN_LEFT_OUT_PER_SLICE))

            def context() -> object:
                return mem.context(HUGE[1], QUERY, namespace=HUGE[0])

            # untimed: the first calls load what every later one reuses (the labeler's
            # rules, the turn cache of the conversation)
            mem.append(HUGE[1], {"role": "user", "content": CORRECTION.format(i=-1)}, namespace=HUGE[0])
            context()
            for i in range(calls):
                # untimed: both sides answer the same on the store as it is now
                answers = []
                for side in SIDES:
                    ColdStore._PIN_CANDIDATES_INDEX, ColdStore._SUPERSEDED_PINS_INDEX = indexes[side]
                    answers.append((planner_reads(), cold.pin_candidates(key, min_priority=0,
                                                                         limit=MAX_PIN_CANDIDATES)))
                assert answers[0] == answers[1], "the two sides answered differently"
                for side in (SIDES if i % 2 == 0 else SIDES[::-1]):
                    ColdStore._PIN_CANDIDATES_INDEX, ColdStore._SUPERSEDED_PINS_INDEX = indexes[side]
                    plans.setdefault(side, _plans(cold, key))
                    t = times[side]
                    t["planner_reads"].append(timed(planner_reads)[1])
                    t["supersede_read"].append(timed(functools.partial(
                        cold.pin_candidates, key, min_priority=0, limit=MAX_PIN_CANDIDATES))[1])
                    version = cold.pin_version(key)
                    msg = {"role": "user", "content": CORRECTION.format(i=f"{side}{i}")}
                    t["append"].append(timed(functools.partial(mem.append, HUGE[1], msg, namespace=HUGE[0]))[1])
                    assert cold.pin_version(key) != version, "the correction did not move the pin version"
                    t["context_after_correction"].append(timed(context)[1])
                    version = cold.pin_version(key)
                    cold.append(HUGE[1], Message(role="assistant", content=FILLER.format(i=i)), namespace=HUGE[0])
                    assert cold.pin_version(key) == version, "an assistant turn moved the pin version"
                    t["context_after_filler"].append(timed(context)[1])
    finally:
        ColdStore._PIN_CANDIDATES_INDEX, ColdStore._SUPERSEDED_PINS_INDEX = saved
    out: dict[str, Any] = {"turns": turns, "load_bearing_unsuperseded": bearing, "calls": calls,
                           "load_before": load_before, "load_after": load_average(),
                           "plans": plans, "answers_identical": True}
    out.update(sides_out(times, SIDES))
    return out


def run(turns: int | None, source: Path | None, calls: int) -> dict[str, Any]:
    with data_dir(turns, source, "tiermem-bench-pins-") as data:
        return measure(data, calls)


def print_row(r: dict[str, Any]) -> None:
    print(f"{r['turns']:,} turns ({r['load_bearing_unsuperseded']:,} load-bearing, not superseded), "
          f"{r['calls']} calls a side; load {r['load_before']} -> {r['load_after']}")
    print_sides(r, SIDES, CALL_NAMES)


def main(argv: list[str] | None = None) -> int:
    return huge_store.main(argv, __doc__, run, print_row)


if __name__ == "__main__":
    raise SystemExit(main())
