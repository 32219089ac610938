"""Row-wise dot products (cosines of unit vectors) off BLAS's thread pool.

Invariant: nothing here enters a BLAS library's thread pool; every product runs on the
calling thread. `matrix @ vector` does not keep that promise: numpy hands it to BLAS,
and OpenBLAS (numpy 2.4's, 0.3.31) splits a float32 product of more than about 1,200
rows of 384 over its threads, then keeps the woken workers spinning for about 0.1 s
after the call returns. A process asking for a context every few tens of milliseconds
at 10k turns so kept a second core busy doing nothing (the same 960 `context()` calls:
62-67 s of CPU against 35-38 s), and took that core from the query embedding's second
thread, which then waited for it (the embedding inside `context()`: 10.2 against 5.7 ms
with one BLAS thread). `np.vecdot` (numpy 2) loops over the rows with a SIMD dot each:
1.96 ms for 10k rows against 1.12 ms spread over two threads and 2.2 ms cut into
single-threaded BLAS calls (2 cores, caches cold); `einsum` where it is missing (numpy
1.26), 2.4 ms. Both sum in the matrix's dtype, as BLAS does (float32: relative error
1e-7 against float64).
"""

from __future__ import annotations

from typing import Any

import numpy as np

_vecdot: Any = getattr(np, "vecdot", None)


def row_dots(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """`matrix @ vector` for a 2-D matrix and a 1-D vector, on this thread only (see the
    module docstring): one value per row, in the inputs' common dtype."""
    if matrix.ndim != 2 or vector.ndim != 1 or matrix.shape[1] != vector.shape[0]:
        raise ValueError(f"row_dots needs a (rows, d) matrix and a (d,) vector, "
                         f"not {matrix.shape} and {vector.shape}")
    if _vecdot is not None:
        return np.asarray(_vecdot(matrix, vector))
    return np.einsum("ij,j->i", matrix, vector)
