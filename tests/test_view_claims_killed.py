"""A refresher killed mid-refresh does not hold its view for VIEW_CLAIM_TTL_S: the lease
of a process of this host that no longer runs is taken over at once by the next refresh
(consolidation.views `dead_holder`); a live holder's lease is still respected.

On the code before, the restarted service (a new holder id) found the view leased for
ten minutes and every scheduler run returned the old version (none at all here) while
the view stayed over its freshness budget. A restarted container's service runs under
the killed one's pid (PID 1) on the same host name: before the holder recorded its
process's start time, that lease looked like our own live process's and was waited out."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tiermem.consolidation.summarize import ExtractiveSummarizer
from tiermem.consolidation.views import VIEW_CLAIM_TTL_S, ViewMaintainer, dead_holder, lease_holder
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.redis_watchdog import process_start_ticks
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import WarmStore

CHILD = """
import time
from pathlib import Path
from tiermem.consolidation.summarize import ExtractiveSummarizer
from tiermem.consolidation.views import ViewMaintainer
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import WarmStore
tok = BpeTokenCounter(); cold = ColdStore(Path({db!r}), tokens=tok)
class Stuck(ExtractiveSummarizer):
    def summarize(self, turns, *, target_tokens):
        print("summarizing", flush=True); time.sleep(120)
m = ViewMaintainer(cold, WarmStore(cold), Stuck(tok), tok, target_tokens=120, max_turns_behind=1,
                   max_seconds_behind=1.0, label_grace_s=0)
m.refresh("c", "rolling")
"""


def _store(db: Path, tok: BpeTokenCounter) -> ColdStore:
    cold = ColdStore(db, tokens=tok)
    if not cold.turns("c"):
        cold.append_many("c", [Message(role="user" if i % 2 == 0 else "assistant",
                                       content=f"Line {i}: we talked about trains and rivers.") for i in range(12)])
    return cold


def _maintainer(cold: ColdStore, tok: BpeTokenCounter) -> ViewMaintainer:
    return ViewMaintainer(cold, WarmStore(cold), ExtractiveSummarizer(tok), tok, target_tokens=120,
                          max_turns_behind=1, max_seconds_behind=1.0, label_grace_s=0)


def test_a_killed_refreshers_lease_is_taken_over_at_once(tmp_path: Path) -> None:
    tok = BpeTokenCounter()
    db = tmp_path / "t.db"
    _store(db, tok).close()
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(CHILD.format(db=str(db)))],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "summarizing"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    cold = _store(db, tok)
    try:
        assert cold.view_holder("c", "rolling", "") is not None  # the premise: the dead one's lease
        view = _maintainer(cold, tok).refresh("c", "rolling")
        assert view is not None and view.end_position == 11
    finally:
        cold.close()


@pytest.mark.parametrize("form", [
    "now",      # host:maintainer~start:pid, as written now
    "pid first", # host:maintainer:pid:start, as 895ce72 wrote it
    "no start", # host:maintainer:pid, as written before the start time was recorded
])
def test_a_live_holders_lease_is_respected(tmp_path: Path, form: str) -> None:
    tok = BpeTokenCounter()
    cold = _store(tmp_path / "t.db", tok)
    live = subprocess.Popen(["sleep", "60"])
    try:
        host, start = socket.gethostname(), process_start_ticks(live.pid)
        other = {"now": f"{host}:someone~{start}:{live.pid}",
                 "pid first": f"{host}:someone:{live.pid}:{start}",
                 "no start": f"{host}:someone:{live.pid}"}[form]
        assert not dead_holder(other)
        assert cold.claim_view("c", "rolling", "", other, VIEW_CLAIM_TTL_S)
        assert _maintainer(cold, tok).refresh("c", "rolling") is None  # left to the live holder
        assert cold.view_holder("c", "rolling", "") == other
    finally:
        live.kill()
        live.wait()
        cold.close()


@pytest.mark.parametrize("form", [
    "now",      # host:maintainer~start:pid
    "pid first", # host:maintainer:pid:start
])
def test_a_lease_under_our_pid_from_an_earlier_start_is_taken_over(tmp_path: Path, form: str) -> None:
    # what a restarted container's PID 1 finds: the killed PID 1's lease, its pid ours
    started = process_start_ticks(os.getpid())
    assert started, "procfs gives this process's start time"
    tok = BpeTokenCounter()
    cold = _store(tmp_path / "t.db", tok)
    try:
        host, pid = socket.gethostname(), os.getpid()
        earlier = {"now": f"{host}:killed~{started - 1}:{pid}",
                   "pid first": f"{host}:killed:{pid}:{started - 1}"}[form]
        assert cold.claim_view("c", "rolling", "", earlier, VIEW_CLAIM_TTL_S)
        view = _maintainer(cold, tok).refresh("c", "rolling")
        assert view is not None and view.end_position == 11
        # while our own live lease, start time and all, is ours: claimed again, not lost
        mine = lease_holder("mine")
        assert mine.endswith(f"~{started}:{pid}") and not dead_holder(mine)
    finally:
        cold.close()


def test_the_pid_is_the_holders_last_field_where_earlier_versions_read_it() -> None:
    # b670316's reader took the last field for the pid; with the start time last, one of
    # its processes in a rolling upgrade saw our live lease's "pid" (a start time, no
    # such process) as dead and took the view over from us
    holder = lease_holder("mine")
    assert holder.rpartition(":")[2] == str(os.getpid())
    # and 895ce72's reader (host:maintainer:pid[:start]) finds the pid second as well
    assert holder.split(":")[2] == str(os.getpid())


def _in_own_pid_namespace() -> list[str] | None:
    # PID 1 of a fresh pid namespace, as a container's process runs (root, util-linux)
    cmd = ["unshare", "-p", "-f", "--mount-proc"]
    if shutil.which("unshare") is None:
        return None
    probe = subprocess.run([*cmd, sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True)
    return cmd if probe.returncode == 0 and probe.stdout.strip() == "1" else None


def test_a_restarted_pid_1_takes_over_the_killed_pid_1s_lease(tmp_path: Path) -> None:
    cmd = _in_own_pid_namespace()
    if cmd is None:
        pytest.skip("needs unshare -p (root) to run a process as PID 1 of its own namespace")
    tok = BpeTokenCounter()
    db = tmp_path / "t.db"
    _store(db, tok).close()
    child = subprocess.Popen([*cmd, sys.executable, "-c", textwrap.dedent(CHILD.format(db=str(db)))],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "summarizing"
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the whole container: unshare and its PID 1
        child.wait()
    cold = _store(db, tok)
    try:
        holder = cold.view_holder("c", "rolling", "")
        assert holder is not None and holder.rpartition(":")[2] == "1"  # the premise: PID 1's lease
    finally:
        cold.close()
    second = textwrap.dedent("""
        import os
        from pathlib import Path
        from tiermem.consolidation.summarize import ExtractiveSummarizer
        from tiermem.consolidation.views import ViewMaintainer
        from tiermem.tiers.cold import ColdStore
        from tiermem.tiers.tokens import BpeTokenCounter
        from tiermem.tiers.warm import WarmStore
        tok = BpeTokenCounter(); cold = ColdStore(Path({db!r}), tokens=tok)
        m = ViewMaintainer(cold, WarmStore(cold), ExtractiveSummarizer(tok), tok, target_tokens=120,
                           max_turns_behind=1, max_seconds_behind=1.0, label_grace_s=0)
        v = m.refresh("c", "rolling")
        print(os.getpid(), None if v is None else v.end_position)
    """).format(db=str(db))
    out = subprocess.run([*cmd, sys.executable, "-c", second], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "11"]  # PID 1 again, and it refreshed the view
