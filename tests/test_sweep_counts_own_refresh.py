"""A sweep counts as refreshed only the versions its own refresh stored.

Invariants (consolidation.views `ViewMaintainer.sweep_refresh` / `stored`, tiers.warm
`WarmStore.put_stored`, consolidation.scheduler `SchedulerStats.refreshed_total`):
- Two processes sweep one data dir (two service workers' schedulers, a scheduler beside
  `tiermem consolidate`). When the other process stores the view's version after this
  sweep picked it and before its refresh ran, this refresh finds it covering and stores
  nothing: it is Swept.UNCHANGED, not NEW_VERSION, so neither the scheduler's
  `refreshed_total` / `last_refreshed` (the `consolidate --watch` line) nor the sweep's
  `refreshed` counts it, and the sum over processes equals the versions stored.
- A refresh that stores the version itself is still counted (the control).
The other process is a real child process (a Memory of its own on the same SQLite file)
run at the forced moment: between the sweep's pick and its refresh of that view.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tiermem
from tiermem import Memory
from tiermem.config import Config
from tiermem.consolidation.scheduler import sweep
from tiermem.consolidation.views import Swept
from tiermem.tiers.embed import Embedder

# the other process: a one-shot sweep of the same data dir, printing how many it stored
OTHER = """
import sys
from tiermem import Memory
from tiermem.config import Config
with Memory(Config(data_dir=sys.argv[1], warm_max_turns_behind=1), hot=False, background_indexing=False) as m:
    print(m.consolidate().picked)
"""
CHILD_TIMEOUT_S = 120


def _other_process_sweeps(data: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(tiermem.__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", OTHER, str(data)], env=env, capture_output=True, text=True,
                         timeout=CHILD_TIMEOUT_S)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) >= 1  # it picked (and stored) the view


def _stored(mem: Memory) -> int:
    """The versions stored of the conversation's views, by either process."""
    return sum(len(mem.warm.versions("c", kind)) for kind in ("rolling", "constraints"))


def _sweep(mem: Memory) -> int:
    return sweep(mem.views, mem.views.stale_views(10)).refreshed


def _scheduler_run(mem: Memory) -> int:
    sched = mem.make_scheduler()
    done = sched.run_once()
    assert sched.stats.refreshed_total == sched.stats.last_refreshed == done
    return done


@pytest.mark.parametrize("run, raced", [
    (_sweep, True),  # the other process stored them after the pick, before this refresh: none is this sweep's
    (_scheduler_run, True),  # the scheduler's refreshed_total / last_refreshed alike
    (_sweep, False),  # control: this sweep stored each, each counted once
    (_scheduler_run, False),  # control: the scheduler's run
], ids=["sweep_raced", "scheduler_raced", "sweep_alone", "scheduler_alone"])
def test_only_this_refresh_counts(tmp_path: Path, embedder: Embedder, run: Callable[[Memory], int],
                                  raced: bool) -> None:
    data = tmp_path / "data"
    config = Config(data_dir=data, warm_max_turns_behind=1)
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("c", [{"role": ("user", "assistant")[i % 2], "content": f"note {i} about the boat"}
                              for i in range(10)])
        mem.catch_up("c")
        assert _stored(mem) == 0
        assert len(mem.views.stale_views(10)) == 2  # rolling and constraints, over budget
        refresh = mem.views.refresh
        waiting = [raced]

        def first_raced(conv: str, kind: str, key: str = "", **kw: Any) -> Any:
            # the moment two schedulers race: the views picked here, stored there first
            if waiting and waiting.pop():
                _other_process_sweeps(data)
            return refresh(conv, kind, key, **kw)

        mem.views.refresh = first_raced  # type: ignore[method-assign]
        counted = run(mem)
        assert _stored(mem) == 2  # one version of each view, by whichever process
        assert counted == (0 if raced else 2)
        # covering now: a refresh that stores nothing is not counted
        assert mem.views.sweep_refresh("c", "rolling") is Swept.UNCHANGED
