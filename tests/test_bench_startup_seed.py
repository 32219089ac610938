"""evals/bench_startup seeds each side's database with that side's own code, so a baseline
checkout older than the schema runs its commands on a database it can open. Before
(b746a33), the new code seeded one database and the baseline got a copy of it, which a
baseline of an older schema refuses (`SchemaTooNew`): this test failed there."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tiermem.evals import bench_startup
from tiermem.tiers.schema import schema_version

# The last commit whose SQLite schema is one migration behind (m014 came with its merge).
OLDER_SCHEMA_REF = "b39b3f6^1"
OLDER_SCHEMA_VERSION = 13


@pytest.fixture
def older_checkout(tmp_path: Path) -> Path:
    dest = tmp_path / "baseline"
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(bench_startup.ROOT), "archive", OLDER_SCHEMA_REF],
                             capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def _user_version(db: Path) -> int:
    from tiermem.tiers.schema import sqlite3  # the store's driver

    conn = sqlite3.connect(str(db))
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def test_a_baseline_older_than_the_schema_gets_a_database_of_its_own(older_checkout: Path,
                                                                     tmp_path: Path) -> None:
    assert schema_version() > OLDER_SCHEMA_VERSION  # else this ref proves nothing
    work = tmp_path / "work"
    work.mkdir()
    got = bench_startup.measure_processes(bench_startup.ROOT, older_checkout, runs=1, turns=4,
                                          data_file=bench_startup.DEFAULT_DATA, tmp=work,
                                          only=["history --limit 20"])
    # both sides ran the command on their database (the baseline's would have refused a copy)
    row = got["history --limit 20"]
    assert row["new"]["wall"]["n"] == 1 and row["baseline"]["wall"]["n"] == 1
    assert _user_version(work / "data-new" / "tiermem.db") == schema_version()
    assert _user_version(work / "data-baseline" / "tiermem.db") == OLDER_SCHEMA_VERSION
