"""Row-wise dot products off BLAS's thread pool (tiers/vectors.py): the same values as
`matrix @ vector`, and no other thread left burning a core after the request path's
products (turn scoring over a long conversation)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tiermem.tiers import vectors
from tiermem.tiers.vectors import row_dots

# Rows of 384 well past OpenBLAS's threading threshold (~1,200 rows at numpy 2.4), the
# size of a long support conversation.
LONG_ROWS = 20_000
DIM = 384
CALLS = 20
PAUSE_S = 0.01  # between calls, as between an agent's context() calls at full speed
# Other threads may use this much CPU over the calls (the interpreter's own, a GC): a
# spinning BLAS worker uses about the whole window (~0.2 s here).
MAX_OTHER_CPU_S = 0.05


def unit_rows(rows: int, dim: int, dtype: type = np.float32, seed: int = 0) -> np.ndarray:
    m = np.random.default_rng(seed).normal(size=(rows, dim)).astype(dtype)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


@pytest.mark.parametrize("rows, dtype", [
    (1, np.float32),          # a single row
    (7, np.float32),          # a conversation's first turns
    (LONG_ROWS, np.float32),  # the stored vectors' dtype, long conversation
    (500, np.float64),        # the summarizer's concatenated features are float64
])
@pytest.mark.parametrize("fallback", [False, True], ids=["vecdot", "einsum"])
def test_row_dots_equal_the_matrix_product(monkeypatch: pytest.MonkeyPatch, rows: int, dtype: type,
                                           fallback: bool) -> None:
    if fallback:
        monkeypatch.setattr(vectors, "_vecdot", None)  # numpy 1.26 has no vecdot
    m = unit_rows(rows, DIM, dtype)
    v = unit_rows(1, DIM, dtype, seed=1)[0]
    got = row_dots(m, v)
    assert got.shape == (rows,) and got.dtype == np.result_type(m, v)
    want = m.astype(np.float64) @ v.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("m_shape, v_shape", [
    ((4, 3), (4,)),     # the vector's length is the matrix's rows, not its columns
    ((4, 3), (1, 3)),   # a 2-D "vector"
    ((3,), (3,)),       # a 1-D "matrix"
])
def test_row_dots_refuses_mismatched_shapes(m_shape: tuple[int, ...], v_shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match=r"row_dots needs a \(rows, d\) matrix"):
        row_dots(np.zeros(m_shape, dtype=np.float32), np.zeros(v_shape, dtype=np.float32))


# Run in a process of its own: the suite sets OMP_NUM_THREADS=1 (conftest), which
# OpenBLAS obeys, and an agent's process does not.
PROBE = """
import json, os, sys, threading, time
import numpy as np
from tiermem.planner.rank import score_turns
from tiermem.tiers.turncache import TurnTable
from tiermem.tiers.vectors import row_dots
rows, dim, calls, pause = (int(a) if a.isdigit() else float(a) for a in sys.argv[1:5])

def other_threads_cpu_s():
    me = threading.get_native_id()
    ticks = 0
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")

def others_cpu_during(work):
    time.sleep(0.3)  # whatever the last probe woke goes back to sleep
    before = other_threads_cpu_s()
    for _ in range(calls):
        work()
        time.sleep(pause)
    return other_threads_cpu_s() - before

rng = np.random.default_rng(0)
m = rng.normal(size=(rows, dim)).astype(np.float32)
m /= np.linalg.norm(m, axis=1, keepdims=True)
q = m[0].copy()
table = TurnTable("c", np.arange(rows, dtype=np.int64), np.full(rows, 20, dtype=np.int64),
                  np.arange(rows, dtype=np.float64), np.zeros(rows, dtype=np.int64), m, np.ones(rows, dtype=bool))
print(json.dumps({"matmul": others_cpu_during(lambda: m @ q),
                  "score_turns": others_cpu_during(lambda: score_turns(table, q, [])),
                  "row_dots": others_cpu_during(lambda: row_dots(m, q))}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                    reason="per-thread CPU times from /proc; BLAS threads need two CPUs")
def test_scoring_a_long_conversation_leaves_no_thread_spinning() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", PROBE, str(LONG_ROWS), str(DIM), str(CALLS), str(PAUSE_S)],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    used = json.loads(out.stdout)
    # the probe sees a spinning BLAS worker where this numpy's BLAS has one
    if used["matmul"] < 2 * MAX_OTHER_CPU_S:
        pytest.skip(f"this numpy's BLAS left no worker spinning ({used['matmul']:.2f} s): nothing to guard")
    # the planner's scoring of every turn against the query: a cosine per turn
    assert used["score_turns"] < MAX_OTHER_CPU_S, used
    assert used["row_dots"] < MAX_OTHER_CPU_S, used
