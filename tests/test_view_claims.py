"""One refresh per view and stretch of log, also with several processes on one file
(two service workers each with its scheduler, or `serve` beside `consolidate --watch`).

- A refresh takes the view's lease (`ColdLog.claim_view`, a `view_claims` row with an
  expiry) and reads the view's frontier under it: the second process finds the view
  covered, or the lease held, and never runs the summarizer (perhaps a paid LLM) for
  what the first already summarized. A lease whose holder died expires.
- `put_summary` stores the very version again (same range, summarizer and sentences)
  never: the newest is returned and no second fold written, so duplicates cannot push
  real versions out under `keep_versions`. A version over the same range that says
  something else (a full refresh after a relabeling) is still written.
- Leases belong to their conversation: an erasure takes them with it.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from tiermem.consolidation.summarize import ExtractiveSummarizer, SourceTurn
from tiermem.consolidation.views import ViewMaintainer
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import Sentence, SummaryView, WarmStore

WORKER = Path(__file__).with_name("view_claims_worker.py")
T0 = 1_800_000_000.0
TURNS = 12
CONVERSATIONS = 4
WORKERS = 2
WORKER_TIMEOUT_S = 120
LEASE_S = 60.0  # seconds: live for the whole test
TARGET_TOKENS = 120


class Counting:
    """The offline summarizer, counting its calls."""

    def __init__(self, tokens: BpeTokenCounter) -> None:
        self.inner = ExtractiveSummarizer(tokens)
        self.name = self.inner.name
        self.calls = 0

    def summarize(self, turns: Sequence[SourceTurn], *, target_tokens: int) -> list[Sentence]:
        self.calls += 1
        return self.inner.summarize(turns, target_tokens=target_tokens)


def fill(cold: ColdStore, conv: str) -> None:
    cold.append_many(conv, [Message(role="user" if i % 2 == 0 else "assistant",
                                    content=f"Line {i} of {conv}: we talked about trains and rivers.",
                                    created_at=T0 + i) for i in range(TURNS)])


def maintainer(cold: ColdStore, warm: WarmStore, summarizer: Counting, counter: BpeTokenCounter) -> ViewMaintainer:
    return ViewMaintainer(cold, warm, summarizer, counter, target_tokens=TARGET_TOKENS, max_turns_behind=1,
                          max_seconds_behind=1.0, label_grace_s=0)


def folds(db: Path, conv: str) -> list[int]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        return [int(r[0]) for r in c.execute("SELECT position FROM checkpoints WHERE conversation_id = ?", (conv,))]


def test_the_same_version_again_is_not_stored_nor_folded_twice(cold: ColdStore) -> None:
    fill(cold, "c")
    warm = WarmStore(cold, keep_versions=2)
    view = SummaryView("c", "rolling", "", 0, 0, TURNS - 1, (Sentence("we talked about trains", (0,)),), 0,
                       "extractive", T0)
    first = warm.put(view, fold=True)
    again = warm.put(view, fold=True)  # a second process's refresh of the same log
    assert (first.version, again.version) == (1, 1) and warm.versions("c", "rolling") == [1]
    assert folds(cold.path, "c") == [TURNS - 1]
    # control: the same range saying something else is a new version (a full refresh)
    other = warm.put(SummaryView("c", "rolling", "", 0, 0, TURNS - 1, (Sentence("and rivers", (1,)),), 0,
                                 "extractive", T0), fold=True)
    assert other.version == 2 and warm.versions("c", "rolling") == [1, 2]


def test_a_live_lease_of_another_holder_keeps_the_summarizer_from_running(
        cold: ColdStore, counter: BpeTokenCounter) -> None:
    fill(cold, "c")
    summarizer = Counting(counter)
    m = maintainer(cold, WarmStore(cold), summarizer, counter)
    assert cold.claim_view("c", "rolling", "", "another process", LEASE_S)
    assert m.refresh("c", "rolling") is None and summarizer.calls == 0  # nothing yet: it is being made
    cold.release_view("c", "rolling", "", "another process")
    view = m.refresh("c", "rolling")
    assert view is not None and view.end_position == TURNS - 1 and summarizer.calls == 1


def test_a_lease_whose_holder_died_expires(cold: ColdStore, counter: BpeTokenCounter) -> None:
    fill(cold, "c")
    summarizer = Counting(counter)
    m = maintainer(cold, WarmStore(cold), summarizer, counter)
    assert cold.claim_view("c", "rolling", "", "a process that died", 0.0)
    time.sleep(0.01)  # past its expiry
    assert m.refresh("c", "rolling") is not None and summarizer.calls == 1


def test_an_erasure_takes_the_conversations_leases(cold: ColdStore) -> None:
    fill(cold, "c")
    assert cold.claim_view("c", "session", "trip-planning", "a process that died", LEASE_S)
    cold.delete_conversation("c")
    with sqlite3.connect(f"file:{cold.path}?mode=ro", uri=True) as c:
        assert c.execute("SELECT COUNT(*) FROM view_claims").fetchone()[0] == 0


def test_two_processes_summarize_each_view_once(tmp_path: Path, counter: BpeTokenCounter) -> None:
    db = tmp_path / "data" / "tiermem.db"
    convs = [f"c{i}" for i in range(CONVERSATIONS)]
    store = ColdStore(db, tokens=counter)
    for conv in convs:
        fill(store, conv)
    store.close()
    calls, barrier = tmp_path / "calls", tmp_path / "barrier"
    barrier.mkdir()
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(db), str(calls), str(barrier), str(i),
                               str(WORKERS), *convs], stderr=subprocess.PIPE, text=True)
             for i in range(WORKERS)]
    for p in procs:
        _out, err = p.communicate(timeout=WORKER_TIMEOUT_S)
        assert p.returncode == 0, err
    made = Counter(line.split()[0] for line in calls.read_text().splitlines())
    assert made == Counter({conv: 1 for conv in convs})
    store = ColdStore(db, tokens=counter)
    try:
        warm = WarmStore(store)
        assert {conv: warm.versions(conv, "rolling") for conv in convs} == {conv: [1] for conv in convs}
        assert {conv: folds(db, conv) for conv in convs} == {conv: [TURNS - 1] for conv in convs}
    finally:
        store.close()
