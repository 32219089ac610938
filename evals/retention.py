"""Retention: how big derived data grows beside the log, and what an erasure costs.

    python -m tiermem.evals.retention [--rounds 200] [--turns 5] [--erase-turns 20000]
        [--large-turns 5000] [--json]

1. Derived bytes against the log's after `--rounds` consolidations of `--turns` new
   turns each (issue 13, break 10): summary view bodies plus checkpoint texts, over the
   message bodies. Run twice in one process: keeping every version (the code before
   `warm_keep_versions`, the baseline) and keeping the configured default.
2. Erasure latency (`Memory.delete_conversation`, with its FTS merge, incremental vacuum
   and WAL truncation) of a small conversation in a database of `--erase-turns` turns,
   median and p99 of 5, and the whole database's FTS merge on its own.
3. A tenant's erasure (`Memory.delete_namespace`) of `NAMESPACE_CONVERSATIONS` x
   `NAMESPACE_TURNS` turns written one batch per conversation (an import) beside another
   tenant's small conversation, median of `NAMESPACE_SAMPLES`, and the longest a read of
   the other tenant waited meanwhile (same process). Baseline in the same process: the
   same erasure with the FTS merge-first decision off (`cold.FTS_MERGE_S_PER_ROW`
   infinite: every row secure-deleted across the batches' segments, as before; the
   rows are deleted in rowid order either way, which the code before did not do).
4. One conversation of `--large-turns` turns written by an import (`Memory.delete_conversation`
   of it) beside another tenant's, and the longest a read of the other tenant waited.
   Baseline in the same process: the same erasure in one transaction (the code before
   detaching: `cold.ERASE_BATCH_MESSAGES` larger than the conversation).

No embedding model runs (one unit vector for every text): this measures storage, not retrieval.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import sqlean

from tiermem import Config, Memory

ERASE_SAMPLES = 5
NAMESPACE_CONVERSATIONS, NAMESPACE_TURNS = 20, 150
NAMESPACE_SAMPLES = 3
READER_PAUSE_S = 0.002
IMPORT_BATCH_TURNS = 300  # turns per append_many when a large conversation is imported
EMBED_DIM = 384  # the bundled model's width, so the vector table is as large as in use


class UnitEmbedder:
    """One unit vector for every text: storage benchmarks need the vector table, not
    meaning (an `Embedder` by shape)."""

    dim = EMBED_DIM

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, 0] = 1.0
        return out


def derived_ratio(rounds: int, turns: int, keep: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Config(data_dir=Path(tmp), warm_keep_versions=keep or Config().warm_keep_versions)
        with Memory(cfg, embedder=UnitEmbedder(), hot=False, background_indexing=False) as mem:
            if keep is None:
                mem.warm.keep_versions = None  # the baseline: every version kept
            t0 = time.perf_counter()
            for r in range(rounds):
                mem.append_many("c", [{"role": "user", "content": f"Round {r} note {i}: the build on runner "
                                       f"{i} failed with exit code {r + i}; retry after the cache clears."}
                                      for i in range(turns)])
                mem.consolidate("c")
            elapsed = time.perf_counter() - t0
            # read the file as an outsider would (the store's own tables, no tiermem code)
            conn = sqlean.connect(f"file:{cfg.db_path}?mode=ro", uri=True)
            try:
                def q(sql: str) -> Any:
                    return conn.execute(sql).fetchone()
                log_bytes = q("SELECT SUM(length(body)) FROM messages")[0]
                summaries = q("SELECT COUNT(*), COALESCE(SUM(length(body)), 0) FROM summaries")
                checkpoints = q("SELECT COUNT(*), COALESCE(SUM(length(summary)), 0) FROM checkpoints")
            finally:
                conn.close()
    derived = summaries[1] + checkpoints[1]
    return {"keep_versions": keep, "rounds": rounds, "log_bytes": log_bytes, "summary_rows": summaries[0],
            "summary_bytes": summaries[1], "checkpoint_rows": checkpoints[0], "checkpoint_bytes": checkpoints[1],
            "derived_over_log": round(derived / log_bytes, 3), "seconds": round(elapsed, 1)}


def erase_latency(total_turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, \
            Memory(Config(data_dir=Path(tmp)), embedder=UnitEmbedder(), hot=False, background_indexing=False) as mem:
        per = 100
        for c in range(total_turns // per):
            mem.append_many(f"bulk-{c}", [{"role": "user", "content": f"bulk {c} line {i} about invoices and "
                                           f"shipping labels number {c * per + i}"} for i in range(per)])
        mem.catch_up()
        times = []
        for s in range(ERASE_SAMPLES):
            mem.append_many(f"victim-{s}", [{"role": "user", "content": f"victim {s} line {i}"} for i in range(20)])
            t0 = time.perf_counter()
            mem.delete_conversation(f"victim-{s}")
            times.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        mem.cold.reclaim()  # terms unknown: the whole FTS index merged (an interrupted erasure's scrub)
        reclaim_ms = (time.perf_counter() - t0) * 1000
    times.sort()
    return {"turns": total_turns, "erase_ms_p50": round(statistics.median(times), 1),
            "erase_ms_p99": round(times[-1], 1), "reclaim_alone_ms": round(reclaim_ms, 1)}


def _imported(c: int, turns: int) -> list[dict[str, Any]]:
    """An imported ticket's turns (written in batches of IMPORT_BATCH_TURNS, as an import writes)."""
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"ticket {c} line {i}: the invoice {c * 1000 + i} for shipping labels and the refund "
                        f"of order {i * 7919 % 10007} were discussed with the billing team"}
            for i in range(turns)]


def _erasure_beside_a_reader(fill: Callable[[Memory], None], erase: Callable[[Memory], object]) -> tuple[float, float]:
    """(ms `erase` took, ms the other tenant's longest read took meanwhile)."""
    with tempfile.TemporaryDirectory() as tmp, \
            Memory(Config(data_dir=Path(tmp)), embedder=UnitEmbedder(), hot=False,
                   background_indexing=False) as mem:
        mem.append_many("mine", [{"role": "user", "content": f"turn {i} about my printer"} for i in range(30)],
                        namespace="other")
        fill(mem)
        mem.catch_up()
        waits: list[float] = []
        stop = threading.Event()

        def reader() -> None:
            while not stop.is_set():
                t = time.perf_counter()
                mem.history("mine", namespace="other")
                waits.append((time.perf_counter() - t) * 1000)
                time.sleep(READER_PAUSE_S)

        th = threading.Thread(target=reader)
        th.start()
        time.sleep(0.2)
        waits.clear()
        t0 = time.perf_counter()
        erase(mem)
        took = (time.perf_counter() - t0) * 1000
        stop.set()
        th.join()
    return took, max(waits, default=0.0)


def _namespace_erasure(merge_first: bool) -> tuple[float, float]:
    """(ms the erasure took, ms the other tenant's longest read took meanwhile)."""
    from tiermem.tiers import cold

    def fill(mem: Memory) -> None:
        for c in range(NAMESPACE_CONVERSATIONS):
            mem.append_many(f"imported-{c}", _imported(c, NAMESPACE_TURNS), namespace="big")

    saved = cold.FTS_MERGE_S_PER_ROW
    if not merge_first:
        cold.FTS_MERGE_S_PER_ROW = float("inf")
    try:
        return _erasure_beside_a_reader(fill, lambda mem: mem.delete_namespace("big"))
    finally:
        cold.FTS_MERGE_S_PER_ROW = saved


def large_erasure(turns: int) -> dict[str, Any]:
    """One `turns`-turn conversation's erasure: detached then in batches, against one
    transaction (the baseline), each beside another tenant's reader."""
    from tiermem.tiers import cold

    def fill(mem: Memory) -> None:
        msgs = _imported(0, turns)
        for i in range(0, turns, IMPORT_BATCH_TURNS):
            mem.append_many("long", msgs[i:i + IMPORT_BATCH_TURNS], namespace="big")

    out: dict[str, Any] = {"turns": turns}
    saved = cold.ERASE_BATCH_MESSAGES
    for name, first_batch in (("one_transaction", turns + 1), ("default", saved)):
        cold.ERASE_BATCH_MESSAGES = first_batch
        try:
            took, wait = _erasure_beside_a_reader(fill, lambda mem: mem.delete_conversation("long", namespace="big"))
        finally:
            cold.ERASE_BATCH_MESSAGES = saved
        out[name] = {"erase_ms": round(took, 1), "other_tenant_wait_ms_max": round(wait, 1)}
    return out


def namespace_erasure() -> dict[str, Any]:
    out: dict[str, Any] = {"conversations": NAMESPACE_CONVERSATIONS, "turns_each": NAMESPACE_TURNS}
    for name, merge_first in (("secure_only", False), ("default", True)):
        runs = [_namespace_erasure(merge_first) for _ in range(NAMESPACE_SAMPLES)]
        out[name] = {"erase_ms_p50": round(statistics.median(r[0] for r in runs), 1),
                     "other_tenant_wait_ms_max": round(max(r[1] for r in runs), 1)}
    out["ratio"] = round(out["secure_only"]["erase_ms_p50"] / out["default"]["erase_ms_p50"], 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--erase-turns", type=int, default=20_000)
    ap.add_argument("--large-turns", type=int, default=5_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    base = derived_ratio(args.rounds, args.turns, None)
    kept = derived_ratio(args.rounds, args.turns, Config().warm_keep_versions)
    erase = erase_latency(args.erase_turns)
    tenant = namespace_erasure()
    large = large_erasure(args.large_turns)
    out = {"baseline_keep_all": base, "default": kept, "erase": erase, "erase_namespace": tenant,
           "erase_large_conversation": large,
           "ratio_default_vs_baseline": round(kept["derived_over_log"] / base["derived_over_log"], 3)}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for name in ("baseline_keep_all", "default"):
            r = out[name]
            print(f"{name:>18}: derived/log {r['derived_over_log']:.2f}x ({r['summary_rows']} summary rows, "
                  f"{r['checkpoint_rows']} checkpoints, log {r['log_bytes']} B, {r['seconds']} s)")
        print(f"{'ratio':>18}: {out['ratio_default_vs_baseline']:.3f} of the baseline")
        print(f"{'erase':>18}: p50 {erase['erase_ms_p50']} ms, p99 {erase['erase_ms_p99']} ms at {erase['turns']} "
              f"turns; a scrub with the whole FTS index merged (an interrupted erasure's) {erase['reclaim_alone_ms']} ms")
        n = tenant["conversations"] * tenant["turns_each"]
        for name in ("secure_only", "default"):
            r = tenant[name]
            print(f"{'erase namespace':>18}: {name:<11} p50 {r['erase_ms_p50']} ms for {n} turns written in "
                  f"batches; another tenant's read waited up to {r['other_tenant_wait_ms_max']} ms")
        print(f"{'':>18}  {tenant['ratio']}x faster than the baseline (secure_only)")
        for name in ("one_transaction", "default"):
            r = large[name]
            print(f"{'erase large':>18}: {name:<15} {r['erase_ms']} ms for one conversation of {large['turns']} "
                  f"turns; another tenant's read waited up to {r['other_tenant_wait_ms_max']} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
