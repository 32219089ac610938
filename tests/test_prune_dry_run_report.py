"""A dry run's report says only what it previews: `dry_run` true, and every field about
work done (`scrubbed`, `wal_truncated`, tombstones, bytes reclaimed) false or empty, in
the library's `ErasureReport`, the HTTP answer of `POST /v1/prune {"dry_run": true}`, the
client's report of it and the CLI's `prune --dry-run`; a real prune's report says
`dry_run` false. On both engines.

Fails on the code before (2026-12-07): the preview was an `ErasureReport` with the
defaults of an erasure done, so the library and the HTTP answer said `scrubbed` and
`wal_truncated` true for a run that erased and rewrote nothing, and nothing in the
library's report said it was a dry run."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_helpers import tm
from fastapi import FastAPI
from pg_server import fresh_schema
from service_helpers import TOKEN_ACME, Served, bearer, serve_app, served_store

from tiermem import Config
from tiermem.client import Client
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import ErasureReport

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
CONV = "old"
IDLE_S = 0.2  # a conversation idle this long is pruned by `older_than_seconds=IDLE_S`
HTTP_TIMEOUT_S = 60.0

# field -> (its value in a dry run's report, in the real prune's after it)
REPORT_FIELDS: dict[str, tuple[Any, Any]] = {
    # what says which one it was
    "dry_run": (True, False),
    # nothing erased, so no data file rewritten (the real prune's: no reader holds the store)
    "scrubbed": (False, True),
    # nor the WAL truncated (the real prune's: the engine's, below)
    "wal_truncated": (False, None),
    # nothing erased, so no tombstone (the real prune's: one, checked apart)
    "tombstones": ([], None),
    # what it lists is what the real prune then erases
    "conversation_ids": ([CONV], [CONV]),
    "conversations": (1, 1),
}
# the real prune's `wal_truncated` by engine: PostgreSQL's WAL keeps the records always
WAL_TRUNCATED = {"sqlite": True, "postgres": False}


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def served(tmp_path: Path, engine: str, request: pytest.FixtureRequest) -> Iterator[Served]:
    pg: dict[str, Any] = ({} if engine == "sqlite"
                          else {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()})
    with served_store(Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: NS}, **pg)) as served:
        served.memory.append(CONV, {"role": "user", "content": "the old thread"}, namespace=NS)
        time.sleep(2 * IDLE_S)  # idle: the prune takes it
        yield served


def _fields(got: dict[str, Any], engine: str, which: int) -> None:
    """`got` (a report's or an answer's fields) holds what REPORT_FIELDS says (`which`: 0
    the dry run's, 1 the real prune's)."""
    want = {k: v[which] for k, v in REPORT_FIELDS.items()}
    if which:
        want["wal_truncated"] = WAL_TRUNCATED[engine]
        assert [t["id"] for t in got["tombstones"]] == [CONV]
        del want["tombstones"]
    assert {k: got.get(k) for k in want} == want


def _report(r: ErasureReport) -> dict[str, Any]:
    return {k: getattr(r, k) for k in REPORT_FIELDS}


def test_the_library_report_says_dry_run_and_no_work(served: Served, engine: str) -> None:
    preview = served.memory.prune(IDLE_S, namespace=NS, dry_run=True)
    _fields(_report(preview), engine, 0)
    assert preview.bytes_reclaimed == 0
    # what the MCP and HTTP answers are built from says it too
    assert {k: preview.tenant_json()[k] for k in ("dry_run", "scrubbed", "wal_truncated")} == {
        "dry_run": True, "scrubbed": False, "wal_truncated": False}
    assert served.memory.conversations(namespace=NS) == [CONV]
    _fields(_report(served.memory.prune(IDLE_S, namespace=NS)), engine, 1)


def test_the_http_answer_says_dry_run_and_no_work(served: Served, engine: str) -> None:
    def post(body: dict[str, Any]) -> dict[str, Any]:
        r = httpx.post(f"{served.url}/v1/prune", json={"older_than_seconds": IDLE_S, **body},
                       headers=bearer(TOKEN_ACME), timeout=HTTP_TIMEOUT_S)
        assert r.status_code == 200, r.text
        answer: dict[str, Any] = r.json()
        return answer

    _fields(post({"dry_run": True}), engine, 0)
    assert served.memory.conversations(namespace=NS) == [CONV]
    _fields(post({}), engine, 1)


def test_the_client_report_says_dry_run_and_no_work(served: Served, engine: str) -> None:
    with Client(served.url, token=TOKEN_ACME) as client:
        _fields(_report(client.prune(IDLE_S, dry_run=True)), engine, 0)
        assert served.memory.conversations(namespace=NS) == [CONV]
        _fields(_report(client.prune(IDLE_S)), engine, 1)


def test_the_client_reads_an_older_services_dry_run_as_no_work() -> None:
    """A service before this fix answered a dry run with an erasure's `scrubbed` and
    `wal_truncated` true: the client reports what a dry run did, nothing."""
    older = FastAPI()

    @older.post("/v1/prune")
    def prune() -> dict[str, Any]:
        return {"conversations": 1, "messages": 1, "conversation_ids": [CONV], "tombstones": [],
                "scrubbed": True, "wal_truncated": True, "dry_run": True}

    with serve_app(older) as url, Client(url, token=TOKEN_ACME, namespace=NS) as client:
        report = client.prune(IDLE_S, dry_run=True)
    assert (report.dry_run, report.scrubbed, report.wal_truncated) == (True, False, False)


def test_the_cli_says_dry_run_and_no_work(tmp_path: Path, embedder: FastEmbedder) -> None:
    assert tm(tmp_path, embedder, "", "append", CONV, "--role", "user", "--content", "hello").exit_code == 0
    time.sleep(0.01)  # age 0 is after the append on any clock resolution
    out = tm(tmp_path, embedder, "", "prune", "--older-than", "0", "--dry-run", "--json")
    assert out.exit_code == 0, out.output
    answer = json.loads(out.output)
    # the dry run's JSON: the preview only, no field about work done
    assert answer["dry_run"] is True and answer["conversation_ids"] == [CONV]
    assert not {"scrubbed", "wal_truncated", "tombstones", "bytes_reclaimed"} & set(answer)
    text = tm(tmp_path, embedder, "", "prune", "--older-than", "0", "--dry-run").output
    assert "nothing erased (--dry-run)" in text and "scrubbed" not in text and "note:" not in text
