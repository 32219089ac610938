"""A write behind another process's SQLite transaction answers 503 with a Retry-After
(tests/test_service_busy.py): the client raises `ServiceUnavailable` carrying that
delay, with nothing written; with `retries` on it waits the delay and sends again, and
succeeds once the lock is gone; a Retry-After over `max_retry_wait_s` is raised at once.
The lock is a real one, held by another process on the same database file.

Fails on the code before: there was no `tiermem.client`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from client_helpers import CONV, NS, TRIP, served
from cold_helpers import HOLDER_EXIT_TIMEOUT_S, locked, release
from service_helpers import TOKEN_ACME

from tiermem.client import Client
from tiermem.errors import ServiceUnavailable
from tiermem.service.handlers import STORAGE_BUSY_RETRY_AFTER_S
from tiermem.tiers.embed_onnx import FastEmbedder

BUSY_TIMEOUT_MS = 200  # how long the server's write waits for the lock before it answers 503
LATE = {"role": "user", "content": "behind the lock"}


@pytest.fixture
def url_db(tmp_path: Path, embedder: FastEmbedder) -> Iterator[tuple[str, Path]]:
    with served(tmp_path / "data", embedder, busy_timeout_ms=BUSY_TIMEOUT_MS) as (u, mem):
        yield u, mem.config.db_path


def test_a_busy_write_raises_with_the_retry_delay_and_writes_nothing(url_db: tuple[str, Path]) -> None:
    url, db = url_db
    with Client(url, token=TOKEN_ACME, namespace=NS) as client:
        with locked(db), pytest.raises(ServiceUnavailable) as got:
            client.append(CONV, LATE)  # retries are off by default
        assert got.value.status == 503 and got.value.retry_after_s == STORAGE_BUSY_RETRY_AFTER_S
        assert "busy" in str(got.value) and isinstance(got.value, ConnectionError)
        assert [m.body for m in client.history(CONV)] == TRIP


def test_with_retries_a_busy_write_succeeds_once_the_lock_is_released(url_db: tuple[str, Path]) -> None:
    url, db = url_db
    refusals: list[int] = []
    with locked(db) as proc:
        def release_on_first_refusal(response: httpx.Response) -> None:
            # the lock ends only once the server has refused the first attempt, so the
            # retry is what succeeds however slowly this machine runs (a timer raced it)
            if response.status_code == httpx.codes.SERVICE_UNAVAILABLE and not refusals:
                refusals.append(response.status_code)
                release(proc)
                proc.wait(timeout=HOLDER_EXIT_TIMEOUT_S)  # the lock is gone before the retry

        with httpx.Client(event_hooks={"response": [release_on_first_refusal]}) as http, \
                Client(url, token=TOKEN_ACME, namespace=NS, retries=2, http_client=http) as client:
            start = time.monotonic()
            position = client.append(CONV, LATE)
            waited = time.monotonic() - start
            assert refusals == [503]  # the first attempt was refused
            assert position == len(TRIP)
            assert waited >= STORAGE_BUSY_RETRY_AFTER_S  # the client waited as told before the retry
            assert [m.body for m in client.history(CONV)] == [*TRIP, LATE]  # written once


def test_a_retry_after_longer_than_the_client_waits_is_raised_at_once(url_db: tuple[str, Path]) -> None:
    url, db = url_db
    with Client(url, token=TOKEN_ACME, namespace=NS, retries=2, max_retry_wait_s=STORAGE_BUSY_RETRY_AFTER_S / 2
                ) as client, locked(db):
        start = time.monotonic()
        with pytest.raises(ServiceUnavailable):
            client.append(CONV, LATE)
        assert time.monotonic() - start < STORAGE_BUSY_RETRY_AFTER_S  # no wait, no second attempt
