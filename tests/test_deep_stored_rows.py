"""A message row stored nested past what `json.loads` can decode is salvaged on every read.

Before the depth limit held on every way in (or through SQL), a row could be stored
thousands of levels deep. `json.loads` raises RecursionError near 1,000 levels, which
no read path caught: `history`, `context`, `search`, `active` and `rebuild` raised it,
the HTTP routes and the inspector answered 500 for the whole conversation, the MCP
`history` tool an error and the CLI `history` / `export` exited 1, and the row was
never counted in `salvaged_rows`. Now the one decoder of stored rows
(`tiers.models.loads_stored`) refuses such text without recursing, and every read path
salvages the row as it does any undecodable one (DESIGN invariant 8): skipped, logged,
counted; its neighbours load.

Real SQLite (and real PostgreSQL for the store's own reads, which both engines share in
tiers/dialect.py), the rows rewritten behind tiermem's back with SQL as an older version
or a hand-written statement left them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cli_helpers import tm
from cold_helpers import rewrite_stored
from fastapi.testclient import TestClient
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

CONV = "deep"
QUERY = "shipping label"


def nested_text(levels: int) -> str:
    """`levels` JSON objects around a string, built without json.dumps' recursion."""
    return '{"a": ' * levels + '"leaf"' + "}" * levels


def deep_body(levels: int) -> str:
    # a hosted-tool item (canonical role assistant, as the row's role column says) whose
    # opaque payload nests `levels` objects deep
    return '{"type": "web_search_call", "id": "ws_1", "status": "completed", "action": ' + nested_text(levels) + "}"


# (position, column, nesting levels) -- the rows rewritten; every other position is a valid neighbour
DEEP_ROWS = [
    (1, "body", 1_000),  # just past what json.loads decodes from any stack
    (3, "body", 5_000),  # well past it
    (5, "body", 100_000),  # a row of 600 KB that is nothing but nesting
    (7, "metadata", 5_000),  # the envelope's metadata, decoded with the body on every read
]
TURNS = 9
NEIGHBOURS = [p for p in range(TURNS) if p not in {row[0] for row in DEEP_ROWS}]


def _messages() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for pos in range(TURNS):
        if pos in NEIGHBOURS:
            out.append({"role": "user", "content": f"neighbour {pos}: the shipping label printed twice"})
        else:  # indexed under the query's words, so that search and context would meet the row
            out.append({"role": "assistant", "content": f"placeholder {pos} for the shipping label search"})
    return out


def _value(column: str, levels: int) -> str:
    return deep_body(levels) if column == "body" else '{"m": ' + nested_text(levels) + "}"


def _rewrite_sqlite(db: Path, key: str) -> None:
    """Rewrite the DEEP_ROWS behind tiermem's back."""
    rewrite_stored(db, key, [(pos, column, _value(column, levels)) for pos, column, levels in DEEP_ROWS])


def _rewrite_postgres(url: str, schema: str, key: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute(f'SET LOCAL search_path TO "{schema}"')
        conn.execute("ALTER TABLE messages DISABLE TRIGGER messages_no_update")
        for pos, column, levels in DEEP_ROWS:
            conn.execute(f"UPDATE messages SET {column} = %s WHERE conversation_id = %s AND position = %s",
                         (_value(column, levels), key, pos))
        conn.execute("ALTER TABLE messages ENABLE TRIGGER messages_no_update")


@pytest.fixture(params=["sqlite", "postgres"])
def engine_config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    if request.param == "sqlite":
        return Config(data_dir=tmp_path / "data")
    url: str = request.getfixturevalue("pg_url")
    return Config(data_dir=tmp_path / "data", cold_url=url, cold_schema=fresh_schema())


def _seed(cfg: Config, embedder: FastEmbedder) -> None:
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        m.append_many(CONV, _messages())
        m.catch_up()
        key = m.cold.key_of("default", CONV)
    assert key is not None
    if cfg.cold_url is None:
        _rewrite_sqlite(cfg.db_path, key)
    else:
        _rewrite_postgres(cfg.cold_url, cfg.cold_schema, key)


@pytest.fixture
def seeded(engine_config: Config, embedder: FastEmbedder) -> Iterator[Memory]:
    _seed(engine_config, embedder)
    with Memory(engine_config, embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


def _positions(messages: Any) -> list[int]:
    return [m.position for m in messages]


def _context_text(m: Memory) -> str:
    ctx = m.context(CONV, QUERY, 5_000)
    return json.dumps(ctx.messages)


def _rebuild_then_history(m: Memory) -> list[int]:
    m.rebuild()
    return _positions(m.history(CONV))


# (name, the read, what it must give) -- the store's reads, shared by both engines
MEMORY_READS: list[tuple[str, Callable[[Memory], Any], Callable[[Any], bool]]] = [
    # the whole log
    ("history", lambda m: _positions(m.history(CONV)), lambda got: got == NEIGHBOURS),
    # a page of it (the HTTP and MCP routes read pages)
    ("history_page", lambda m: _positions(m.history_page(CONV, limit=TURNS)[0]), lambda got: got == NEIGHBOURS),
    # the suffix after the latest checkpoint (none: all of it)
    ("active", lambda m: _positions(m.active(CONV).messages), lambda got: got == NEIGHBOURS),
    # the planner renders retrieved and recent turns; the deep rows are indexed under the query's words
    ("context", _context_text, lambda got: "neighbour 0" in got and "web_search_call" not in got),
    # search hits are read back as messages
    ("search", lambda m: [h.position for h in m.search(CONV, QUERY, TURNS)],
     lambda got: bool(got) and set(got) <= set(NEIGHBOURS)),
    # every derived structure recomputed from the log: the bad rows skipped, the log unchanged
    ("rebuild", _rebuild_then_history, lambda got: got == NEIGHBOURS),
]


@pytest.mark.parametrize(("name", "read", "ok"), MEMORY_READS, ids=[r[0] for r in MEMORY_READS])
def test_a_store_read_salvages_the_deep_rows(seeded: Memory, name: str, read: Callable[[Memory], Any],
                                             ok: Callable[[Any], bool]) -> None:
    got = read(seeded)
    assert ok(got), (name, got)
    # each deep row counted once, however many reads met it (rebuild meets them again)
    assert seeded.stats(namespace="default")["cold"]["salvaged_rows"] == len(DEEP_ROWS)


def _http_history(client: TestClient) -> tuple[int, Any]:
    r = client.get(f"/v1/conversations/{CONV}/history")
    return r.status_code, [m["position"] for m in r.json()["messages"]] if r.status_code == 200 else r.text


def _http_context(client: TestClient) -> tuple[int, Any]:
    r = client.post(f"/v1/conversations/{CONV}/context", json={"query": QUERY, "budget": 5_000})
    return r.status_code, r.text


def _inspector_page(client: TestClient) -> tuple[int, Any]:
    r = client.get(f"/ui/c/{CONV}")
    return r.status_code, r.text


# (name, the request, what a 200 must carry) -- the service's reads, over the same Memory
HTTP_READS: list[tuple[str, Callable[[TestClient], tuple[int, Any]], Callable[[Any], bool]]] = [
    # GET .../history: the page of messages
    ("http-history", _http_history, lambda got: got == NEIGHBOURS),
    # POST .../context: the context, without the deep rows
    ("http-context", _http_context, lambda got: "neighbour 0" in got and "web_search_call" not in got),
    # the inspector's page of the conversation
    ("inspector-page", _inspector_page, lambda got: "neighbour 0" in got and "neighbour 8" in got),
]


@pytest.mark.parametrize(("name", "request_", "ok"), HTTP_READS, ids=[r[0] for r in HTTP_READS])
def test_the_service_answers_200_without_the_deep_rows(tmp_path: Path, embedder: FastEmbedder, name: str,
                                                       request_: Callable[[TestClient], tuple[int, Any]],
                                                       ok: Callable[[Any], bool]) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    _seed(cfg, embedder)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        app = create_app(cfg, m, auth=False, start_scheduler=False)
        with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
            status, got = request_(client)
        assert status == 200, (name, status, got)
        assert ok(got), (name, got)


def test_the_mcp_history_tool_returns_the_neighbours(tmp_path: Path, embedder: FastEmbedder) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from tiermem.adapters.mcp_server import build_server

    cfg = Config(data_dir=tmp_path / "data")
    _seed(cfg, embedder)

    async def call(m: Memory) -> tuple[bool, Any]:
        async with Client(build_server(m)) as client:
            r = await client.call_tool("history", {"conversation_id": CONV})
            return r.is_error, (r.content[0].text if r.is_error else r.structured_content)

    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        failed, out = asyncio.run(call(m))
    assert not failed, out
    assert [row["position"] for row in out["messages"]] == NEIGHBOURS


# (the command, what its output must hold) -- the CLI's reads of the log
CLI_READS = [
    # every message printed, as a JSON array
    (["history", "--json", CONV], lambda out: [m["position"] for m in json.loads(out)] == NEIGHBOURS),
    # JSONL that `tiermem import` reads back: one line per message that can be decoded (the
    # loss accepted: without --skip-unreadable an unreadable row fails the export, 8c76577)
    (["export", "--skip-unreadable"], lambda out: "neighbour 0" in out and "neighbour 8" in out and "web_search_call" not in out),
]


@pytest.mark.parametrize(("args", "ok"), CLI_READS, ids=["history", "export"])
def test_the_cli_prints_the_neighbours(tmp_path: Path, embedder: FastEmbedder, args: list[str],
                                       ok: Callable[[str], bool]) -> None:
    _seed(Config(data_dir=tmp_path / "data"), embedder)
    res = tm(tmp_path, embedder, "", *args)
    assert res.exit_code == 0, (res.output, res.exception)
    assert ok(res.output), res.output
