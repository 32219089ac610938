"""The client reads an erasure answer of an older service: a field the service did not
answer yet (`scrubbed`, before 2026-12-04; `wal_truncated`, before 2026-12-07) is not
known (None) in the report, never a crash after the erasure was done, nor the report's
default (True), which says the bytes are gone.

Fails on the code before (review of the HTTP contract, 2026-12-07): `delete_conversation`
and `delete_namespace` read `body["scrubbed"]` and raised KeyError on an answer without it
(the conversation erased, the caller told nothing); `prune` read it with `.get` already.

A real server: an older service's answers (FastAPI served by uvicorn in a thread), the
sync and the async client over real HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from fastapi import FastAPI
from service_helpers import TOKEN_ACME, serve_app

from tiermem.client import AsyncClient, Client
from tiermem.tiers.models import ErasureReport

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
CONV = "old"
TOMBSTONE = {"id": CONV, "namespace": NS, "erased_at": 1.0, "messages": 2}
# the answer of today's service, all fields there
TODAY: dict[str, Any] = {"conversations": 1, "messages": 2, "tombstones": [TOMBSTONE], "scrubbed": False,
                         "wal_truncated": False}

# each case: the fields an older service's answer lacks, what the report says of scrubbed
# and of wal_truncated
CASES: list[tuple[set[str], bool | None, bool | None]] = [
    # a service of 2026-12-04..06: no wal_truncated (read as None before, too)
    ({"wal_truncated"}, False, None),
    # a service before 2026-12-04: neither field (a KeyError before)
    ({"scrubbed", "wal_truncated"}, None, None),
    # scrubbed alone missing (a proxy or a fork that drops it: a KeyError before)
    ({"scrubbed"}, None, False),
    # nothing missing: the fields as answered
    (set(), False, False),
]

# the erasure calls that read an ErasureOut (prune reads PruneOut: its own table in
# test_prune_answer_scrubbed.py and test_erasure_answer_wal_truncated.py)
SYNC_CALLS: dict[str, Callable[[Client], ErasureReport]] = {
    "delete_conversation": lambda c: c.delete_conversation(CONV),
    "delete_namespace": lambda c: c.delete_namespace(NS),
}


def _older(answer: dict[str, Any]) -> FastAPI:
    app = FastAPI()

    @app.delete(f"/v1/conversations/{CONV}")
    @app.delete("/v1/namespace")
    def erase() -> dict[str, Any]:
        return answer

    return app


def _check(report: ErasureReport, scrubbed: bool | None, wal_truncated: bool | None) -> None:
    assert (report.conversations, report.messages) == (1, 2)
    assert report.conversation_ids == [CONV] and report.tombstones == [TOMBSTONE]
    assert report.scrubbed is scrubbed
    assert report.wal_truncated is wal_truncated


@pytest.mark.parametrize("call", list(SYNC_CALLS))
@pytest.mark.parametrize(("missing", "scrubbed", "wal_truncated"), CASES,
                         ids=["no_wal_truncated", "neither", "no_scrubbed", "today"])
def test_the_sync_client_reads_a_missing_field_as_not_known(call: str, missing: set[str], scrubbed: bool | None,
                                                             wal_truncated: bool | None) -> None:
    answer = {k: v for k, v in TODAY.items() if k not in missing}
    with serve_app(_older(answer)) as url, Client(url, token=TOKEN_ACME, namespace=NS) as client:
        report = SYNC_CALLS[call](client)
    _check(report, scrubbed, wal_truncated)


@pytest.mark.parametrize("call", list(SYNC_CALLS))
@pytest.mark.parametrize(("missing", "scrubbed", "wal_truncated"), CASES[:2], ids=["no_wal_truncated", "neither"])
def test_the_async_client_reads_a_missing_field_as_not_known(call: str, missing: set[str], scrubbed: bool | None,
                                                              wal_truncated: bool | None) -> None:
    answer = {k: v for k, v in TODAY.items() if k not in missing}

    async def erase(url: str) -> ErasureReport:
        async with AsyncClient(url, token=TOKEN_ACME, namespace=NS) as client:
            if call == "delete_conversation":
                return await client.delete_conversation(CONV)
            return await client.delete_namespace(NS)

    with serve_app(_older(answer)) as url:
        report = asyncio.run(erase(url))
    _check(report, scrubbed, wal_truncated)
