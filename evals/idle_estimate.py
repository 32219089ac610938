"""What a run would take on an idle machine, estimated while the machine is shared.

On a loaded machine a run's wall time says more about the other processes than about the
code: a change that fills cores the code left idle (a pipeline) cannot show its gain
when no core is ever idle. `IdleClock` estimates instead: every `interval_s` it samples
how many of this process's threads are runnable (Linux: `/proc/self/task/*/stat`, state
R) and how much CPU the process consumed since the last sample (less the sampler's
own); the estimate adds `cpu / min(runnable, cores)` over the samples: the time the same
work would take with `cores` cores to itself and the same parallelism.

Its assumptions, for reading the figure: work done on a loaded machine costs the same
CPU-seconds idle (shared caches make it cost more under load, so it over-estimates);
a thread waiting for the GIL or a lock is not runnable (it sleeps on a futex), so
serialisation is seen. Measured on this machine at load 2.5: 11.1-11.5 s for the
LoCoMo dev ingest whose idle wall time is 11.25 s. Not on Linux: `estimate_s` is None.
"""

from __future__ import annotations

import os
import threading
import time
from types import TracebackType

DEFAULT_INTERVAL_S = 0.004  # ~2% of one core for the sampler on 2 cores, at ~10 threads
TASKS = "/proc/self/task"


def _runnable(skip: int) -> int:
    n = 0
    for tid in os.listdir(TASKS):
        if int(tid) == skip:
            continue
        try:
            with open(f"{TASKS}/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]  # the name may hold spaces
        except (OSError, IndexError):  # the thread ended between listdir and open
            continue
        n += state == "R"
    return n


class IdleClock:
    """`with IdleClock(cores) as c: ...`, then `c.estimate_s` (None where unsupported)."""

    def __init__(self, cores: int, *, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        if cores < 1:
            raise ValueError(f"cores must be at least 1, not {cores}")
        self.cores = cores
        self.interval_s = interval_s
        self.estimate_s: float | None = None
        self._sum = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="idle-clock", daemon=True)
        self._supported = os.path.isdir(TASKS)

    def _run(self) -> None:
        me = threading.get_native_id()
        last_p, last_t = time.process_time(), time.thread_time()
        while True:
            stopped = self._stop.wait(self.interval_s)  # the last, partial interval counts too
            runnable = _runnable(me)
            p, t = time.process_time(), time.thread_time()
            self._sum += ((p - last_p) - (t - last_t)) / max(1, min(runnable, self.cores))
            last_p, last_t = p, t
            if stopped:
                return

    def __enter__(self) -> IdleClock:
        if self._supported:
            self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._supported:
            self._stop.set()
            self._thread.join()
            self.estimate_s = self._sum
