"""The request path's threads, shipped against the way they were: `context()` latency and
CPU per call, the two taking turns in blocks in one process on one store.

Shipped: every cosine on the calling thread (`tiers.vectors.row_dots`), and a query
takes the embedder's two-thread session while the other work on the CPUs leaves a core
spare (`tiers.embed_onnx.spare_core`). The way it was ("pool"): `matrix @ vector`, which
hands a long conversation's cosines to BLAS's thread pool (whose woken worker then spins
for ~0.1 s), and the spare core judged by the 1-minute load average alone, which counts
the caller itself. The pool side is recreated here by rebinding the planner modules'
`row_dots` and the embedder's `others_cores` for its blocks, and put back after.

Blocks, not single calls, take turns: a spinning BLAS worker outlives the call that woke
it and would slow the other side's next calls. Each block starts after PAUSE_S.
CPU per call is the process's user + system time over a side's blocks, per call.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from tiermem.evals.bench import dist

BLOCK_CALLS = 48  # context() calls per block
PAUSE_S = 0.3  # before each block: what the last block woke settles
SIDES = ("shipped", "pool")


def _pool_dots(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    return matrix @ vector  # BLAS: threaded past ~1,200 rows of 384 (see tiers.vectors)


@contextlib.contextmanager
def pool_side() -> Iterator[None]:
    """The planner's cosines on BLAS's pool and the spare core by the load average, for
    the duration; everything put back after. Every loaded planner module that calls
    `row_dots` is rebound, so a new caller cannot stay on the shipped path unnoticed."""
    import tiermem.planner.build  # noqa: F401  (loads every module the planner calls)
    from tiermem.tiers import embed_onnx, vectors

    modules = [m for name, m in sorted(sys.modules.items())
               if name.startswith("tiermem.planner.") and getattr(m, "row_dots", None) is vectors.row_dots]
    saved = [m.row_dots for m in modules]
    saved_others = embed_onnx.others_cores
    try:
        for m in modules:
            m.row_dots = _pool_dots  # type: ignore[attr-defined]
        embed_onnx.others_cores = embed_onnx.load_average_others
        yield
    finally:
        for m, f in zip(modules, saved, strict=True):
            m.row_dots = f  # type: ignore[attr-defined]
        embed_onnx.others_cores = saved_others


def compare(mem: Any, calls: Sequence[tuple[str, int]], conversation_id: str, namespace: str) -> dict[str, Any]:
    """Each side over every (query, budget) of `calls` once, in alternating blocks (the
    first side of each pair alternates too)."""
    ms: dict[str, list[float]] = {s: [] for s in SIDES}
    embed_ms: dict[str, list[float]] = {s: [] for s in SIDES}
    cpu_s = dict.fromkeys(SIDES, 0.0)
    for n, start in enumerate(range(0, len(calls), BLOCK_CALLS)):
        block = calls[start:start + BLOCK_CALLS]
        for side in (SIDES if n % 2 == 0 else SIDES[::-1]):
            with pool_side() if side == "pool" else contextlib.nullcontext():
                time.sleep(PAUSE_S)
                # process_time, not os.times: the latter counts 10 ms clock ticks, and a
                # block of fast calls read 0 CPU on a fast host
                t0 = time.process_time()
                for query, budget in block:
                    c0 = time.perf_counter_ns()
                    plan = mem.context(conversation_id, query, budget, namespace=namespace).plan
                    ms[side].append((time.perf_counter_ns() - c0) / 1e6)
                    if "embed" in plan.timings_ms and "candidates" in plan.timings_ms:
                        embed_ms[side].append(plan.timings_ms["embed"] - plan.timings_ms["candidates"])
                cpu_s[side] += time.process_time() - t0
    return {side: {"context_ms": dist(ms[side]),
                   "embed_ms_median": round(statistics.median(embed_ms[side]), 3) if embed_ms[side] else None,
                   "cpu_ms_per_call": round(1000 * cpu_s[side] / max(1, len(ms[side])), 1)}
            for side in SIDES} | {"block_calls": BLOCK_CALLS}
