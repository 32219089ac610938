"""A write behind another process's SQLite transaction answers 503 with a Retry-After
(tests/test_service_busy.py): the client raises `ServiceUnavailable` carrying that
delay, with nothing written; with `retries` on it waits the delay and sends again, and
succeeds once the lock is gone; a Retry-After over `max_retry_wait_s` is raised at once.
The lock is a real one, held by another process on the same database file.

Fails on the code before: there was no `tiermem.client`."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_helpers import CONV, NS, TRIP, served
from cold_helpers import locked, release
from service_helpers import TOKEN_ACME

from tiermem.client import Client
from tiermem.errors import ServiceUnavailable
from tiermem.service.handlers import STORAGE_BUSY_RETRY_AFTER_S
from tiermem.tiers.embed_onnx import FastEmbedder

BUSY_TIMEOUT_MS = 200  # how long the server's write waits for the lock before it answers 503
RELEASE_AFTER_S = 0.5  # the other process ends its transaction this long after the first attempt starts
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
    with Client(url, token=TOKEN_ACME, namespace=NS, retries=2) as client, locked(db) as proc:
        threading.Timer(RELEASE_AFTER_S, release, args=(proc,)).start()
        start = time.monotonic()
        position = client.append(CONV, LATE)
        waited = time.monotonic() - start
        assert position == len(TRIP)
        assert waited >= STORAGE_BUSY_RETRY_AFTER_S  # the first attempt was refused; the client waited as told
        assert [m.body for m in client.history(CONV)] == [*TRIP, LATE]  # written once


def test_a_retry_after_longer_than_the_client_waits_is_raised_at_once(url_db: tuple[str, Path]) -> None:
    url, db = url_db
    with Client(url, token=TOKEN_ACME, namespace=NS, retries=2, max_retry_wait_s=STORAGE_BUSY_RETRY_AFTER_S / 2
                ) as client, locked(db):
        start = time.monotonic()
        with pytest.raises(ServiceUnavailable):
            client.append(CONV, LATE)
        assert time.monotonic() - start < STORAGE_BUSY_RETRY_AFTER_S  # no wait, no second attempt
