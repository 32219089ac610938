"""What the pin reads cost when a conversation is huge.

    python -m tiermem.evals.bench_pin_candidates [--data DIR] [--turns 20000,60000] [--calls 30] [--json]

A SQLite store holds one conversation of N imported turns, all embedded, about half of
them load-bearing (the layout of bench_turncache_load and bench_pending_seek, unit
vectors), and another tenant's 30-turn one; `--data` takes an existing data dir of that
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

import argparse
import functools
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tiermem import Config, Memory
from tiermem.consolidation.supersede import MAX_PIN_CANDIDATES
from tiermem.evals.retention import IMPORT_BATCH_TURNS, UnitEmbedder, _imported
from tiermem.planner.candidates import AUTO_PIN_MIN_PRIORITY, PLAN_LEFT_OUT_PER_SLICE
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message

HUGE = ("big", "long")  # (namespace, name) of the huge conversation
OTHER = ("other", "mine")
OTHER_TURNS = 30
SIDES = ("sort", "index")
OLD_INDEX = "turns_load_bearing"  # what both reads walked before m023
P99 = 0.99
# a user turn with a correction cue: load-bearing (priority 90), and supersession embeds
# it inline and reads the pin candidates (Memory.append)
CORRECTION = "Actually, my router is the model R{i} now."
FILLER = "noted, thanks ({i})"
QUERY = "which router do I have?"
PLANNER_LIMIT = PLAN_LEFT_OUT_PER_SLICE + 1  # pin_set's read at the default budget's room


def build(data: Path, turns: int) -> None:
    with Memory(Config(data_dir=data), embedder=UnitEmbedder(), hot=False, background_indexing=False) as mem:
        mem.append_many(OTHER[1], [{"role": "user", "content": f"turn {i} about my printer"}
                                   for i in range(OTHER_TURNS)], namespace=OTHER[0])
        msgs = _imported(0, turns)
        for i in range(0, turns, IMPORT_BATCH_TURNS):
            mem.append_many(HUGE[1], msgs[i:i + IMPORT_BATCH_TURNS], namespace=HUGE[0])
        mem.catch_up()


def _plans(cold: ColdStore, key: str) -> list[str]:
    """The pin_candidates load-bearing read's plan, then superseded_pins'."""
    sel = cold._TURN_SELECT
    out = []
    for index, where in ((cold._PIN_CANDIDATES_INDEX, "t.superseded_by IS NULL AND p.priority IS NULL "
                          "ORDER BY t.priority DESC, t.position DESC"),
                         (cold._SUPERSEDED_PINS_INDEX, "t.superseded_by IS NOT NULL AND p.priority IS NULL "
                          "ORDER BY t.position DESC")):
        sql = (sel.replace("FROM turns t ", f"FROM turns t INDEXED BY {index} ")
               + f"WHERE t.conversation_id = ? AND t.load_bearing = 1 AND t.priority >= ? AND {where} LIMIT ?")
        out.append("; ".join(str(r[-1]) for r in cold._read("EXPLAIN QUERY PLAN " + sql, (key, 0, 1))))
    return out


def _timed(call: Callable[[], object]) -> float:
    t = time.perf_counter()
    call()
    return (time.perf_counter() - t) * 1000


def _summary(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {"p50_ms": round(statistics.median(ordered), 3),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(P99 * len(ordered)))], 3)}


CALL_NAMES = ("planner_reads", "supersede_read", "append", "context_after_correction", "context_after_filler")


def measure(data: Path, calls: int) -> dict[str, Any]:
    saved = (ColdStore._PIN_CANDIDATES_INDEX, ColdStore._SUPERSEDED_PINS_INDEX)
    load_before = [round(x, 2) for x in os.getloadavg()]
    times: dict[str, dict[str, list[float]]] = {s: {n: [] for n in CALL_NAMES} for s in SIDES}
    try:
        with Memory(Config(data_dir=data), embedder=UnitEmbedder(), hot=False, background_indexing=False) as mem:
            cold = mem.cold
            assert isinstance(cold, ColdStore), "a SQLite store"
            key = cold.key_of(*HUGE)
            assert key is not None, f"no conversation {HUGE[1]!r} in namespace {HUGE[0]!r}"
            indexes = {"sort": (OLD_INDEX, OLD_INDEX), "index": saved}
            plans: dict[str, list[str]] = {}
            turns = cold.last_position(key) + 1
            bearing = cold._read("SELECT COUNT(*) FROM turns WHERE conversation_id = ? AND load_bearing = 1 "
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
                    t["planner_reads"].append(_timed(planner_reads))
                    t["supersede_read"].append(_timed(functools.partial(
                        cold.pin_candidates, key, min_priority=0, limit=MAX_PIN_CANDIDATES)))
                    version = cold.pin_version(key)
                    msg = {"role": "user", "content": CORRECTION.format(i=f"{side}{i}")}
                    t["append"].append(_timed(functools.partial(mem.append, HUGE[1], msg, namespace=HUGE[0])))
                    assert cold.pin_version(key) != version, "the correction did not move the pin version"
                    t["context_after_correction"].append(_timed(context))
                    version = cold.pin_version(key)
                    cold.append(HUGE[1], Message(role="assistant", content=FILLER.format(i=i)), namespace=HUGE[0])
                    assert cold.pin_version(key) == version, "an assistant turn moved the pin version"
                    t["context_after_filler"].append(_timed(context))
    finally:
        ColdStore._PIN_CANDIDATES_INDEX, ColdStore._SUPERSEDED_PINS_INDEX = saved
    out: dict[str, Any] = {"turns": turns, "load_bearing_unsuperseded": bearing, "calls": calls,
                           "load_before": load_before, "load_after": [round(x, 2) for x in os.getloadavg()],
                           "plans": plans, "answers_identical": True}
    for side in SIDES:
        out[side] = {name: _summary(ms) for name, ms in times[side].items()}
    out["ratio_p50"] = {name: round(out["sort"][name]["p50_ms"] / max(out["index"][name]["p50_ms"], 1e-9), 1)
                        for name in CALL_NAMES}
    return out


def run(turns: int | None, source: Path | None, calls: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="tiermem-bench-pins-"))
    try:
        if source is not None:
            shutil.copytree(source, tmp / "data")  # the original is never written
        else:
            assert turns is not None
            build(tmp / "data", turns)
        return measure(tmp / "data", calls)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--turns", default="20000,60000", help="sizes of the huge conversation, comma-separated")
    ap.add_argument("--data", action="append", type=Path, help="an existing data dir of this layout (repeatable)")
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = ([run(None, d, args.calls) for d in args.data] if args.data
            else [run(int(n), None, args.calls) for n in args.turns.split(",")])
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        print(f"{r['turns']:,} turns ({r['load_bearing_unsuperseded']:,} load-bearing, not superseded), "
              f"{r['calls']} calls a side; load {r['load_before']} -> {r['load_after']}")
        for side in SIDES:
            print(f"  {side}: {r['plans'][side]}")
        print("| call | sort p50 / p99 ms | index p50 / p99 ms | ratio (p50) |")
        print("|---|---:|---:|---:|")
        for name in CALL_NAMES:
            a, b = r["sort"][name], r["index"][name]
            print(f"| {name} | {a['p50_ms']} / {a['p99_ms']} | {b['p50_ms']} / {b['p99_ms']} | {r['ratio_p50'][name]}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
