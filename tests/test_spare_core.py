"""When the query embedding may take a second core (tiers.embed_onnx.spare_core): the
work of everyone but the calling thread decides, over the window since that thread's
last reading, read from the machine's own CPU counters."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time

import pytest

from tiermem.tiers import embed_onnx
from tiermem.tiers.embed_onnx import (
    SPARE_SAMPLE_S,
    _busy_cpu_seconds,
    spare_core,
    usable_cpus,
    window_others,
)

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
SPIN_S = 1.0  # CPU seconds each spinning process burns
SPINNER = f"import time\nt = time.process_time()\nwhile time.process_time() - t < {SPIN_S}: pass\n"


@pytest.mark.parametrize("window_s, busy_s, own_s, others", [
    (1.0, 1.0, 1.0, 0.0),      # the caller alone keeps a core busy
    (1.0, 1.3, 1.0, 0.3),      # the caller and a light helper (its own query thread, Redis)
    (1.0, 2.0, 1.0, 1.0),      # someone else keeps another core busy
    (1.0, 1.0, 0.0, 1.0),      # the caller idle, another process on a whole core
    (0.5, 1.0, 0.0, 2.0),      # in cores: seconds over the window
    (0.25, 0.2, 0.25, 0.0),    # the clocks tick apart: the caller's time may exceed the CPUs'
    (0.0, 0.0, 0.0, math.inf), # no window: nothing is known
])
def test_others_work_in_a_window(window_s: float, busy_s: float, own_s: float, others: float) -> None:
    assert window_others(window_s, busy_s, own_s) == pytest.approx(others)


@pytest.mark.parametrize("cpus, others, spare", [
    (2, 0.0, True),        # the caller alone: the other core is free
    (2, 0.3, True),        # a light helper beside it
    (2, 0.6, False),       # past SPARE_CORE_LOAD
    (1, 0.0, False),       # one CPU: never a second core
    (4, 2.0, True),        # two of four busy
    (4, math.inf, False),  # unknown
])
def test_a_core_is_spare_below_the_margin(monkeypatch: pytest.MonkeyPatch, cpus: int, others: float,
                                          spare: bool) -> None:
    monkeypatch.setattr(embed_onnx, "others_cores", lambda: others)
    assert spare_core(cpus) is spare


def in_fresh_thread(fn: object) -> object:
    """`fn()` on a new thread: a thread of its own has no reading yet."""
    assert callable(fn)
    out: list[object] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


@pytest.mark.parametrize("load, spare", [
    (0.2, True),   # an idle machine
    (5.0, False),  # a busy one
])
def test_a_threads_first_reading_takes_the_load_average(monkeypatch: pytest.MonkeyPatch, load: float,
                                                        spare: bool) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))

    def first_then_soon_after() -> tuple[bool, bool, bool]:
        first = spare_core(2)
        monkeypatch.setattr(os, "getloadavg", lambda: (10.0 - load, 0.0, 0.0))  # the opposite verdict
        # within SPARE_SAMPLE_S: the same reading, not a new one, whatever the cpus asked about
        return first, spare_core(2), spare_core(10 ** 6)

    assert in_fresh_thread(first_then_soon_after) == (spare, spare, True)


def test_no_counters_and_no_load_average_mean_no_spare_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_onnx, "_busy_cpu_seconds", lambda: None)  # not Linux
    monkeypatch.delattr(os, "getloadavg", raising=False)  # Windows has none
    assert in_fresh_thread(lambda: spare_core(10 ** 6)) is False


@linux_only
def test_the_cpu_counters_see_another_process_work() -> None:
    before = _busy_cpu_seconds()
    assert before is not None
    subprocess.run([sys.executable, "-c", SPINNER], check=True, timeout=60)
    after = _busy_cpu_seconds()
    assert after is not None
    assert after - before >= 0.8 * SPIN_S  # at least the spinner's (others may add)


@linux_only
@pytest.mark.skipif(usable_cpus() < 2, reason="one CPU never has a spare core")
def test_no_spare_core_while_other_processes_fill_every_core() -> None:
    cpus = usable_cpus()

    def judged_while_spinning() -> bool:
        assert spare_core(cpus) in (True, False)  # the first reading opens this thread's window
        spinners = [subprocess.Popen([sys.executable, "-c", SPINNER]) for _ in range(cpus)]
        try:
            time.sleep(max(0.5, 2 * SPARE_SAMPLE_S))  # a window within the spinners' second
            return spare_core(cpus)
        finally:
            for p in spinners:
                p.kill()
                p.wait()

    assert in_fresh_thread(judged_while_spinning) is False
