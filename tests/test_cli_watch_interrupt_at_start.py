"""Ctrl-C the moment `consolidate --watch` has started its scheduler, its first run under
way: the scheduler is stopped before the store is closed, so no run meets a closed store,
and the watch stops as it does later (exit 0, nothing on stderr but what the run says).

Before: the scheduler was started outside the block that stops it: the interrupt closed
the store under the first run ("WARNING tiermem.scheduler: consolidation run failed:
storage unavailable ... the store is closed") and the command exited 130 with "error:
interrupted". A Ctrl-C in that instant cannot be timed from outside (microseconds), so
the child itself sends the real SIGINT to itself right after ConsolidationScheduler.start
returns: the one thing the child changes is when the signal comes. Real process, real
signal, real SQLite file, the real embedded Redis."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("clean_env")

RUN_TIMEOUT_S = 180
CONVERSATIONS = 50  # a first run of 50 views over budget lasts ~0.5 s: still running at the close
TURNS = 30
WATCH_INTERVAL_S = 5  # one run while the test lasts

# the CLI, with a SIGINT sent to its own process as the scheduler's thread starts
CHILD = textwrap.dedent("""
    import os, signal, sys
    from tiermem.consolidation.scheduler import ConsolidationScheduler
    from tiermem.cli import main

    started = ConsolidationScheduler.start

    def start_then_interrupted(self, *, run_now=False):
        started(self, run_now=run_now)
        os.kill(os.getpid(), signal.SIGINT)  # raised in this thread at its next instruction

    ConsolidationScheduler.start = start_then_interrupted
    sys.argv = ["tiermem", *sys.argv[1:]]
    main()
""")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    with Memory(Config(data_dir=d), hot=False, background_indexing=False) as mem:
        for c in range(CONVERSATIONS):
            mem.append_many(f"c{c}", [{"role": "user", "content": f"Remember fact {i}: the code word {i} is "
                                       f"banana{i}."} for i in range(TURNS)])
    return d


def test_interrupt_as_the_scheduler_starts(data: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, "--data-dir", str(data), "consolidate", "--watch",
                            "--interval", str(WATCH_INTERVAL_S)], capture_output=True, text=True,
                           timeout=RUN_TIMEOUT_S, env=env)
    finally:
        EmbeddedRedis(data).stop()
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])  # stopped as a watch is: 130 before
    assert "store is closed" not in r.stderr, r.stderr[-2000:]
    assert "consolidation run failed" not in r.stderr and "error:" not in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
