"""A refresh's lease on its view lasts as long as the refresh can: `VIEW_CLAIM_TTL_S`
past the summarizer's own bound on one call (`LLMSummarizer.call_bound_s`: every
attempt to its `timeout_s`, plus the backoff), renewed before each chunk of a backlog.

Before, the lease was a flat VIEW_CLAIM_TTL_S (600 s) while llm_timeout_s may be up to
3,600 s: a refresh still waiting on the endpoint past it lost its lease, and a second
process (another worker's scheduler) claimed the view and sent the same paid request
again. The extractive summarizer, which waits on nothing, keeps the flat lease."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from llm_endpoint import LLMEndpoint, Reply, completion, serving

from tiermem.consolidation import views
from tiermem.consolidation.summarize import ExtractiveSummarizer, LLMSummarizer, SourceTurn, call_bound_s
from tiermem.consolidation.views import VIEW_CLAIM_TTL_S, ViewMaintainer
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import Sentence, WarmStore

WORKER = Path(__file__).with_name("view_lease_llm_worker.py")
T0 = 1_800_000_000.0
TURNS = 6
# the lease's slack in the workers, standing in for VIEW_CLAIM_TTL_S's 600 s: the
# endpoint answers later than that, as a slow model answers past 600 s in production
SHORT_CLAIM_TTL_S = 1.0
ANSWER_S = 3.0  # the endpoint's time to answer: past the short lease, inside the timeout
TIMEOUT_S = 20.0  # the workers' llm timeout (one attempt)
WORKER_TIMEOUT_S = 120
ARRIVAL_POLL_S = 0.02
TARGET_TOKENS = 120


def fill(cold: ColdStore, conv: str, turns: int = TURNS) -> None:
    cold.append_many(conv, [Message(role="user" if i % 2 == 0 else "assistant",
                                    content=f"Line {i}: we booked the hotel in Lisbon for three nights.",
                                    created_at=T0 + i) for i in range(turns)])


@pytest.fixture
def slow_endpoint() -> Iterator[LLMEndpoint]:
    def reply(_r: object) -> Reply:
        time.sleep(ANSWER_S)
        return completion("Hotel in Lisbon, three nights [#0]")

    yield from serving(reply)


def test_a_second_process_does_not_rerun_a_refresh_that_outlives_the_lease_slack(
        tmp_path: Path, counter: BpeTokenCounter, slow_endpoint: LLMEndpoint) -> None:
    db = tmp_path / "data" / "tiermem.db"
    store = ColdStore(db, tokens=counter)
    fill(store, "c")
    store.close()
    cmd = [sys.executable, str(WORKER), str(db), slow_endpoint.url, str(SHORT_CLAIM_TTL_S), str(TIMEOUT_S), "c"]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    while not slow_endpoint.requests:  # the first refresh is waiting on the endpoint
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(ARRIVAL_POLL_S)
    time.sleep(2 * SHORT_CLAIM_TTL_S)  # past the lease's slack, the answer still to come
    second = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outs = []
    for p in (first, second):
        out, err = p.communicate(timeout=WORKER_TIMEOUT_S)
        assert p.returncode == 0, err
        outs.append(out.strip())
    # one paid request; the second process answered what was there (nothing yet, or v1)
    assert len(slow_endpoint.requests) == 1
    assert outs[0] == "1" and outs[1] in ("0", "1")
    store = ColdStore(db, tokens=counter)
    try:
        assert WarmStore(store).versions("c", "rolling") == [1]
    finally:
        store.close()


@pytest.mark.parametrize(("timeout_s", "retries", "backoff_s", "bound_s"), [
    (30.0, 0, 0.5, 30.0),  # one attempt: its timeout
    (30.0, 2, 0.5, 91.5),  # three attempts, 0.5 + 1 s of backoff between them
    (3600.0, 2, 20.0, 10850.0),  # the largest llm_timeout_s; backoff 20 s, then 40 s capped at 30 s
])
def test_the_llm_summarizers_bound_is_every_attempt_and_its_backoff(
        counter: BpeTokenCounter, timeout_s: float, retries: int, backoff_s: float, bound_s: float) -> None:
    s = LLMSummarizer("http://127.0.0.1:9/v1", "m", timeout_s=timeout_s, retries=retries, backoff_s=backoff_s,
                      tokens=counter)
    assert call_bound_s(s) == pytest.approx(bound_s)


class Watching:
    """A summarizer (the extractive one, or an LLM's stand-in with a bound) that reads
    its view's lease while it runs: (seconds it has left by the database's clock)."""

    def __init__(self, inner: ExtractiveSummarizer, db: Path, bound_s: float | None) -> None:
        self.inner, self.db, self.name = inner, db, inner.name
        if bound_s is not None:
            self.call_bound_s = bound_s
        self.left: list[float] = []

    def summarize(self, turns: Sequence[SourceTurn], *, target_tokens: int) -> list[Sentence]:
        from tiermem.tiers.schema import sqlite3

        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as c:
            (left,) = c.execute("SELECT expires_at - unixepoch('subsec') FROM view_claims").fetchone()
        self.left.append(float(left))
        return self.inner.summarize(turns, target_tokens=target_tokens)


OTHER = "another-host:m~1:1"  # a live holder elsewhere
SLACK_S = 5.0  # the store's work between the claim and the summarizer's call (and float rounding)
CHUNK_TOKENS = 20  # a backlog of several chunks


@pytest.mark.parametrize(("bound_s", "lease_s"), [
    (None, VIEW_CLAIM_TTL_S),  # the extractive summarizer: the flat lease, as before
    (3000.0, VIEW_CLAIM_TTL_S + 3000.0),  # a summarizer that may wait 3,000 s on a model
])
def test_the_lease_covers_each_chunks_call(cold: ColdStore, counter: BpeTokenCounter, bound_s: float | None,
                                           lease_s: float) -> None:
    fill(cold, "c", turns=12)
    s = Watching(ExtractiveSummarizer(counter), cold.path, bound_s)
    m = ViewMaintainer(cold, WarmStore(cold), s, counter, target_tokens=TARGET_TOKENS, max_turns_behind=1,
                       max_seconds_behind=1.0, label_grace_s=0, chunk_tokens=CHUNK_TOKENS)
    assert m.refresh("c", "rolling") is not None
    assert len(s.left) > 1  # several chunks: the lease was renewed before each
    assert all(abs(left - lease_s) < SLACK_S for left in s.left), s.left


def test_a_refresh_whose_lease_passed_to_another_stops_without_a_failure(
        cold: ColdStore, counter: BpeTokenCounter) -> None:
    fill(cold, "c", turns=12)
    calls = threading.local()

    class TakenMidway(ExtractiveSummarizer):
        def summarize(self, turns: Sequence[SourceTurn], *, target_tokens: int) -> list[Sentence]:
            # the first chunk ran past the lease: another refresher took the view
            calls.n = getattr(calls, "n", 0) + 1
            mine = cold.view_holder("c", "rolling", "")
            cold.claim_view("c", "rolling", "", OTHER, views.VIEW_CLAIM_TTL_S, replacing=mine)
            return super().summarize(turns, target_tokens=target_tokens)

    m = ViewMaintainer(cold, WarmStore(cold), TakenMidway(counter), counter, target_tokens=TARGET_TOKENS,
                       max_turns_behind=1, max_seconds_behind=1.0, label_grace_s=0, chunk_tokens=CHUNK_TOKENS)
    assert m.refresh("c", "rolling") is None  # nothing written: the new holder refreshes it
    assert calls.n == 1 and m.failures == 0 and WarmStore(cold).errors("c", "rolling") == []
    assert cold.view_holder("c", "rolling", "") == OTHER  # its lease, untouched
