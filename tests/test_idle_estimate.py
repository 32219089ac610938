"""The idle-machine estimate (evals/idle_estimate.py): CPU work divided by the cores it
could use at once; single-threaded work counts in full, work on two threads that do not
hold the GIL counts half on two cores."""

from __future__ import annotations

import hashlib
import sys
import threading
import time

import pytest

from tiermem.evals.idle_estimate import IdleClock

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")
BLOCK = b"x" * (8 << 20)  # hashlib releases the GIL on buffers this large


def _burn(cpu_s: float) -> None:
    end = time.thread_time() + cpu_s
    while time.thread_time() < end:
        hashlib.sha256(BLOCK).digest()


def test_one_thread_counts_its_cpu_time() -> None:
    with IdleClock(2) as clock:
        _burn(0.3)
    assert clock.estimate_s is not None
    assert 0.2 <= clock.estimate_s <= 0.45  # the sampler's own CPU is left out


def test_two_threads_on_two_cores_count_half() -> None:
    # the same 0.6 CPU-s, on one thread and then on two: two cores would halve the wall time
    with IdleClock(2) as one:
        _burn(0.6)
    with IdleClock(2) as two:
        threads = [threading.Thread(target=_burn, args=(0.3,)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert one.estimate_s is not None and two.estimate_s is not None
    assert two.estimate_s < 0.8 * one.estimate_s


def test_cores_must_be_positive() -> None:
    with pytest.raises(ValueError, match="cores must be at least 1, not 0"):
        IdleClock(0)
