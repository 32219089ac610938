"""PostgreSQL's operation deadline is a setting (`cold_operation_timeout_s`, in
`[storage]` or flat, env too), bounded, and every store tiermem opens from a config takes
it: Memory's (so `serve`, the MCP server, the CLI's commands) and both sides of
`migrate-store`, which also takes `busy_timeout_ms` (the lock wait added to it). Before:
60 s, fixed (`Config(cold_operation_timeout_s=...)` was an unknown setting)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pydantic
import pytest
from click.testing import CliRunner
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.cli import cli
from tiermem.config import (
    DEFAULT_COLD_OPERATION_TIMEOUT_S,
    MAX_COLD_OPERATION_TIMEOUT_S,
    MIN_COLD_OPERATION_TIMEOUT_S,
)
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import MAINTENANCE_TIMEOUT_S, OPERATION_TIMEOUT_S, PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

pytestmark = pytest.mark.usefixtures("clean_env")

SHORT_S = 1.0  # a deadline the test's slow insert outlasts (the least allowed)
SLOW_INSERT_S = 2.5  # the target's server time for each conversation's row: past SHORT_S


def test_the_default_is_the_stores_and_the_bound_the_maintenance_deadline() -> None:
    assert DEFAULT_COLD_OPERATION_TIMEOUT_S == OPERATION_TIMEOUT_S
    assert MAX_COLD_OPERATION_TIMEOUT_S == MAINTENANCE_TIMEOUT_S


# (how the setting is given, the value it reads)
@pytest.mark.parametrize(("toml", "env", "want"), [
    ("[storage]\ncold_operation_timeout_s = 5\n", {}, 5.0),  # in its section
    ("cold_operation_timeout_s = 2.5\n", {}, 2.5),  # the flat name
    ("", {"TIERMEM_COLD_OPERATION_TIMEOUT_S": "12"}, 12.0),  # env, flat
    ("", {"TIERMEM_STORAGE__COLD_OPERATION_TIMEOUT_S": "90"}, 90.0),  # env, sectioned
    ("", {}, DEFAULT_COLD_OPERATION_TIMEOUT_S),  # not given: the store's default
])
def test_given_in_a_file_or_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str, env: dict[str, str],
                                want: float) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    f = tmp_path / "c.toml"
    f.write_text(toml)
    assert Config.load(f, data_dir=tmp_path).cold_operation_timeout_s == want


# (a value refused, the error's type, what the message names)
@pytest.mark.parametrize(("value", "kind", "named"), [
    (0, "greater_than_equal", f"{MIN_COLD_OPERATION_TIMEOUT_S:g}"),  # every operation would be cut at once
    (MIN_COLD_OPERATION_TIMEOUT_S / 2, "greater_than_equal", f"{MIN_COLD_OPERATION_TIMEOUT_S:g}"),  # searches cut
    (-5, "greater_than_equal", f"{MIN_COLD_OPERATION_TIMEOUT_S:g}"),
    (MAX_COLD_OPERATION_TIMEOUT_S + 1, "less_than_equal", f"{MAX_COLD_OPERATION_TIMEOUT_S:g}"),  # past maintenance
    (float("inf"), "finite_number", "finite"),  # the watchdog's wait would overflow
    (float("nan"), "finite_number", "finite"),
    (True, "value_error", "boolean"),  # a boolean is no number of seconds
])
def test_out_of_bounds_is_refused_naming_the_field_and_limit(tmp_path: Path, value: float, kind: str,
                                                             named: str) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        Config(data_dir=tmp_path, cold_operation_timeout_s=value)
    (err,) = info.value.errors()
    assert err["loc"] == ("cold_operation_timeout_s",) and err["type"] == kind and named in err["msg"], err


def test_memory_opens_its_store_with_it(tmp_path: Path, pg_url: str, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=fresh_schema(), cold_operation_timeout_s=7.5)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        assert isinstance(mem.cold, PostgresStore)
        assert mem.cold.operation_timeout_s == 7.5


def _slow_target(url: str, schema: str) -> None:
    """An empty target store whose server takes SLOW_INSERT_S for each conversation row
    written into it: a copy's transaction outlasts a deadline of SHORT_S."""
    PostgresStore(url, tokens=BpeTokenCounter(), schema=schema).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE FUNCTION {schema}.slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$ "
                     f"BEGIN PERFORM pg_sleep({SLOW_INSERT_S}); RETURN NEW; END $$")
        conn.execute(f"CREATE TRIGGER slow_insert BEFORE INSERT ON {schema}.conversations "
                     f"FOR EACH ROW EXECUTE FUNCTION {schema}.slow_insert()")


# (the config file's settings, whether the copy is cut)
@pytest.mark.parametrize(("toml", "cut"), [
    (f"[storage]\ncold_operation_timeout_s = {SHORT_S}\nbusy_timeout_ms = 0\n", True),  # the config's deadline
    ("[storage]\nbusy_timeout_ms = 0\n", False),  # the default's 60 s: the slow insert fits
])
def test_migrate_store_opens_both_sides_with_the_configs(tmp_path: Path, pg_url: str, toml: str,
                                                         cut: bool) -> None:
    source = tmp_path / "src" / "tiermem.db"
    store = ColdStore(source, tokens=BpeTokenCounter())
    try:
        store.append("c", Message(role="user", content="book the 9:40 train"))
    finally:
        store.close()
    schema = fresh_schema()
    _slow_target(pg_url, schema)
    config = tmp_path / "tiermem.toml"
    config.write_text(toml)
    r = CliRunner().invoke(cli, ["--config", str(config), "--data-dir", str(tmp_path / "unused"), "migrate-store",
                                 "--from", str(source), "--to", pg_url, "--schema", schema])
    if cut:
        assert r.exit_code != 0 and f"did not answer within {SHORT_S:g} s" in str(r.output) + str(r.exception), \
            (r.output, r.exception)
    else:
        assert r.exit_code == 0 and "1 conversation(s)" in r.output, (r.output, r.exception)
