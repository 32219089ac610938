"""A view's lease expires by the database's clock, not the claiming host's: hosts that
share a PostgreSQL log may disagree by minutes, and a host whose clock ran
VIEW_CLAIM_TTL_S ahead took another host's live lease (its summarizer, perhaps a paid
LLM, then ran twice for the view). On the code before, `claim_view` compared the
lease's expiry with the client's `time.time()`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import fresh_schema, pg_url  # noqa: F401  (pytest fixture)

from tiermem.consolidation.views import VIEW_CLAIM_TTL_S
from tiermem.tiers import dialect
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter

SKEW_S = VIEW_CLAIM_TTL_S + 60.0  # past the lease's whole life


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path, counter: BpeTokenCounter) -> Iterator[ColdLog]:
    if request.param == "sqlite":
        s: ColdLog = ColdStore(tmp_path / "t.db", tokens=counter)
    else:
        from tiermem.tiers.postgres import PostgresStore

        s = PostgresStore(request.getfixturevalue("pg_url"), tokens=counter, schema=fresh_schema())
    yield s
    s.close()


def test_a_host_whose_clock_runs_ahead_does_not_take_a_live_lease(
        store: ColdLog, monkeypatch: pytest.MonkeyPatch) -> None:
    assert store.claim_view("c", "rolling", "", "host-a:m1:100:1", VIEW_CLAIM_TTL_S)
    real = time.time
    monkeypatch.setattr(dialect.time, "time", lambda: real() + SKEW_S)
    assert not store.claim_view("c", "rolling", "", "host-b:m2:200:1", VIEW_CLAIM_TTL_S)
    assert store.view_holder("c", "rolling", "") == "host-a:m1:100:1"
    # while a lease that has run out by the database's clock is free to it
    assert store.claim_view("d", "rolling", "", "host-a:m1:100:1", -1.0)
    assert store.claim_view("d", "rolling", "", "host-b:m2:200:1", VIEW_CLAIM_TTL_S)


def test_a_lease_taken_by_a_host_whose_clock_runs_behind_lives_its_whole_ttl(
        store: ColdLog, monkeypatch: pytest.MonkeyPatch) -> None:
    real = time.time
    monkeypatch.setattr(dialect.time, "time", lambda: real() - SKEW_S)
    assert store.claim_view("c", "rolling", "", "host-b:m2:200:1", VIEW_CLAIM_TTL_S)
    monkeypatch.setattr(dialect.time, "time", real)
    # a host with the right time must not find it already expired
    assert not store.claim_view("c", "rolling", "", "host-a:m1:100:1", VIEW_CLAIM_TTL_S)
    assert store.view_holder("c", "rolling", "") == "host-b:m2:200:1"
