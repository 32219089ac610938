"""A warm view whose refresh keeps failing is backed off, not retried on every
scheduler run: FAILED_VIEW_BACKOFF_S after the first failure, doubling with each one in
a row up to FAILED_VIEW_BACKOFF_MAX_S, or the endpoint's Retry-After when longer (up to
RETRY_AFTER_MAX_S); a success resets it. The state is a `view_failures` row, so another
process's scheduler holds back alike; a refresh asked for by name
(`Memory.consolidate(conv)`) is not held back. Before, a view that failed (a 401
forever) cost retries+1 requests and a log line on every run (every 30 s).

Real stores (SQLite, and PostgreSQL where the rows live), the real local endpoint."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from llm_endpoint import LLMEndpoint, Reply, completion, serving
from pg_server import open_store, target  # noqa: F401  (pytest fixture)

from tiermem import Config, Memory
from tiermem.consolidation.scheduler import ConsolidationScheduler
from tiermem.consolidation.summarize import LLMSummarizer
from tiermem.consolidation.views import (
    FAILED_VIEW_BACKOFF_MAX_S,
    FAILED_VIEW_BACKOFF_S,
    RETRY_AFTER_MAX_S,
    ViewMaintainer,
    failed_view_backoff_s,
)
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed import Embedder
from tiermem.tiers.models import Message
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import WarmStore

T0 = 1_800_000_000.0
TURNS = 6
TARGET_TOKENS = 120
VIEWS_PER_RUN = 50
UNAUTHORIZED = Reply(401, json.dumps({"error": {"message": "Incorrect API key provided"}}).encode())
EPS_S = 1.0  # a second short of a backoff's end


def answer() -> Reply:
    return completion("Hotel in Lisbon, three nights [#0]")


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def endpoint() -> Iterator[LLMEndpoint]:
    yield from serving(lambda _r: UNAUTHORIZED)


def scheduler(store: ColdLog, endpoint: LLMEndpoint, counter: BpeTokenCounter, clock: Clock
              ) -> ConsolidationScheduler:
    llm = LLMSummarizer(endpoint.url, "m", api_key_env="", timeout_s=5.0, retries=0, tokens=counter)
    m = ViewMaintainer(store, WarmStore(store), llm, counter, target_tokens=TARGET_TOKENS, max_turns_behind=1,
                       max_seconds_behind=1e9, label_grace_s=0, clock=clock, backoff_clock=clock)
    return ConsolidationScheduler(m, interval_s=30.0, max_views_per_run=VIEWS_PER_RUN, clock=clock)


def fill(store: ColdLog, conv: str) -> None:
    store.append_batch(conv, [Message(role="user" if i % 2 == 0 else "assistant",
                                      content=f"Line {i}: we booked the hotel in Lisbon for three nights.",
                                      created_at=T0 + i) for i in range(TURNS)])


def rolling_requests(endpoint: LLMEndpoint) -> int:
    return len(endpoint.requests)


@pytest.mark.parametrize(("failures", "retry_after_s", "backoff_s"), [
    (1, None, FAILED_VIEW_BACKOFF_S),  # the first failure: the base wait
    (2, None, 2 * FAILED_VIEW_BACKOFF_S),  # doubling with each one in a row
    (7, None, 64 * FAILED_VIEW_BACKOFF_S),  # 30 x 64 s: 32 minutes, still under the cap
    (8, None, FAILED_VIEW_BACKOFF_MAX_S),  # 30 x 128 s is past the cap: an hour
    (10_000, None, FAILED_VIEW_BACKOFF_MAX_S),  # a view failing for months: still the cap, no overflow
    (1, 10.0, FAILED_VIEW_BACKOFF_S),  # a Retry-After shorter than the backoff changes nothing
    (1, 600.0, 600.0),  # a longer one is honoured
    (7, 7200.0, 7200.0),  # also past the cap
    (1, float("inf"), RETRY_AFTER_MAX_S),  # a date years ahead: a day at most
])
def test_the_backoff_grows_is_capped_and_honours_retry_after(
        failures: int, retry_after_s: float | None, backoff_s: float) -> None:
    assert failed_view_backoff_s(failures, retry_after_s) == backoff_s


def test_a_failing_view_is_retried_after_a_growing_backoff_in_every_process(
        target: tuple[str, str], counter: BpeTokenCounter, endpoint: LLMEndpoint) -> None:  # noqa: F811
    clock = Clock(T0 + 1000)
    store = open_store(target, counter)
    other = open_store(target, counter)  # another process's scheduler on the same database
    try:
        fill(store, "c")
        a, b = scheduler(store, endpoint, counter, clock), scheduler(other, endpoint, counter, clock)
        assert a.run_once() == 1 and rolling_requests(endpoint) == 1  # the constraints view; rolling failed
        for sched in (a, b, a):  # the next runs, here and in the other process
            assert sched.run_once() == 0
            assert rolling_requests(endpoint) == 1 and sched.stats.held_back == 1
        assert a.stats.lag_turns == TURNS  # still behind, and said so
        for backoff in (FAILED_VIEW_BACKOFF_S, 2 * FAILED_VIEW_BACKOFF_S, 4 * FAILED_VIEW_BACKOFF_S):
            clock.now += backoff - EPS_S
            assert b.run_once() == 0 and rolling_requests(endpoint) < 4
            clock.now += EPS_S
            before = rolling_requests(endpoint)
            assert b.run_once() == 0 and rolling_requests(endpoint) == before + 1
        assert store.view_failure("c", "rolling", "") == ("c", "rolling", "", 4, T0 + 1000,
                                                          clock.now + 8 * FAILED_VIEW_BACKOFF_S)
        # a success resets it: the next failure waits the base backoff again
        endpoint.reply = lambda _r: answer()
        clock.now += 8 * FAILED_VIEW_BACKOFF_S
        assert a.run_once() == 1 and store.view_failure("c", "rolling", "") is None
        assert a.maintainer.failing() == (0, None)
        endpoint.reply = lambda _r: UNAUTHORIZED
        store.append_batch("c", [Message(role="user", content="And a car, too.", created_at=T0 + TURNS),
                                 Message(role="assistant", content="Booked.", created_at=T0 + TURNS + 1)])
        a.run_once()
        failed = store.view_failure("c", "rolling", "")
        assert failed is not None and failed[3:] == (1, clock.now, clock.now + FAILED_VIEW_BACKOFF_S)
    finally:
        store.close()
        other.close()


@pytest.mark.parametrize("retry_after", [
    "600",  # delay-seconds
    "date",  # an HTTP date 600 s from now
])
def test_the_endpoints_retry_after_holds_the_view_back_longer(
        tmp_path: Path, counter: BpeTokenCounter, endpoint: LLMEndpoint, retry_after: str) -> None:
    header = retry_after
    if retry_after == "date":
        header = email.utils.formatdate(time.time() + 600, usegmt=True)
    endpoint.reply = lambda _r: Reply(429, b'{"error": "slow down"}', headers=(("Retry-After", header),))
    clock = Clock(T0 + 1000)
    store = ColdStore(tmp_path / "data" / "tiermem.db", tokens=counter)
    try:
        fill(store, "c")
        sched = scheduler(store, endpoint, counter, clock)
        sched.run_once()
        assert rolling_requests(endpoint) == 1
        clock.now += 600 - 2 * EPS_S  # far past the 30 s backoff, short of what the endpoint asked
        sched.run_once()
        assert rolling_requests(endpoint) == 1
        clock.now += 2 * EPS_S
        sched.run_once()
        assert rolling_requests(endpoint) == 2
    finally:
        store.close()


def test_a_refresh_by_hand_is_not_held_back(tmp_path: Path, embedder: Embedder, endpoint: LLMEndpoint) -> None:
    cfg = Config(data_dir=tmp_path / "data", summarizer="llm", llm_base_url=endpoint.url, llm_model="m",
                 llm_api_key_env="", llm_timeout_s=5.0, warm_max_turns_behind=1)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": "Book the hotel in Lisbon for three nights."})
        mem.append("c", {"role": "assistant", "content": "Which dates?"})  # over the budget of 1 turn
        mem.consolidate("c")
        assert rolling_requests(endpoint) == 1
        assert mem.consolidate() == 0 and rolling_requests(endpoint) == 1  # the sweep holds it back
        endpoint.reply = lambda _r: answer()
        mem.consolidate("c")  # named: refreshed now, and the failure state goes
        assert rolling_requests(endpoint) == 2 and mem.warm.latest("c", "rolling") is not None
        assert mem.cold.view_failure("c", "rolling", "") is None


def test_an_erasure_takes_the_views_failure_state(
        target: tuple[str, str], counter: BpeTokenCounter) -> None:  # noqa: F811
    store = open_store(target, counter)
    try:
        fill(store, "c")
        fill(store, "d")
        for conv in ("c", "d"):
            store.put_view_failure((conv, "rolling", "", 3, T0, T0 + 120))
        store.delete_conversation("c")
        assert store.view_failure("c", "rolling", "") is None
        assert store.view_failure_stats() == (1, T0) and store.views_held_back(T0) == [("d", "rolling", "")]
    finally:
        store.close()


def test_a_schema_24_database_upgrades_and_backs_off(tmp_path: Path, counter: BpeTokenCounter,
                                                     endpoint: LLMEndpoint) -> None:
    from tiermem.tiers.schema import MIGRATIONS, sqlite3

    db = tmp_path / "data" / "tiermem.db"
    store = ColdStore(db, tokens=counter)
    fill(store, "c")
    store.close()
    conn = sqlite3.connect(str(db), isolation_level=None)
    try:  # the file as tiermem with schema 24 left it: no view_failures
        conn.execute("DROP TABLE view_failures")
        conn.execute(f"PRAGMA user_version = {[m.__name__ for m in MIGRATIONS].index('m025_view_failures')}")
    finally:
        conn.close()
    clock = Clock(T0 + 1000)
    store = ColdStore(db, tokens=counter)
    try:
        assert store.version == len(MIGRATIONS)
        sched = scheduler(store, endpoint, counter, clock)
        sched.run_once()
        sched.run_once()
        assert rolling_requests(endpoint) == 1 and store.view_failure_stats() == (1, clock.now)
    finally:
        store.close()
