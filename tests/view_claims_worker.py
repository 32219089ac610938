"""A child process of tests/test_view_claims.py: one refresher of the warm views of a
shared SQLite file, as a second service worker or `consolidate --watch` would be. Its
summarizer is the offline one, slowed down and recording every call in a file, so the
test can count how often each view was summarized across both processes.

    python view_claims_worker.py DB CALLS_FILE BARRIER_DIR INDEX PEERS CONV...
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tiermem.consolidation.summarize import ExtractiveSummarizer, SourceTurn
from tiermem.consolidation.views import ViewMaintainer
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import Sentence, WarmStore

SUMMARIZE_S = 0.3  # seconds one summary takes: long enough for the peer to arrive meanwhile
BARRIER_TIMEOUT_S = 60.0
BARRIER_POLL_S = 0.01
TARGET_TOKENS = 120


class SlowRecording:
    """The extractive summarizer, one line per call appended to `calls` (O_APPEND: the
    two processes' lines do not mix)."""

    def __init__(self, inner: ExtractiveSummarizer, calls: Path) -> None:
        self.inner, self.calls, self.name = inner, calls, inner.name
        self.conversation = ""  # the one being refreshed (this process refreshes one at a time)

    def summarize(self, turns: Sequence[SourceTurn], *, target_tokens: int) -> list[Sentence]:
        time.sleep(SUMMARIZE_S)
        out = self.inner.summarize(turns, target_tokens=target_tokens)
        fd = os.open(self.calls, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{self.conversation} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
        return out


def main(db: str, calls: str, barrier: str, index: str, peers: str, *convs: str) -> None:
    tokens = BpeTokenCounter()
    cold = ColdStore(Path(db), tokens=tokens)
    warm = WarmStore(cold)
    summarizer = SlowRecording(ExtractiveSummarizer(tokens), Path(calls))
    m = ViewMaintainer(cold, warm, summarizer, tokens,
                       target_tokens=TARGET_TOKENS, max_turns_behind=1, max_seconds_behind=1.0, label_grace_s=0)
    # start together: both are ready (imports, the file opened) before either refreshes
    Path(barrier, f"ready-{index}").touch()
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while len(list(Path(barrier).glob("ready-*"))) < int(peers):
        if time.monotonic() > deadline:
            raise SystemExit("the peer never came")
        time.sleep(BARRIER_POLL_S)
    for conv in convs:
        summarizer.conversation = conv
        m.refresh(conv, "rolling")
    cold.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
