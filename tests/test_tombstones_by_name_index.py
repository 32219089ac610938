"""An import's check for erased conversations seeks each name (review r_c5 F2).

`ColdStore.erasures_of(namespace, names)` runs before every import, 500 names a
statement. Before, the only index on tombstones was by (namespace, deleted_at), so each
statement read every tombstone of the namespace: 20,000 names against 200,000 tombstones
took 5.3 s, and a one-conversation import read them all. SQLite migration m033 and
PostgreSQL migration m018 add tombstones(namespace, name, reason, deleted_at)
(`TOMBSTONES_BY_NAME_INDEX`).

Invariants: both engines hold the index after migrating; SQLite's plan for the statement
uses it; `erasures_of` still answers the latest erasure on request of each name that has
one (not a prune, not another namespace's). Both engines (tests/conftest.py
`engine_config`)."""

from __future__ import annotations

import re
from pathlib import Path

from cold_helpers import raw

from tiermem import Config, Memory
from tiermem.tiers.dialect import erasures_sql

# spelled out, not imported: this file must load against the code before the migration
TOMBSTONES_BY_NAME_INDEX = "tombstones_by_name"  # tiers.schema TOMBSTONES_BY_NAME_INDEX
# the statement `erasures_of` runs, with two names: its plan is what an import gets (before,
# a copy spelled out here kept testing the statement of before 8b6bdea)
ERASURES_SQL = erasures_sql(2)


def test_index_exists_and_erasures_answer(engine_config: Config) -> None:
    with Memory(engine_config, hot=False, background_indexing=False) as mem:
        for _ in range(2):  # erased twice: the later erasure is the one answered
            mem.append("alice", {"role": "user", "content": "a"})
            mem.delete_conversation("alice")
        mem.append("alice", {"role": "user", "content": "a"}, namespace="other")
        mem.delete_conversation("alice", namespace="other")  # another namespace's: not counted
        mem.append("bob", {"role": "user", "content": "b"})  # never erased
        cold = mem.cold
        if engine_config.cold_url is None:
            found = cold._q("SELECT name FROM sqlite_master WHERE type = 'index' AND name = ?",
                            (TOMBSTONES_BY_NAME_INDEX,))
        else:
            found = cold._q("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname = ?",
                            (TOMBSTONES_BY_NAME_INDEX,))
        assert [r[0] for r in found] == [TOMBSTONES_BY_NAME_INDEX]
        times = cold._q("SELECT deleted_at FROM tombstones WHERE namespace = 'default' AND name = 'alice'")
        got = cold.erasures_of("default", ["alice", "bob", "carol"])
    assert {n: e.at for n, e in got.items()} == {"alice": max(float(r[0]) for r in times)} and len(times) == 2


def test_sqlite_plan_seeks_by_name(tmp_path: Path) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, hot=False, background_indexing=False) as mem:
        mem.append("alice", {"role": "user", "content": "a"})
        mem.delete_conversation("alice")
    with raw(cfg.db_path) as conn:
        plan = " ".join(str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + ERASURES_SQL, ("default", "a", "b")))
    # a word: tombstones_by_namespace (the old plan) holds the name as a prefix
    assert re.search(rf"\b{TOMBSTONES_BY_NAME_INDEX}\b", plan), plan
