"""The PostgreSQL pool's size and wait are settings (`cold_pool_size`, `cold_pool_wait_s`,
in `[storage]` or flat, env too), bounded, and the store opens its pool with them; the
store's sessions wait for a lock at most `busy_timeout_ms`. Before: 8 connections and a
30 s wait, fixed (`Config(cold_pool_size=...)` was an unknown setting)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.config import (
    DEFAULT_COLD_POOL_SIZE,
    DEFAULT_COLD_POOL_WAIT_S,
    MAX_COLD_POOL_SIZE,
    MAX_COLD_POOL_WAIT_S,
)
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.postgres import DEFAULT_POOL_MAX, POOL_WAIT_S, PostgresStore

pytestmark = pytest.mark.usefixtures("clean_env")


def test_the_defaults_are_the_stores() -> None:
    assert (DEFAULT_COLD_POOL_SIZE, DEFAULT_COLD_POOL_WAIT_S) == (DEFAULT_POOL_MAX, POOL_WAIT_S)


# (how the setting is given, the attribute and the value it reads)
@pytest.mark.parametrize(("toml", "env", "attr", "want"), [
    ("[storage]\ncold_pool_size = 3\n", {}, "cold_pool_size", 3),  # in its section
    ("cold_pool_wait_s = 2.5\n", {}, "cold_pool_wait_s", 2.5),  # the flat name
    ("", {"TIERMEM_COLD_POOL_SIZE": "12"}, "cold_pool_size", 12),  # env, flat
    ("", {"TIERMEM_STORAGE__COLD_POOL_WAIT_S": "0.5"}, "cold_pool_wait_s", 0.5),  # env, sectioned
])
def test_given_in_a_file_or_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str, env: dict[str, str],
                                attr: str, want: object) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    f = tmp_path / "c.toml"
    f.write_text(toml)
    assert getattr(Config.load(f, data_dir=tmp_path), attr) == want


# (setting, a value refused, the error's type, what the message names)
@pytest.mark.parametrize(("attr", "value", "kind", "named"), [
    ("cold_pool_size", 0, "greater_than_equal", "1"),  # no connection at all
    ("cold_pool_size", MAX_COLD_POOL_SIZE + 1, "less_than_equal", str(MAX_COLD_POOL_SIZE)),
    ("cold_pool_wait_s", 0, "greater_than", "0"),  # every checkout would time out
    ("cold_pool_wait_s", MAX_COLD_POOL_WAIT_S + 1, "less_than_equal", f"{MAX_COLD_POOL_WAIT_S:g}"),
    ("cold_pool_wait_s", float("nan"), "finite_number", "finite"),
])
def test_out_of_bounds_is_refused_naming_the_field_and_limit(tmp_path: Path, attr: str, value: float, kind: str,
                                                             named: str) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        Config(data_dir=tmp_path, **{attr: value})
    (err,) = info.value.errors()
    assert err["loc"] == (attr,) and err["type"] == kind and named in err["msg"], err


def test_the_store_opens_its_pool_with_them(tmp_path: Path, pg_url: str, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=fresh_schema(), cold_pool_size=3,
                 cold_pool_wait_s=1.5, busy_timeout_ms=250)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        assert isinstance(mem.cold, PostgresStore)
        pool = mem.cold._pool
        assert pool is not None and (pool.max_size, pool.timeout) == (3, 1.5)
        with mem.cold.reading() as conn:
            assert conn.execute("SHOW lock_timeout").fetchone()[0] == "250ms"
