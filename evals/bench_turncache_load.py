"""What one huge conversation's first `context()` costs another tenant of the process.

    python -m tiermem.evals.bench_turncache_load [--turns 20000,60000] [--rounds 5] [--json]

A SQLite store holds one conversation of N imported turns (`retention._imported`, written
in batches as an import writes them; unit vectors: the vector table as wide as the
bundled model's, no model run) and another tenant's 30-turn conversation (evals.huge_store). A fresh
`Memory` (its turn cache empty, as after a start) serves the other tenant's `context()`
in a loop on a thread while the main thread makes the huge conversation's first
`context()`, which reads all its turns into the turn cache. Two sides, in this process,
alternating each round:

- `one_read`: the turn cache reads the conversation in one read (the code before:
  `FACTS_PAGE_TURNS` set past N), the store's lock held for the whole of it;
- `pages`: the shipped `FACTS_PAGE_TURNS`.

Printed per side: the other tenant's longest `context()` during the load (median over
rounds, and the worst), its median call, and the huge conversation's first-call time.
What remains with pages is mostly the GIL: the load derives every turn in Python. And
the peak memory of the load alone (`TurnCache.get` on a fresh cache, traced by
`tracemalloc`, numpy's buffers included), against the size of the entry it keeps: one
read holds every row of the conversation as Python objects at once, pages one page."""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

from tiermem import Config, Memory
from tiermem.evals.bench import bounded, int_list
from tiermem.evals.huge_store import HUGE, OTHER, data_dir
from tiermem.evals.retention import UnitEmbedder
from tiermem.tiers import turncache

WARM_CALLS = 5  # the other tenant's calls before the load: its own copy cached
READER_PAUSE_S = 0.002
SETTLE_S = 0.2  # the reader runs alone this long before the load, and after it
SIDES = ("one_read", "pages")
QUERY = "the refund of the order for shipping labels"
OTHER_QUERY = "what about my printer?"


def once(data: Path, page_turns: int) -> dict[str, float]:
    """One first load beside the other tenant's loop, at `page_turns` turns per read."""
    saved = turncache.FACTS_PAGE_TURNS
    turncache.FACTS_PAGE_TURNS = page_turns
    try:
        with Memory(Config(data_dir=data), embedder=UnitEmbedder(), hot=False, background_indexing=False) as mem:
            for _ in range(WARM_CALLS):
                mem.context(OTHER[1], OTHER_QUERY, 1000, namespace=OTHER[0])
            waits: list[float] = []
            stop = threading.Event()

            def reader() -> None:
                while not stop.is_set():
                    t = time.perf_counter()
                    mem.context(OTHER[1], OTHER_QUERY, 1000, namespace=OTHER[0])
                    waits.append((time.perf_counter() - t) * 1000)
                    time.sleep(READER_PAUSE_S)

            th = threading.Thread(target=reader)
            th.start()
            try:
                time.sleep(SETTLE_S)
                waits.clear()
                t0 = time.perf_counter()
                mem.context(HUGE[1], QUERY, 2000, namespace=HUGE[0])
                first = (time.perf_counter() - t0) * 1000
                time.sleep(SETTLE_S)
            finally:
                stop.set()
                th.join()
    finally:
        turncache.FACTS_PAGE_TURNS = saved
    return {"other_max_ms": max(waits), "other_p50_ms": statistics.median(waits), "first_ms": first}


def peak_mb(data: Path, page_turns: int) -> tuple[float, float]:
    """(peak MB traced while a fresh turn cache loads the huge conversation, MB its entry keeps)."""
    saved = turncache.FACTS_PAGE_TURNS
    turncache.FACTS_PAGE_TURNS = page_turns
    try:
        with Memory(Config(data_dir=data), embedder=UnitEmbedder(), hot=False, background_indexing=False) as mem:
            key = mem.cold.key_of(*HUGE)
            assert key is not None
            cache = turncache.TurnCache(mem.cold)
            tracemalloc.start()
            try:
                cache.get(key)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            kept = cache.stats()["bytes"]
    finally:
        turncache.FACTS_PAGE_TURNS = saved
    return peak / 2**20, kept / 2**20


def measure(turns: int, rounds: int) -> dict[str, Any]:
    with data_dir(turns, None, "tiermem-bench-tc-") as data:
        runs: dict[str, list[dict[str, float]]] = {s: [] for s in SIDES}
        for r in range(rounds):
            for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
                page = turns + 1 if side == "one_read" else turncache.FACTS_PAGE_TURNS
                runs[side].append(once(data, page))
        memory = {side: peak_mb(data, turns + 1 if side == "one_read" else turncache.FACTS_PAGE_TURNS)
                  for side in SIDES}
    out: dict[str, Any] = {"turns": turns, "rounds": rounds, "page_turns": turncache.FACTS_PAGE_TURNS}
    for side in SIDES:
        rs = runs[side]
        out[side] = {"other_max_ms_median": round(statistics.median(x["other_max_ms"] for x in rs), 1),
                     "other_max_ms_worst": round(max(x["other_max_ms"] for x in rs), 1),
                     "other_p50_ms": round(statistics.median(x["other_p50_ms"] for x in rs), 2),
                     "first_ms_median": round(statistics.median(x["first_ms"] for x in rs), 1),
                     "load_peak_mb": round(memory[side][0], 1), "entry_mb": round(memory[side][1], 1)}
    out["ratio"] = round(out["one_read"]["other_max_ms_median"] / max(out["pages"]["other_max_ms_median"], 1e-9), 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    # argparse converts a text default with `type` too: args.turns is always a list
    ap.add_argument("--turns", type=int_list(unit="turns"), default="20000,60000",
                    help="sizes of the huge conversation, comma-separated")
    ap.add_argument("--rounds", type=bounded(1, unit="rounds"), default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = [measure(n, args.rounds) for n in args.turns]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("| turns | other tenant's longest call, one read (median / worst ms) | with pages | ratio "
          "| its median call, one read / pages ms | first call, one read / pages ms "
          "| load's peak memory, one read / pages MB (entry kept) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        a, b = r["one_read"], r["pages"]
        print(f"| {r['turns']:,} | {a['other_max_ms_median']} / {a['other_max_ms_worst']} | "
              f"{b['other_max_ms_median']} / {b['other_max_ms_worst']} | {r['ratio']}x | "
              f"{a['other_p50_ms']} / {b['other_p50_ms']} | {a['first_ms_median']:.0f} / {b['first_ms_median']:.0f} | "
              f"{a['load_peak_mb']} / {b['load_peak_mb']} ({b['entry_mb']}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
