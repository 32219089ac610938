"""A turn-index row of the wrong type or out of range is missing from the index for the
read that meets it, never a 500. Before (a review, 2026-12-06), the turn index (derived:
`rebuild` recomputes it) was read with bare casts: `turns.tokens` or `turns.priority` that
SQLite keeps as text (an INTEGER column holds text that does not convert), `tokens` of
1e300 (OverflowError in the turn cache's int64 arrays) or a `created_at` that is no time
made `Memory.context` raise and `POST /v1/conversations/{id}/context` answer 500, and the
inspector's conversation and what-if pages too; a text `tokens` also dropped the message
itself from `history()`. PostgreSQL's typed columns hold no text, but a negative count or
a NaN time went through.

Now each read converts its rows in one pass and, only when that fails, row by row: a row
it cannot use is left out as a turn not indexed yet (the planner skips it; its message
stays in `history()`), logged once and counted in `salvaged_rows` as a "turn" row, and
`rebuild` repairs it. Real SQLite and PostgreSQL; the rows rewritten behind tiermem's back
with SQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from cold_helpers import sql_behind
from fastapi.testclient import TestClient
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.turncache import FACTS_PAGE_TURNS

pytestmark = pytest.mark.usefixtures("clean_env")

CONV = "indexed"
QUERY = "shipping label"
BUDGET = 5_000
TURNS = 8
BAD = 3  # the position whose turn-index row is rewritten
PIN_PRIORITY = 5  # BAD is pinned too: the pin reads (pin_candidates) meet its row

# (id, column, SQL value) -- what SQLite keeps in the turn index's typed columns
SQLITE_CASES = [
    ("tokens-text", "tokens", "'abc'"),  # int('abc'): ValueError out of context()
    ("tokens-huge", "tokens", "1e300"),  # kept as REAL: OverflowError in the turn cache
    ("tokens-negative", "tokens", "-5"),  # a count below 0 would pay the budget back
    ("priority-text", "priority", "'high'"),  # int('high') in every TurnRow read
    ("created-text", "created_at", "'yesterday'"),  # float('yesterday')
    ("created-nan-text", "created_at", "'nan'"),  # float('nan') converts: a time of no instant
    ("superseded-text", "superseded_by", "'later'"),  # a position no turn has, sorted with ints
]
# (id, column, SQL value) -- what PostgreSQL's typed columns can hold that no turn has
POSTGRES_CASES = [
    ("tokens-negative", "tokens", "-5"),  # INTEGER holds it
    ("created-nan", "created_at", "'NaN'::float8"),  # DOUBLE PRECISION holds NaN
    ("created-infinite", "created_at", "'Infinity'::float8"),  # and infinity
    ("priority-negative-huge", "priority", "-2147483648"),  # INTEGER's least: still a priority
]


def _messages(n: int = TURNS) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: the shipping label printed"}
            for i in range(n)]


def _open(cfg: Config, embedder: FastEmbedder) -> Memory:
    return Memory(cfg, embedder=embedder, hot=False, background_indexing=False)


def _seed(cfg: Config, embedder: FastEmbedder, n: int = TURNS) -> str:
    with _open(cfg, embedder) as m:
        m.append_many(CONV, _messages(n))
        m.catch_up()
        m.pin(CONV, BAD, priority=PIN_PRIORITY)
        key = m.cold.key_of("default", CONV)
    assert key is not None
    return key


def _rewrite(cfg: Config, key: str, column: str, value: str, position: int = BAD) -> None:
    """The turn row at `position` set to `value` (SQL text) behind tiermem's back."""
    sql = f"UPDATE turns SET {column} = {value} WHERE conversation_id = ? AND position = ?"
    sql_behind(cfg, sql, (key, position))


def _positions(ctx_messages: list[dict[str, Any]]) -> str:
    return json.dumps(ctx_messages)


def _check_reads(m: Memory) -> None:
    """Every read that meets the row: it is missing from the index, its message is not."""
    for _ in range(2):  # a row met on every read is still one row
        assert [x.position for x in m.history(CONV)] == list(range(TURNS))
        ctx = _positions(m.context(CONV, QUERY, BUDGET).messages)
        assert f"turn {BAD}:" not in ctx and f"turn {TURNS - 1}:" in ctx, ctx
        assert m.search(CONV, QUERY, 5)
    stats = m.stats(namespace="default")["cold"]
    assert stats["salvaged_rows"] == 1
    assert m.stats(namespace="other")["cold"]["salvaged_rows"] == 0  # a namespace counts only its own


def _check_repaired(cfg: Config, embedder: FastEmbedder) -> None:
    # a process of its own, as after the CLI: one that answered before keeps its prompt
    # cache epoch's layout, the turn left out of it, until the epoch ends
    with _open(cfg, embedder) as m:
        assert f"turn {BAD}:" in _positions(m.context(CONV, QUERY, BUDGET).messages)
        assert m.cold.stats()["salvaged_rows"] == 0


@pytest.mark.parametrize(("column", "value"), [c[1:] for c in SQLITE_CASES], ids=[c[0] for c in SQLITE_CASES])
def test_sqlite_turn_row_is_left_out(tmp_path: Path, embedder: FastEmbedder, column: str, value: str) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    key = _seed(cfg, embedder)
    _rewrite(cfg, key, column, value)
    with _open(cfg, embedder) as m:
        _check_reads(m)
    # `tiermem rebuild` recomputes the row: the turn is back in the index
    done = tm(tmp_path, embedder, "", "rebuild")
    assert done.exit_code == 0, done.output
    _check_repaired(cfg, embedder)


@pytest.mark.parametrize(("column", "value"), [c[1:] for c in POSTGRES_CASES], ids=[c[0] for c in POSTGRES_CASES])
def test_postgres_turn_row_is_left_out(tmp_path: Path, embedder: FastEmbedder, pg_url: str,
                                       column: str, value: str) -> None:
    cfg = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=fresh_schema())
    key = _seed(cfg, embedder)
    _rewrite(cfg, key, column, value)
    with _open(cfg, embedder) as m:
        if column == "priority":  # a priority in range: the row is used as it is
            assert f"turn {TURNS - 1}:" in _positions(m.context(CONV, QUERY, BUDGET).messages)
            assert m.stats(namespace="default")["cold"]["salvaged_rows"] == 0
            return
        _check_reads(m)
        m.rebuild()
    _check_repaired(cfg, embedder)


@pytest.mark.parametrize(("column", "value"), [c[1:] for c in SQLITE_CASES], ids=[c[0] for c in SQLITE_CASES])
def test_the_service_and_inspector_answer_200(tmp_path: Path, embedder: FastEmbedder, column: str,
                                              value: str) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    key = _seed(cfg, embedder)
    _rewrite(cfg, key, column, value)
    with _open(cfg, embedder) as m:
        app = create_app(cfg, m, auth=False, start_scheduler=False)
        with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
            answers = {
                "context": client.post(f"/v1/conversations/{CONV}/context", json={"query": QUERY, "budget": BUDGET}),
                "history": client.get(f"/v1/conversations/{CONV}/history"),
                "search": client.post("/v1/search", json={"q": QUERY, "conversation_id": CONV}),
                "conversation page": client.get(f"/ui/c/{CONV}"),
                "what-if page": client.get(f"/ui/c/{CONV}/plan", params={"q": QUERY}),
            }
    assert {k: r.status_code for k, r in answers.items()} == dict.fromkeys(answers, 200), {
        k: r.text[:300] for k, r in answers.items() if r.status_code != 200}
    assert f"turn {BAD}:" not in answers["context"].text


def test_a_bad_row_does_not_cut_the_turn_cache_short(tmp_path: Path, embedder: FastEmbedder) -> None:
    # the first and a middle row of the first page, and the last turn: the cache still
    # reads every other turn (a page stays full), and a second call reloads nothing
    n = FACTS_PAGE_TURNS + 5
    cfg = Config(data_dir=tmp_path / "data")
    with _open(cfg, embedder) as m:
        m.append_many(CONV, _messages(n))
        key = m.cold.key_of("default", CONV)
    assert key is not None
    bad = [0, FACTS_PAGE_TURNS // 2, n - 1]
    for p in bad:
        _rewrite(cfg, key, "tokens", "'abc'", position=p)
    with _open(cfg, embedder) as m:
        table = m.turns.get(key)
        assert [int(p) for p in table.positions] == [p for p in range(n) if p not in bad]
        reloads = m.turns.reloads
        m.turns.get(key)
        assert m.turns.reloads == reloads
        assert m.cold.stats()["salvaged_rows"] == len(bad)


def test_a_nan_first_turn_time_does_not_reload_the_cache_every_call(tmp_path: Path, pg_url: str,
                                                                    embedder: FastEmbedder) -> None:
    """PostgreSQL's double precision holds NaN, and NaN compares unequal to itself: the
    census's first turn (id, NaN) never matched the cached entry's, so every `context()`
    reread and re-derived the whole conversation. Such a time is no time (a constant)."""
    cfg = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=fresh_schema())
    key = _seed(cfg, embedder)
    _rewrite(cfg, key, "created_at", "'NaN'", position=0)
    with _open(cfg, embedder) as m:
        for _ in range(3):
            m.context(CONV, QUERY, BUDGET)
        assert m.turns.reloads == 0
