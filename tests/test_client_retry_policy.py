"""Which 503s the client sends again (`retries`): a read on any; a write only on one whose
body says `"written": false` (the store refused before writing: busy, read-only), never
on one that cannot say (a starting service; a lost database connection, after which the
COMMIT may have landed), except an append to a server that honours idempotency keys,
sent again on any under its key; and `health()` answers its own 503 ("starting") at once, as its
result. A real service on a real SQLite file: "starting" is its runtime without a Memory
yet, busy a real lock held by another process.

Fail on the code before: the busy 503 said nothing of what was written; a write on a
starting service was sent again after its Retry-After; `health()` waited out
Retry-After `retries` times before answering "starting"."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from client_helpers import CONV, NS, TRIP
from cold_helpers import locked
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, bearer, serve_app

from tiermem import Config, Memory
from tiermem.client import Client
from tiermem.errors import ServiceUnavailable
from tiermem.service import NAMESPACE_HEADER, create_app
from tiermem.service.runtime import STARTING_RETRY_AFTER_S, Runtime
from tiermem.tiers.embed_onnx import FastEmbedder

BUSY_TIMEOUT_MS = 200  # how long the server's write waits for the lock before it answers 503
RETRIES = 2
READY_AFTER_S = 0.3  # a "starting" service gets its Memory this long after the read is sent
LATE = {"role": "user", "content": "sent while the service starts"}


@contextmanager
def service(data_dir: Path, embedder: FastEmbedder) -> Iterator[tuple[str, Memory, Runtime]]:
    """The service over a Memory holding `TRIP` as `CONV` in `NS`, with its runtime, whose
    `memory` a test sets to None to make it "starting"."""
    cfg = Config(data_dir=data_dir, auth_tokens=SCOPED_TOKENS, busy_timeout_ms=BUSY_TIMEOUT_MS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many(CONV, TRIP, namespace=NS)
        app = create_app(cfg, mem, start_scheduler=False)
        with serve_app(app) as url:
            yield url, mem, app.state.runtime


@pytest.fixture
def served(tmp_path: Path, embedder: FastEmbedder) -> Iterator[tuple[str, Memory, Runtime]]:
    with service(tmp_path / "data", embedder) as got:
        yield got


@contextmanager
def starting(runtime: Runtime) -> Iterator[None]:
    mem, runtime.memory = runtime.memory, None
    try:
        yield
    finally:
        runtime.memory = mem


def test_health_answers_starting_at_once(served: tuple[str, Memory, Runtime]) -> None:
    url, _mem, runtime = served
    with Client(url, retries=RETRIES) as client, starting(runtime):
        began = time.monotonic()
        got = client.health()
        assert time.monotonic() - began < STARTING_RETRY_AFTER_S  # before: RETRIES waits of Retry-After
    assert got["status"] == "starting"


def test_a_write_that_may_have_landed_is_not_sent_again(served: tuple[str, Memory, Runtime]) -> None:
    url, _mem, runtime = served
    with Client(url, token=TOKEN_ACME, namespace=NS, retries=RETRIES) as client:
        # a write without an idempotency key (an append has one: the test below)
        with starting(runtime), pytest.raises(ServiceUnavailable) as got:
            began = time.monotonic()
            client.checkpoint(CONV, "the trip so far", 1)
        assert time.monotonic() - began < STARTING_RETRY_AFTER_S  # raised at once, not sent again
        assert got.value.written is None and got.value.retry_after_s == STARTING_RETRY_AFTER_S
        assert client.active(CONV).checkpoint is None


def test_an_append_is_sent_again_on_any_503_under_its_key(served: tuple[str, Memory, Runtime]) -> None:
    # the server honours idempotency keys (/v1/limits): the client's made-up key makes the
    # retry safe, whether or not the first was stored (tests/test_client_idempotency.py)
    url, mem, runtime = served
    with Client(url, token=TOKEN_ACME, namespace=NS, retries=RETRIES) as client:
        with starting(runtime):
            ready = threading.Timer(READY_AFTER_S, setattr, args=(runtime, "memory", mem))
            ready.start()
            position = client.append(CONV, LATE)  # "starting" first; the retry finds it ready
            ready.join()
        assert position == len(TRIP) and [m.body for m in client.history(CONV)] == [*TRIP, LATE]


def test_a_read_is_sent_again_on_any_503(served: tuple[str, Memory, Runtime]) -> None:
    url, mem, runtime = served
    with Client(url, token=TOKEN_ACME, namespace=NS, retries=RETRIES) as client:
        with starting(runtime):
            ready = threading.Timer(READY_AFTER_S, setattr, args=(runtime, "memory", mem))
            ready.start()
            history = client.history(CONV)  # the first answer is "starting"; the retry finds it ready
            ready.join()
        assert [m.body for m in history] == TRIP


def test_a_busy_refusal_says_nothing_was_written(served: tuple[str, Memory, Runtime]) -> None:
    url, mem, _runtime = served
    with locked(mem.config.db_path):
        raw = httpx.post(f"{url}/v1/conversations/{CONV}/messages", json=LATE,
                         headers={**bearer(TOKEN_ACME), NAMESPACE_HEADER: NS})
        with Client(url, token=TOKEN_ACME, namespace=NS) as client, pytest.raises(ServiceUnavailable) as got:
            client.append(CONV, LATE)
    body: dict[str, Any] = raw.json()
    assert raw.status_code == 503 and body["written"] is False, body
    assert got.value.written is False  # so a client with retries sends it again
    assert [m.body for m in mem.history(CONV, namespace=NS)] == TRIP
