"""`POST /v1/prune` answers what `DELETE /v1/conversations/{id}` answers of the bytes:
`scrubbed` and the tombstones, and `Client.prune` reads them. While another process holds
a read transaction on the SQLite WAL, a prune leaves the erased rows' old pages there:
both the HTTP answer and the client's report say `scrubbed` false. A service older than
the field answers neither: the client says "not known" (`scrubbed` None), not the
report's default True.

Fails on the code before (review of the HTTP contract, 2026-12-07): `PruneOut` had
neither field, so the HTTP answer said nothing and `Client.prune` reported
`scrubbed=True` and no tombstones for a prune whose bytes were still in the WAL.

The real app served by uvicorn, a real SQLite file, a real reader process."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from service_helpers import TOKEN_ACME, Served, bearer, serve_app, served_store
from wal_reader import read_transaction

from tiermem import Config, Memory
from tiermem.client import Client

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
IDLE_S = 0.2  # a conversation idle this long is pruned by `older_than_seconds=IDLE_S`
HTTP_TIMEOUT_S = 60.0


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: NS})
    with served_store(cfg) as served:
        yield served


@pytest.fixture
def reader(served: Served) -> Iterator[None]:
    # another process's read transaction: the WAL cannot be truncated under it, so an
    # erasure's old pages stay there (scrubbed false)
    with read_transaction(served.db) as read:
        assert int(read) > 0
        yield


def _idle(mem: Memory, conversation_id: str) -> None:
    mem.append(conversation_id, {"role": "user", "content": f"the old thread {conversation_id}"}, namespace=NS)
    time.sleep(2 * IDLE_S)


def test_a_prune_under_a_reader_answers_scrubbed_false_over_http(served: Served, reader: None) -> None:
    _idle(served.memory, "old")
    r = httpx.post(served.url + "/v1/prune", json={"older_than_seconds": IDLE_S}, headers=bearer(TOKEN_ACME),
                   timeout=HTTP_TIMEOUT_S)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["conversations"], body["conversation_ids"]) == (1, ["old"])
    assert body["scrubbed"] is False  # was absent
    assert [t["id"] for t in body["tombstones"]] == ["old"]  # was absent


def test_client_prune_under_a_reader_reports_scrubbed_false(served: Served, reader: None) -> None:
    _idle(served.memory, "old")
    with Client(served.url, token=TOKEN_ACME) as client:
        report = client.prune(IDLE_S)
    assert report.conversation_ids == ["old"]
    assert report.scrubbed is False  # was True: ErasureReport's default
    assert [t["id"] for t in report.tombstones] == ["old"]  # was []


def test_client_prune_without_a_reader_reports_scrubbed_true(served: Served) -> None:
    """Passes before and after: nothing holds the WAL, the bytes are gone."""
    _idle(served.memory, "old")
    with Client(served.url, token=TOKEN_ACME) as client:
        report = client.prune(IDLE_S)
    assert report.scrubbed is True and report.conversation_ids == ["old"]


def test_the_openapi_document_declares_both_fields(served: Served) -> None:
    spec = httpx.get(served.url + "/openapi.json", timeout=HTTP_TIMEOUT_S).json()
    ref = spec["paths"]["/v1/prune"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    schema = spec["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert {"scrubbed", "tombstones", "conversation_ids"} <= set(schema["required"])


# what a service before `scrubbed` answered a prune: counts and names only
OLDER_PRUNE_ANSWER: dict[str, Any] = {"conversations": 1, "messages": 1, "conversation_ids": ["old"]}


def test_client_prune_against_an_older_service_says_not_known() -> None:
    older = FastAPI()

    @older.post("/v1/prune")
    def prune() -> dict[str, Any]:
        return OLDER_PRUNE_ANSWER

    with serve_app(older) as url, Client(url, token=TOKEN_ACME) as client:
        report = client.prune(IDLE_S)
    assert report.conversation_ids == ["old"] and report.conversations == 1
    assert report.scrubbed is None  # was True: the bytes were said to be gone
    assert report.tombstones == []
