"""`salvaged_rows` counts distinct bad rows of every kind. Before (a review, 2026-12-06),
the engines kept salvaged rows in a set keyed by (conversation, position): a bad
checkpoint, and every bad stored plan, at the position of a bad message were all one
entry, so `stats()["salvaged_rows"]` and `namespace_stats` said 1 for four bad rows.
Now a row is known by its kind too (a message by its position, a checkpoint or a plan by
its row id: several can share a position), and a namespace's count stays its own.
Real SQLite and PostgreSQL; the rows rewritten behind tiermem's back with SQL.
"""

from __future__ import annotations

import psycopg
import pytest
from cold_helpers import sql_behind
from test_cold_salvage import corrupt

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

TURNS = 6
AT = TURNS - 1  # the position every bad row of the conversation is at
TORN = '{"role": "user", "content": "torn'  # JSON a torn write leaves: no reader decodes it
PLANS_AT_AT = 2  # context calls made at the last turn, each storing a plan


def _break_message(cfg: Config, key: str, position: int) -> None:
    if cfg.cold_url is None:
        corrupt(cfg.db_path, key, position, "body", "'" + TORN + "'")
        return
    with psycopg.connect(cfg.cold_url, autocommit=True) as pg, pg.transaction():
        pg.execute(f'SET LOCAL search_path TO "{cfg.cold_schema}"')
        pg.execute("ALTER TABLE messages DISABLE TRIGGER messages_no_update")
        pg.execute("UPDATE messages SET body = %s WHERE conversation_id = %s AND position = %s",
                   (TORN, key, position))
        pg.execute("ALTER TABLE messages ENABLE TRIGGER messages_no_update")


def _seed(m: Memory, name: str, namespace: str) -> str:
    m.append_many(name, [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: label printed"}
                         for i in range(TURNS)], namespace=namespace)
    m.checkpoint(name, "a fold of every turn", AT, namespace=namespace)
    for _ in range(PLANS_AT_AT):
        m.context(name, "label", 5_000, namespace=namespace)
    key = m.cold.key_of(namespace, name)
    assert key is not None
    return key


def test_bad_rows_of_each_kind_at_one_position_count_apart(engine_config: Config, embedder: FastEmbedder) -> None:
    cfg = engine_config
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        shop = _seed(m, "bad", "shop")
        other = _seed(m, "neighbour", "other")
    # shop: its message, its checkpoint and both its plans at AT; other: only its checkpoint
    _break_message(cfg, shop, AT)
    for key in (shop, other):
        sql_behind(cfg, "UPDATE checkpoints SET metadata = ? WHERE conversation_id = ?", ("[1, 2]", key))
    sql_behind(cfg, "UPDATE plans SET plan = ? WHERE conversation_id = ?", ("not json", shop))
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        for _ in range(2):  # a row met on every read is still one row
            assert [x.position for x in m.history("bad", namespace="shop")] == list(range(AT))
            assert m.active("bad", namespace="shop").checkpoint is None
            assert m.active("neighbour", namespace="other").checkpoint is None
            assert m.cold.plans(shop) == []
        assert m.cold.stats()["salvaged_rows"] == 1 + 1 + PLANS_AT_AT + 1
        assert m.stats(namespace="shop")["cold"]["salvaged_rows"] == 1 + 1 + PLANS_AT_AT
        assert m.stats(namespace="other")["cold"]["salvaged_rows"] == 1
        assert m.stats(namespace="empty")["cold"]["salvaged_rows"] == 0
