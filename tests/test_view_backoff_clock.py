"""A failing warm view's backoff is timed by the database's clock, as its lease's expiry
is: hosts sharing a log whose clocks disagree hold it back alike, and agree on how long
it has been failing. Before, each process wrote `retry_at`/`first_at` by its own clock
and compared them with its own: a host an hour behind wrote a backoff every other host
found over already (the view retried on every run there), one an hour ahead held it
back for an hour and a half minute everywhere, and `oldest_failure_age_s` read an hour
off.

Real stores (SQLite; PostgreSQL, where hosts really share the database), the real local
endpoint; the process clock is the maintainer's `clock`, set to run off."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from llm_endpoint import LLMEndpoint, Reply, serving
from pg_server import open_store, target  # noqa: F401  (pytest fixture)

from tiermem.consolidation.summarize import LLMSummarizer
from tiermem.consolidation.views import FAILED_VIEW_BACKOFF_S, ViewMaintainer
from tiermem.tiers.models import Message
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import WarmStore

SKEW_S = 3600.0  # a host's clock an hour off
SLACK_S = 5.0  # the test's own time between the failure and the reads
TURNS = 4
UNAUTHORIZED = Reply(401, json.dumps({"error": {"message": "Incorrect API key provided"}}).encode())


@pytest.fixture
def endpoint() -> Iterator[LLMEndpoint]:
    yield from serving(lambda _r: UNAUTHORIZED)


def maintainer(store: ColdLog, endpoint: LLMEndpoint, counter: BpeTokenCounter, skew_s: float) -> ViewMaintainer:
    llm = LLMSummarizer(endpoint.url, "m", api_key_env="", timeout_s=5.0, retries=0, tokens=counter)
    return ViewMaintainer(store, WarmStore(store), llm, counter, target_tokens=120, max_turns_behind=1,
                          max_seconds_behind=1e9, label_grace_s=0, clock=lambda: time.time() + skew_s)


@pytest.mark.parametrize("skew_s", [
    -SKEW_S,  # the failing host's clock runs behind: its backoff was over everywhere at once
    SKEW_S,  # ahead: the view was held back for an hour more
])
def test_hosts_whose_clocks_disagree_hold_a_failing_view_back_alike(
        target: tuple[str, str], counter: BpeTokenCounter, endpoint: LLMEndpoint, skew_s: float) -> None:  # noqa: F811
    store, other = open_store(target, counter), open_store(target, counter)
    try:
        store.append_batch("c", [Message(role="user", content=f"Line {i}: the hotel in Lisbon.",
                                         created_at=time.time() + i) for i in range(TURNS)])
        off, right = maintainer(store, endpoint, counter, skew_s), maintainer(other, endpoint, counter, 0.0)
        off.refresh("c", "rolling")
        assert len(endpoint.requests) == 1  # it failed: 401
        failed = store.view_failure("c", "rolling", "")
        assert failed is not None
        now = store.database_now()
        assert now - SLACK_S <= failed[4] <= now  # began now, by the database's clock
        assert 0.0 < failed[5] - now <= FAILED_VIEW_BACKOFF_S  # and is held back for the base backoff
        for m in (off, right):  # both hosts see the same
            assert m.held_back() == {("c", "rolling", "")}
            count, age = m.failing()
            assert count == 1 and age is not None and 0.0 <= age < SLACK_S
    finally:
        store.close()
        other.close()
