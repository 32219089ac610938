"""A conversation erased while its warm refresh waits on the LLM leaves nothing behind
when the endpoint then answers. When the refresh fails: no `summary_errors` row (the endpoint's error body may
quote the prompt: the erased turns' text), no `view_failures` row (counted in
`views_failing` for good, its `oldest_failure_age_s` growing). Each is written only
while the conversation exists, checked in the write's own transaction (PostgreSQL: a
FOR SHARE lock, so an erasure committing meanwhile cannot slip in between). Before,
both rows were written after the erasure, on both engines. When it succeeds: no
summary (`put_summary` refuses a conversation that is gone; passes before and after).

Real stores (a SQLite file; PostgreSQL, its data files read after a CHECKPOINT), the
real local endpoint holding the request while the erasure runs."""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from llm_endpoint import LLMEndpoint, Reply, Request, completion, serving
from pg_server import fresh_schema
from psycopg.conninfo import conninfo_to_dict

from tiermem import Config, Memory
from tiermem.tiers.cold import CONVERSATION_TABLES
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import ConversationNotFound

CONV = "erased-mid-refresh"
HOLD_S = 30.0  # the most the endpoint holds a request (the test releases it far sooner)
TIMEOUT_S = 20.0  # the summarizer's; longer than the erasure takes


@pytest.fixture
def canary() -> str:
    # one word: unique, so no other test's rows match it
    return f"zq7canary{uuid.uuid4().hex}kumquat"


def quoting_error(req: Request) -> Reply:
    # as an endpoint's 'context too long: ...' does
    return Reply(400, json.dumps({"error": {"message": f"bad request: {req.prompt}"}}).encode())


def summary(req: Request) -> Reply:
    quoted = re.search(r"zq7canary\w+", req.prompt)
    assert quoted is not None
    return completion(f"The user gave a passport number: {quoted.group()} [#0]")


class Held:
    """An endpoint whose answer (`answer`) is held until `gate` is set."""

    def __init__(self, answer: Callable[[Request], Reply]) -> None:
        self.answer = answer
        self.asked = threading.Event()
        self.gate = threading.Event()

    def __call__(self, req: Request) -> Reply:
        self.asked.set()
        self.gate.wait(HOLD_S)
        return self.answer(req)


@pytest.fixture(params=[
    quoting_error,  # the refresh fails: its error and backoff rows (failed before)
    summary,  # it succeeds: the summary, quoting the canary too
])
def held(request: pytest.FixtureRequest) -> Held:
    return Held(request.param)


@pytest.fixture
def endpoint(held: Held) -> Iterator[LLMEndpoint]:
    yield from serving(held)


@pytest.fixture(params=["sqlite", "postgres"])
def memory(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder,
           endpoint: LLMEndpoint) -> Iterator[Memory]:
    extra: dict[str, object] = {}
    if request.param == "postgres":
        extra = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    cfg = Config(data_dir=tmp_path / "data", summarizer="llm", llm_base_url=endpoint.url, llm_model="m",
                 llm_api_key_env="", llm_timeout_s=TIMEOUT_S, **extra)  # type: ignore[arg-type]
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        yield mem


def files_with(mem: Memory, needle: bytes) -> list[str]:
    """Where the store's bytes hold `needle`: the SQLite file and its WAL, or the
    PostgreSQL cluster's data files after a CHECKPOINT (its WAL excluded: PostgreSQL
    cannot scrub it, tests/test_erasure_postgres.py)."""
    url = mem.config.cold_url
    if not url:
        db = mem.config.data_dir / "tiermem.db"
        return [p.name for p in (db, Path(f"{db}-wal")) if p.exists() and needle in p.read_bytes()]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
    pgdata = Path(str(conninfo_to_dict(url)["host"]))
    return [str(p.relative_to(pgdata)) for p in pgdata.rglob("*")
            if p.is_file() and "pg_wal" not in p.relative_to(pgdata).parts and needle in p.read_bytes()]


def rows_of(mem: Memory, key: str) -> dict[str, int]:
    """The conversation's rows left in each of its tables (those an erasure empties)."""
    mark = "%s" if mem.config.cold_url else "?"
    out = {}
    for table in CONVERSATION_TABLES:
        rows = mem.cold._read(f"SELECT COUNT(*) FROM {table} WHERE conversation_id = {mark}",  # type: ignore[attr-defined]
                              (key,))
        out[table] = int(rows[0][0])
    return {t: n for t, n in out.items() if n}


def test_a_refresh_answered_after_its_conversation_was_erased_writes_nothing(
        memory: Memory, held: Held, endpoint: LLMEndpoint, canary: str) -> None:
    mem = memory
    mem.append_many(CONV, [{"role": "user", "content": f"My passport number is {canary}, keep it."},
                           {"role": "assistant", "content": "Noted."}])
    _name, _ns, key = mem._key(CONV, None)
    raised: list[Exception] = []

    def consolidate() -> None:
        try:
            mem.consolidate(CONV)
        except Exception as exc:
            raised.append(exc)

    refresh = threading.Thread(target=consolidate)
    refresh.start()
    try:
        assert held.asked.wait(TIMEOUT_S)  # the rolling view's request is in flight
        mem.delete_conversation(CONV)
        assert files_with(mem, canary.encode()) == []  # the erasure itself took every copy
    finally:
        held.gate.set()
        refresh.join(HOLD_S)
    assert not refresh.is_alive()
    assert len(endpoint.requests) == 1 and canary in endpoint.requests[0].prompt  # the answer quotes it
    # a summary written after the erasure: put_summary finds the conversation gone
    assert [type(e) for e in raised] == ([ConversationNotFound] if held.answer is summary else [])
    assert rows_of(mem, key) == {}
    assert mem.cold.view_failure(key, "rolling", "") is None
    warm = mem.stats()["warm"]
    assert (warm["views_failing"], warm["oldest_failure_age_s"]) == (0, None)
    assert warm["refresh_failures"] == (held.answer is quoting_error)  # a failure still counts here
    assert files_with(mem, canary.encode()) == []
