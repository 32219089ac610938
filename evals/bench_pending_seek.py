"""What one conversation's own embedding pass costs when the conversation is huge.

    python -m tiermem.evals.bench_pending_seek [--data DIR] [--turns 20000,60000] [--calls 30] [--json]

A SQLite store holds one conversation of N imported turns, all embedded (unit vectors),
and another tenant's 30-turn one (evals.huge_store, as bench_turncache_load's); `--data`
takes an existing data dir of that layout instead (copied first: the original is never
written). On the huge conversation, in one process against the same store, two sides
alternate call by call:

- `walk`: the read before m022, which SQLite ran through the primary key
  (conversation_id, position), looking up every turn after the resume position to test
  `embedded = 0` (the plan the shipped statement had; set through
  `ColdStore._CONV_PENDING_INDEX`);
- `seek`: the shipped read, through turns_pending_by_pos (the pending turns only).

Timed per side (median and p99 of `--calls` calls, ms): `index_pending(conversation_id=)`
when the newest turn is the one pending (an append's own pass), the same when none is
(what every `search` and view refresh of the conversation runs first), and a whole
`Memory.append` of a correction (its supersession embeds it inline, before append
returns). And `pending_embeddings(conv)`, the same statement on both sides, with its
plan. The load averages are printed before and after: the machine is shared.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from tiermem.evals import huge_store
from tiermem.evals.baselines import timed
from tiermem.evals.bench import load_average
from tiermem.evals.huge_store import HUGE, data_dir, opened, print_sides, sides_out, sql_rows, summary
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import MAX_POSITION, Message

SIDES = ("walk", "seek")
# a user turn with a correction cue: supersession embeds it inline (Memory.append_many)
CORRECTION = "Actually, my router is the model R{i} now."
FILLER = "noted, thanks ({i})"


def _pk_index(cold: ColdStore) -> str:
    """The name SQLite gave the turns table's primary-key index (the walk's)."""
    return str(next(r[1] for r in sql_rows(cold, "PRAGMA index_list(turns)") if r[3] == "pk"))


def _plan(cold: ColdStore, key: str) -> list[str]:
    sql = cold._conv_pending_sql(cold._POOL_COLUMNS)  # the shipped statement's text
    return [str(r[-1]) for r in sql_rows(cold, "EXPLAIN QUERY PLAN " + sql, (key, MAX_POSITION, -1, 1))]


def measure(data: Path, calls: int) -> dict[str, Any]:
    saved = ColdStore._CONV_PENDING_INDEX
    load_before = load_average()
    times: dict[str, dict[str, list[float]]] = {s: {"one_pending": [], "none_pending": [], "append": []}
                                                for s in SIDES}
    try:
        with opened(data) as (mem, cold, key):
            index = {"walk": _pk_index(cold), "seek": saved}
            plans: dict[str, list[str]] = {}
            turns = cold.last_position(key) + 1
            # untimed: the first append loads what every later one reuses (the labeler's rules)
            mem.append(HUGE[1], {"role": "user", "content": CORRECTION.format(i=-1)}, namespace=HUGE[0])
            for i in range(calls):
                for side in (SIDES if i % 2 == 0 else SIDES[::-1]):
                    ColdStore._CONV_PENDING_INDEX = index[side]
                    plans.setdefault(side, _plan(cold, key))
                    cold.append(HUGE[1], Message(role="assistant", content=FILLER.format(i=i)), namespace=HUGE[0])
                    catch_up = functools.partial(cold.index_pending, conversation_id=key)
                    times[side]["one_pending"].append(timed(catch_up)[1])
                    times[side]["none_pending"].append(timed(catch_up)[1])
                    msg = {"role": "user", "content": CORRECTION.format(i=i)}
                    times[side]["append"].append(timed(functools.partial(mem.append, HUGE[1], msg,
                                                                        namespace=HUGE[0]))[1])
                    # the append's own pass embedded its turn: nothing is left for the next call
                    assert cold.pending_embeddings(key) == 0, "the append did not embed its turn inline"
            cold.append(HUGE[1], Message(role="assistant", content=FILLER.format(i=calls)), namespace=HUGE[0])
            assert cold.pending_embeddings(key) == 1
            count_ms = [timed(functools.partial(cold.pending_embeddings, key))[1] for _ in range(calls)]
            count_plan = [str(r[-1]) for r in sql_rows(
                cold, "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM turns WHERE embedded = 0 AND conversation_id = ?", (key,))]
    finally:
        ColdStore._CONV_PENDING_INDEX = saved
    out: dict[str, Any] = {"turns": turns, "calls": calls, "load_before": load_before,
                           "load_after": load_average(), "plans": plans}
    out.update(sides_out(times, SIDES))
    out["pending_embeddings"] = {**summary(count_ms), "plan": count_plan}
    return out


def run(turns: int | None, source: Path | None, calls: int) -> dict[str, Any]:
    with data_dir(turns, source, "tiermem-bench-seek-") as data:
        return measure(data, calls)


def print_row(r: dict[str, Any]) -> None:
    print(f"{r['turns']:,} turns, {r['calls']} calls a side; load {r['load_before']} -> {r['load_after']}")
    print_sides(r, SIDES, list(r["ratio_p50"]))
    pe = r["pending_embeddings"]
    print(f"pending_embeddings(conv): {pe['p50_ms']} / {pe['p99_ms']} ms, {pe['plan']}")


def main(argv: list[str] | None = None) -> int:
    return huge_store.main(argv, __doc__, run, print_row)


if __name__ == "__main__":
    raise SystemExit(main())
