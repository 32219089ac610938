"""The store the huge-conversation benchmarks measure, and the harness they share
(evals.bench_turncache_load, evals.bench_pending_seek, evals.bench_pin_candidates).

A SQLite store holds one conversation of N imported turns (`retention._imported`,
written in batches as an import writes them), all embedded with unit vectors (the
vector table as wide as the bundled model's, no model run), and another tenant's
`OTHER_TURNS`-turn conversation. With `sessions`, the huge conversation's turns fall in
that many sessions, one after another (`session_id`), as a long-running assistant's log
of many chats does. A run measures a copy of a given data dir of that
layout (the original is never written) or one built for it, removed afterwards.

The two-sided benchmarks (a side before a change against the shipped one, alternating
call by call) report each call's median (`p50_ms`) and nearest-rank p99 (`p99_ms`).
Their `--turns` and `--calls` are checked as they are parsed (`bench.int_list` and
`bench.bounded`: whole numbers of at least 1, else a usage error naming the option and
the limit), before anything is built.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tiermem import Config, Memory
from tiermem.evals.bench import bounded, int_list, pct
from tiermem.evals.retention import IMPORT_BATCH_TURNS, UnitEmbedder, _imported
from tiermem.tiers.cold import ColdStore

HUGE = ("big", "long")  # (namespace, name) of the huge conversation
OTHER = ("other", "mine")  # (namespace, name) of the other tenant's conversation
OTHER_TURNS = 30
P99 = 0.99
RATIO_FLOOR_MS = 1e-9  # a side's median below this counts as this: a ratio, not a division by zero
DEFAULT_TURNS = "20000,60000"
DEFAULT_CALLS = 30


def session_id(i: int) -> str:
    """The id of the layout's `i`th session (ids sort as the sessions follow each other)."""
    return f"s{i:06d}"


def build(data: Path, turns: int, sessions: int = 0) -> None:
    """Write the layout into a new data dir `data`, the huge conversation `turns` long,
    in `sessions` sessions of about equal length (0: turns without a session)."""
    with Memory(Config(data_dir=data), embedder=UnitEmbedder(), hot=False, background_indexing=False) as mem:
        mem.append_many(OTHER[1], [{"role": "user", "content": f"turn {i} about my printer"}
                                   for i in range(OTHER_TURNS)], namespace=OTHER[0])
        msgs = _imported(0, turns)
        if sessions > 0:
            per = -(-turns // sessions)  # ceiling: no session left empty past the end
            msgs = [{**m, "session_id": session_id(i // per)} for i, m in enumerate(msgs)]
        for i in range(0, turns, IMPORT_BATCH_TURNS):
            mem.append_many(HUGE[1], msgs[i:i + IMPORT_BATCH_TURNS], namespace=HUGE[0])
        mem.catch_up()


@contextlib.contextmanager
def data_dir(turns: int | None, source: Path | None, prefix: str, sessions: int = 0) -> Iterator[Path]:
    """A data dir of the layout to measure: a copy of `source` (the original is never
    written) or, without one, one built with `turns` turns in `sessions` sessions;
    removed afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        if source is not None:
            shutil.copytree(source, tmp / "data")
        else:
            assert turns is not None, "turns or a source data dir"
            build(tmp / "data", turns, sessions)
        yield tmp / "data"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def opened(data: Path) -> Iterator[tuple[Memory, ColdStore, str]]:
    """The data dir `data` of this layout opened as the benchmarks measure it (unit
    vectors, no hot tier, no background indexing): (its Memory, its SQLite store, the
    huge conversation's key)."""
    with Memory(Config(data_dir=data), embedder=UnitEmbedder(), hot=False, background_indexing=False) as mem:
        cold = mem.cold
        assert isinstance(cold, ColdStore), "a SQLite store"
        key = cold.key_of(*HUGE)
        assert key is not None, f"no conversation {HUGE[1]!r} in namespace {HUGE[0]!r}"
        yield mem, cold, key


def sql_rows(cold: ColdStore, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    """The rows of a statement the benchmarks ask SQLite itself (EXPLAIN QUERY PLAN, the
    index list, a count), through the store's public raw access (`SqlAccess.reading`)."""
    with cold.reading() as c:
        return list(c.execute(sql, tuple(params)))


def summary(ms: Sequence[float]) -> dict[str, float]:
    """One call's timings (ms): the median and the nearest-rank p99."""
    return {"p50_ms": round(statistics.median(ms), 3), "p99_ms": round(pct(ms, P99), 3)}


def sides_out(times: Mapping[str, Mapping[str, Sequence[float]]], sides: tuple[str, str]
              ) -> dict[str, Any]:
    """A two-sided row's timings: per side each call's `summary`, then `ratio_p50`, per
    call the first side's median over the second's."""
    out: dict[str, Any] = {side: {name: summary(ms) for name, ms in times[side].items()} for side in sides}
    old, new = out[sides[0]], out[sides[1]]
    out["ratio_p50"] = {name: round(old[name]["p50_ms"] / max(new[name]["p50_ms"], RATIO_FLOOR_MS), 1)
                        for name in new}
    return out


def main(argv: list[str] | None, doc: str | None, run: Callable[[int | None, Path | None, int], dict[str, Any]],
         print_row: Callable[[dict[str, Any]], None]) -> int:
    """The two-sided benchmarks' command line: `run` per `--data` dir, or per size of
    `--turns` when none is given; the rows as JSON with `--json`, else `print_row` each."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    # argparse converts a text default with `type` too: args.turns is always a list
    ap.add_argument("--turns", type=int_list(unit="turns"), default=DEFAULT_TURNS,
                    help="sizes of the huge conversation, comma-separated")
    ap.add_argument("--data", action="append", type=Path, help="an existing data dir of this layout (repeatable)")
    ap.add_argument("--calls", type=bounded(1, unit="calls"), default=DEFAULT_CALLS)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = ([run(None, d, args.calls) for d in args.data] if args.data
            else [run(n, None, args.calls) for n in args.turns])
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        print_row(row)
    return 0


def print_sides(row: Mapping[str, Any], sides: tuple[str, str], calls: Sequence[str]) -> None:
    """A two-sided row's plans per side, then its markdown table of `calls`."""
    old, new = sides
    for side in sides:
        print(f"  {side}: {row['plans'][side]}")
    print(f"| call | {old} p50 / p99 ms | {new} p50 / p99 ms | ratio (p50) |")
    print("|---|---:|---:|---:|")
    for name in calls:
        a, b = row[old][name], row[new][name]
        print(f"| {name} | {a['p50_ms']} / {a['p99_ms']} | {b['p50_ms']} / {b['p99_ms']} | {row['ratio_p50'][name]}x |")
