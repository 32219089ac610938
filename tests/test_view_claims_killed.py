"""A refresher killed mid-refresh does not hold its view for VIEW_CLAIM_TTL_S: the lease
of a process of this host that no longer runs is taken over at once by the next refresh
(consolidation.views `dead_holder`); a live holder's lease is still respected.

On the code before, the restarted service (a new holder id) found the view leased for
ten minutes and every scheduler run returned the old version (none at all here) while
the view stayed over its freshness budget."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from tiermem.consolidation.summarize import ExtractiveSummarizer
from tiermem.consolidation.views import VIEW_CLAIM_TTL_S, ViewMaintainer
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
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


def test_a_live_holders_lease_is_respected(tmp_path: Path) -> None:
    tok = BpeTokenCounter()
    cold = _store(tmp_path / "t.db", tok)
    live = subprocess.Popen(["sleep", "60"])
    try:
        other = f"{socket.gethostname()}:someone:{live.pid}"
        assert cold.claim_view("c", "rolling", "", other, VIEW_CLAIM_TTL_S)
        assert _maintainer(cold, tok).refresh("c", "rolling") is None  # left to the live holder
        assert cold.view_holder("c", "rolling", "") == other
    finally:
        live.kill()
        live.wait()
        cold.close()
