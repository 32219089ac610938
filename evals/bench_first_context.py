"""Time to the first context after a bulk import: the inline catch-up's bound.

    python -m tiermem.evals.bench_first_context [--turns 2000,5000] [--rounds 1] [--json]

For each size, one SQLite store holds one conversation of N imported turns (chat lines,
`Memory.append_many` in batches of IMPORT_BATCH: an import, none of them embedded), copied
once per side and round. In one process, with one embedding model loaded up front (the
model's load is the same on both sides and is not timed; its memo of vectors is emptied
before each side), two sides alternate round by round, each a fresh `Memory` on its own
copy without the background indexer:

- `unbounded`: the code before (`CONTEXT_EMBED_POOLS` past any backlog): the first context
  embeds every pending turn of its conversation before it plans;
- `bounded`: the shipped bound (`tiermem.memory.CONTEXT_EMBED_POOLS`, one catch-up pool):
  the rest is left to the background catch-up and the plan says how many turns dense
  ranking could not see (`Plan.vectors_pending`).

Printed per side: the first context's seconds, the turns it left pending, and the second
context's seconds (the same query: each call embeds up to its bound again). The load
averages are printed before and after: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from tiermem import memory as memory_module
from tiermem.config import Config
from tiermem.evals.bench import load_average
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder, build_embedder

SIDES = ("unbounded", "bounded")
CONVERSATION = "imported"
IMPORT_BATCH = 1000  # turns per append_many, as `tiermem import` commits a conversation's chunk
QUERY = "what is my budget for the trip?"
BUDGET_TOKENS = 2000
UNBOUNDED_POOLS = 10**9  # more pools than any backlog here: the code before this bound
LINE = "turn {i}: I prefer aisle seats and my budget for the trip is {i} euros."


def build(data: Path, turns: int) -> None:
    """A store of one conversation of `turns` imported turns, none embedded."""
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        for start in range(0, turns, IMPORT_BATCH):
            mem.append_many(CONVERSATION, [
                {"role": "user" if i % 2 == 0 else "assistant", "content": LINE.format(i=i)}
                for i in range(start, min(turns, start + IMPORT_BATCH))], session_id=f"s{start // 100:04d}")
        assert mem.cold.pending_embeddings() == turns


def one_side(source: Path, work: Path, embedder: FastEmbedder, pools: int) -> dict[str, Any]:
    """The first and second context on a fresh copy of `source`, with CONTEXT_EMBED_POOLS = pools."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work)
    embedder.clear_memo()  # the vectors of the last side's texts: this side computes its own
    saved = memory_module.CONTEXT_EMBED_POOLS
    memory_module.CONTEXT_EMBED_POOLS = pools
    try:
        with Memory(Config(data_dir=work), embedder=embedder, hot=False, background_indexing=False) as mem:
            t0 = time.perf_counter()
            first = mem.context(CONVERSATION, QUERY, BUDGET_TOKENS)
            first_s = time.perf_counter() - t0
            left = mem.cold.pending_embeddings()
            t0 = time.perf_counter()
            mem.context(CONVERSATION, QUERY, BUDGET_TOKENS)
            second_s = time.perf_counter() - t0
    finally:
        memory_module.CONTEXT_EMBED_POOLS = saved
    return {"first_s": round(first_s, 2), "left_pending": left, "plan_vectors_pending": first.plan.vectors_pending,
            "second_s": round(second_s, 2)}


def run(sizes: list[int], rounds: int) -> list[dict[str, Any]]:
    embedder: FastEmbedder = build_embedder()
    embedder.embed(["load the model"])  # once, untimed: both sides share it
    pools = {"unbounded": UNBOUNDED_POOLS, "bounded": memory_module.CONTEXT_EMBED_POOLS}
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tiermem-bench-first-context-") as tmp:
        for turns in sizes:
            source = Path(tmp) / f"store-{turns}"
            build(source, turns)
            row: dict[str, Any] = {"turns": turns, "load_before": load_average(), "sides": {s: [] for s in SIDES}}
            for r in range(rounds):
                for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
                    row["sides"][side].append(one_side(source, Path(tmp) / "work", embedder, pools[side]))
            row["load_after"] = load_average()
            out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", default="2000,5000", help="conversation sizes, comma-separated")
    ap.add_argument("--rounds", type=int, default=1, help="rounds per size (the sides alternate first)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = run([int(x) for x in args.turns.split(",")], args.rounds)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        print(f"{row['turns']:,} turns; load {row['load_before']} -> {row['load_after']}")
        for side in SIDES:
            for res in row["sides"][side]:
                print(f"  {side:<9}: first context {res['first_s']:7.2f} s, left pending {res['left_pending']:>6,} "
                      f"(plan: {res['plan_vectors_pending']:,}), second {res['second_s']:6.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
