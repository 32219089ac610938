"""Stored JSON other than a message row is decoded as safely as one: a checkpoint's
metadata, a stored plan and a warm view's body (and its Redis cache entry) go through
`tiers.models.loads_stored`, and a row that cannot be decoded is salvaged the way its
kind of data allows. Before (a review, 2026-12-05), each was decoded with plain
`json.loads`:

- a checkpoint whose metadata an older version, a torn write or a hand-written
  statement left nested past ~950 levels (RecursionError) or not JSON at all
  (JSONDecodeError) failed every read that looks for the latest fold: `active()` and
  `context()` raised, the service answered 500 for the conversation's context and
  active routes; metadata of JSON that is not an object passed the decode and the active
  route answered 500 serializing it;
- a stored plan row of either kind raised out of `plans()`, and the inspector's plans
  page answered 500 (one that is not an object: 500 rendering it);
- a warm view whose body nests past json's depth raised RecursionError out of
  `WarmStore.latest`, which only salvaged ValueError and TypeError, and so out of
  `context()`; a cache entry so deep in Redis did the same.

Now a checkpoint or view that cannot be read is absent (an older one, or the log, the
source of truth, stands in; the rows are logged, and a checkpoint or plan counted in
`salvaged_rows`), and a plan row is skipped. Real SQLite and PostgreSQL (the store's
reads are shared in tiers/dialect.py), real Redis; the rows rewritten behind tiermem's
back with SQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from cold_helpers import sql_behind
from fastapi.testclient import TestClient
from test_warm import redis_client  # noqa: F401  (pytest fixture)

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.warm import WarmStore

pytestmark = pytest.mark.usefixtures("clean_env")

CONV = "derived"
QUERY = "shipping label"
TURNS = 8
OLDER_FOLD, NEWER_FOLD = 2, 5  # positions of the two checkpoints; the newer is made unreadable
DEEP_LEVELS = 5_000  # well past what json.loads decodes from any stack


def nested_text(levels: int) -> str:
    """`levels` JSON objects around a string, built without json.dumps' recursion."""
    return '{"a": ' * levels + '"leaf"' + "}" * levels


# (id, the text a row is rewritten to) -- JSON that no reader can take as what it stores
UNREADABLE = [
    ("deep", '{"m": ' + nested_text(DEEP_LEVELS) + "}"),  # RecursionError in json.loads
    ("not_json", '{"lines": [{"positions": [0'),  # a torn write: JSONDecodeError
    ("not_an_object", "[1, 2, 3]"),  # valid JSON of the wrong shape: a 500 where it was served
]
# (id, a warm view's body) -- a view's body is a JSON list, so a list is no case here
UNREADABLE_VIEWS = [
    ("deep", "[" + nested_text(DEEP_LEVELS) + "]"),  # RecursionError: raised out of latest()
    ("not_json", '[{"text": "torn'),  # salvaged before too: kept as a guard
]


def _messages() -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: the shipping label printed"}
            for i in range(TURNS)]


def _open(cfg: Config, embedder: FastEmbedder) -> Memory:
    return Memory(cfg, embedder=embedder, hot=False, background_indexing=False)


def _key(m: Memory) -> str:
    key = m.cold.key_of("default", CONV)
    assert key is not None
    return key


# -- checkpoints ------------------------------------------------------------------------


def _seed_checkpoints(cfg: Config, embedder: FastEmbedder, text: str) -> None:
    with _open(cfg, embedder) as m:
        m.append_many(CONV, _messages())
        m.catch_up()
        m.checkpoint(CONV, "older fold of the early turns", OLDER_FOLD)
        m.checkpoint(CONV, "newer fold of the later turns", NEWER_FOLD)
        key = _key(m)
    sql_behind(cfg, "UPDATE checkpoints SET metadata = ? WHERE conversation_id = ? AND position = ?",
             (text, key, NEWER_FOLD))


@pytest.mark.parametrize("text", [u[1] for u in UNREADABLE], ids=[u[0] for u in UNREADABLE])
def test_an_unreadable_checkpoint_is_absent(engine_config: Config, embedder: FastEmbedder, text: str) -> None:
    _seed_checkpoints(engine_config, embedder, text)
    with _open(engine_config, embedder) as m:
        active = m.active(CONV)
        # the older fold stands in; the log after it is read in full
        assert active.checkpoint is not None and active.checkpoint.position == OLDER_FOLD
        assert [x.position for x in active.messages] == list(range(OLDER_FOLD + 1, TURNS))
        ctx = json.dumps(m.context(CONV, QUERY, 5_000).messages)
        assert "newer fold" not in ctx and "turn 7" in ctx, ctx
        assert m.stats(namespace="default")["cold"]["salvaged_rows"] == 1


@pytest.mark.parametrize("text", [u[1] for u in UNREADABLE], ids=[u[0] for u in UNREADABLE])
def test_the_service_answers_200_past_an_unreadable_checkpoint(tmp_path: Path, embedder: FastEmbedder,
                                                               text: str) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    _seed_checkpoints(cfg, embedder, text)
    with _open(cfg, embedder) as m:
        app = create_app(cfg, m, auth=False, start_scheduler=False)
        with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
            active = client.get(f"/v1/conversations/{CONV}/active")
            ctx = client.post(f"/v1/conversations/{CONV}/context", json={"query": QUERY, "budget": 5_000})
    assert active.status_code == 200, active.text
    assert active.json()["checkpoint"]["position"] == OLDER_FOLD
    assert ctx.status_code == 200 and "newer fold" not in ctx.text, ctx.text


# -- stored plans ---------------------------------------------------------------------------


def _seed_plans(cfg: Config, embedder: FastEmbedder, text: str) -> None:
    with _open(cfg, embedder) as m:
        m.append_many(CONV, _messages()[:-1])
        m.catch_up()
        m.context(CONV, QUERY, 5_000)  # a plan at last position TURNS - 2
        m.append(CONV, _messages()[-1])
        m.context(CONV, QUERY, 5_000)  # a plan at last position TURNS - 1: made unreadable
        key = _key(m)
    sql_behind(cfg, "UPDATE plans SET plan = ? WHERE conversation_id = ? AND last_position = ?",
             (text, key, TURNS - 1))


@pytest.mark.parametrize("text", [u[1] for u in UNREADABLE], ids=[u[0] for u in UNREADABLE])
def test_an_unreadable_plan_row_is_skipped(engine_config: Config, embedder: FastEmbedder, text: str) -> None:
    _seed_plans(engine_config, embedder, text)
    with _open(engine_config, embedder) as m:
        plans = m.cold.plans(_key(m))
        assert [p["last_position"] for p in plans] == [TURNS - 2]
        assert isinstance(plans[0]["plan"], dict)
        assert m.stats(namespace="default")["cold"]["salvaged_rows"] == 1


@pytest.mark.parametrize("text", [u[1] for u in UNREADABLE], ids=[u[0] for u in UNREADABLE])
def test_the_inspector_shows_the_readable_plans(tmp_path: Path, embedder: FastEmbedder, text: str) -> None:
    cfg = Config(data_dir=tmp_path / "data", store_plans=True)
    _seed_plans(cfg, embedder, text)
    with _open(cfg, embedder) as m:
        app = create_app(cfg, m, auth=False, start_scheduler=False)
        with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
            newest = client.get(f"/ui/c/{CONV}/plans")  # the newest readable turn's plans
            older = client.get(f"/ui/c/{CONV}/plans", params={"turn": TURNS - 2})
    assert newest.status_code == 200 and older.status_code == 200, (newest.text, older.text)
    assert "no plans stored" not in older.text.lower()


# -- warm views -----------------------------------------------------------------------------


def _seed_view(cfg: Config, embedder: FastEmbedder, text: str) -> None:
    with _open(cfg, embedder) as m:
        m.append_many(CONV, _messages())
        m.catch_up()
        assert m.consolidate(CONV) >= 1
        assert m.warm.latest(_key(m), "rolling") is not None
        key = _key(m)
    # every version of the rolling view, and its fold (a checkpoint) out of the way
    sql_behind(cfg, "UPDATE summaries SET body = ? WHERE conversation_id = ? AND kind = 'rolling'", (text, key))
    sql_behind(cfg, "DELETE FROM checkpoints WHERE conversation_id = ?", (key,))


@pytest.mark.parametrize("text", [u[1] for u in UNREADABLE_VIEWS], ids=[u[0] for u in UNREADABLE_VIEWS])
def test_an_unreadable_view_is_absent(engine_config: Config, embedder: FastEmbedder, text: str) -> None:
    _seed_view(engine_config, embedder, text)
    with _open(engine_config, embedder) as m:
        assert m.warm.latest(_key(m), "rolling") is None
        ctx = json.dumps(m.context(CONV, QUERY, 5_000).messages)
        assert "turn 0" in ctx and "turn 7" in ctx, ctx
        assert m.warm.salvaged >= 1
        # a refresh writes a new version over it
        m.consolidate(CONV)
        assert m.warm.latest(_key(m), "rolling") is not None


def test_an_unreadable_cache_entry_is_a_miss(tmp_path: Path, embedder: FastEmbedder,
                                             redis_client: redis.Redis) -> None:  # noqa: F811
    cfg = Config(data_dir=tmp_path / "data")
    with _open(cfg, embedder) as m:
        m.append_many(CONV, _messages())
        m.catch_up()
        m.consolidate(CONV)
        key = _key(m)
        warm = WarmStore(m.cold, redis_client)
        view = warm.latest(key, "rolling")  # read from cold, cached
        assert view is not None
        cache_key = warm.cache_key(key, "rolling")
        assert redis_client.hget(cache_key, "j") is not None
        # written by anyone with access to the Redis: nested past json's depth
        redis_client.hset(cache_key, "j", '{"db": ' + nested_text(DEEP_LEVELS) + "}")
        assert warm.latest(key, "rolling") == view  # cold answers
