"""`cold_pool_mode` (tiers.postgres POOL_MODES): what needs no PgBouncer, so CI runs it
(tests/test_postgres_pgbouncer.py runs the store behind a real one where it is on PATH).
The setting's spellings, what each mode gives the connections (`connect_options`: no
server-side prepared statements behind a pooler in transaction mode; `_local_sql`: every
setting SET LOCAL), and the refusals at startup, each naming the setting, before the store
connects: erase_scrub "full" and a caller's pool in transaction mode, an unknown mode.
Before: `cold_pool_mode` was an unknown setting, and a store behind PgBouncer in transaction
mode ran other sessions' settings and lost its prepared statements (the PgBouncer test)."""

from __future__ import annotations

import threading
from pathlib import Path

import pydantic
import pytest

from tiermem import Config
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.postgres import (
    CLIENT_CHECK_INTERVAL_MS,
    POOL_MODES,
    PostgresStore,
    check_pool_mode,
    connect_options,
)
from tiermem.tiers.tokens import BpeTokenCounter

pytestmark = pytest.mark.usefixtures("clean_env")

# a URL nothing listens on: a store that tried to connect would fail StoreUnavailable, not
# with the refusal under test
NOWHERE_URL = "postgresql://tiermem@127.0.0.1:1/none?connect_timeout=2"


# (how the setting is given, the value it reads)
@pytest.mark.parametrize(("toml", "env", "want"), [
    ('[storage]\ncold_pool_mode = "transaction"\n', {}, "transaction"),  # in its section
    ('cold_pool_mode = "transaction"\n', {}, "transaction"),  # the flat name
    ("", {"TIERMEM_COLD_POOL_MODE": "transaction"}, "transaction"),  # env, flat
    ("", {}, "session"),  # not given: one server session per connection
])
def test_given_in_a_file_or_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str, env: dict[str, str],
                                want: str) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    f = tmp_path / "c.toml"
    f.write_text(toml)
    assert Config.load(f, data_dir=tmp_path).cold_pool_mode == want


def test_an_unknown_mode_is_refused_by_the_config(tmp_path: Path) -> None:
    # PgBouncer's statement mode allows no transaction of more than one statement
    with pytest.raises(pydantic.ValidationError) as info:
        Config(data_dir=tmp_path, cold_pool_mode="statement")
    (err,) = info.value.errors()
    assert err["loc"] == ("cold_pool_mode",) and "transaction" in err["msg"], err


def test_the_modes_are_the_configs() -> None:
    assert POOL_MODES == ("session", "transaction")
    assert Config.model_fields["cold_pool_mode"].default == "session"


# (pool mode, erase_scrub, a caller's pool, what the refusal names; None: allowed)
REFUSALS = [
    ("session", "full", False, None),  # the default: direct PostgreSQL or a session-mode pool
    ("session", "full", True, None),  # a caller's pool in session mode
    ("transaction", "vacuum", False, None),  # transaction mode, plain VACUUM scrubs
    ("transaction", "full", False, "cold_erase_scrub = 'vacuum'"),  # VACUUM FULL needs a session
    ("transaction", "vacuum", True, "caller's pool"),  # whose connections tiermem does not configure
    ("statement", "vacuum", False, "must be one of"),  # PgBouncer's statement mode: no transactions
    ("Transaction", "vacuum", False, "must be one of"),  # spelled as the setting is, only
]


@pytest.mark.parametrize(("mode", "scrub", "callers", "named"), REFUSALS)
def test_check_pool_mode(mode: str, scrub: str, callers: bool, named: str | None) -> None:
    if named is None:
        check_pool_mode(mode, scrub, caller_pool=callers)
        return
    with pytest.raises(ValidationError) as info:
        check_pool_mode(mode, scrub, caller_pool=callers)
    assert info.value.field == "cold_pool_mode" and named in str(info.value), str(info.value)


def test_the_store_refuses_before_it_connects(counter: BpeTokenCounter) -> None:
    """erase_scrub's default, "full", in transaction mode: refused naming both settings,
    not a connection error (nothing listens at NOWHERE_URL)."""
    with pytest.raises(ValidationError) as info:
        PostgresStore(NOWHERE_URL, tokens=counter, pool_mode="transaction")
    assert info.value.field == "cold_pool_mode" and "cold_erase_scrub" in str(info.value)


# (pool mode, libpq/psycopg options of every connection the store opens)
OPTIONS = [
    ("session", {"autocommit": True}),  # prepared after psycopg's threshold (5 executions)
    ("transaction", {"autocommit": True, "prepare_threshold": None}),  # never prepared on a server
]


@pytest.mark.parametrize(("mode", "want"), OPTIONS)
def test_connect_options(mode: str, want: dict[str, object]) -> None:
    got = connect_options(NOWHERE_URL, pool_mode=mode)  # the URL sets connect_timeout: none added
    assert got == want


def test_local_settings_are_all_set_local() -> None:
    """Behind a pooler in transaction mode the checkout's settings end with its
    transaction: every one SET LOCAL, none for the session (it would stay on a server
    connection another client gets), and all of the session mode's there."""
    store = PostgresStore.__new__(PostgresStore)  # its settings only: no server needed
    store._search_path = '"s1", "public"'
    store._synchronous_commit = "off"
    store._lock_timeout_ms = 250
    store.operation_timeout_s, store.maintenance_timeout_s = 2.0, 600.0
    store._waits = threading.local()
    parts = store._local_sql().split("; ")
    assert all(p.startswith("SET LOCAL ") for p in parts), parts
    assert {p.split()[2] for p in parts} == {"search_path", "synchronous_commit", "hnsw.iterative_scan",
                                             "hnsw.ef_search", "lock_timeout", "client_connection_check_interval",
                                             "idle_in_transaction_session_timeout"}
    assert 'SET LOCAL search_path TO "s1", "public"' in parts
    assert "SET LOCAL lock_timeout TO 250" in parts
    assert f"SET LOCAL client_connection_check_interval TO {CLIENT_CHECK_INTERVAL_MS}" in parts
    # a paused writer's transaction ended past the checkout's deadline: the operation's and
    # its lock wait, the maintenance deadline's within _maintenance
    assert "SET LOCAL idle_in_transaction_session_timeout TO 2250" in parts
    with store._maintenance():
        assert "SET LOCAL idle_in_transaction_session_timeout TO 600000" in store._local_sql().split("; ")
