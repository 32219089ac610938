"""An output path that is the store's own database, or one of SQLite's files beside it
(-wal, -shm, -journal), is a usage error (exit 2) naming the option and the path, in every
option that writes a file; the database is left as it was. Before, `export -o tiermem.db`
and `config --export tiermem.db` replaced the live database with JSON/TOML and exited 0
(review r_cli 1). Compared by realpath: a link or a `..` reaches the same file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Config, Memory
from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

SQLITE_HEADER = b"SQLite format 3\x00"

# (the command's arguments, with {db} the output path; the option the error names)
CASES: list[tuple[list[str], str, str]] = [
    (["export", "-o", "{db}"], "", "'--out' / '-o'"),  # the review's: the JSON replaced the database
    (["export", "-o", "{db}"], "-wal", "'--out' / '-o'"),  # the write-ahead log: committed rows lost
    (["export", "-o", "{db}"], "-shm", "'--out' / '-o'"),  # the WAL index
    (["export", "-o", "{db}"], "-journal", "'--out' / '-o'"),  # a rollback journal
    (["config", "--export", "{db}"], "", "'--export'"),  # the review's second
    (["tune", "--json-out", "{db}"], "", "'--json-out'"),
    (["tune", "--write-config", "{db}"], "", "'--write-config'"),
    (["tune", "--plot", "{db}"], "", "'--plot'"),
]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    with Memory(Config(data_dir=tmp_path / "data"), hot=False, background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": "precious"})
    return tmp_path / "data"


def _intact(data: Path) -> None:
    with (data / "tiermem.db").open("rb") as fh:
        assert fh.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        assert [m.body["content"] for m in mem.history("c")] == ["precious"]


@pytest.mark.parametrize(("args", "suffix", "option"), CASES,
                         ids=["export", "export-wal", "export-shm", "export-journal", "config-export",
                              "tune-json-out", "tune-write-config", "tune-plot"])
def test_the_store_file_is_refused(data: Path, args: list[str], suffix: str, option: str) -> None:
    target = str(data / "tiermem.db") + suffix
    res = CliRunner().invoke(cli, ["--data-dir", str(data), *[a.replace("{db}", target) for a in args]],
                             obj=CliState())
    assert res.exit_code == 2, res.output
    assert option in res.stderr and target in res.stderr and "own database" in res.stderr, res.stderr
    _intact(data)


@pytest.mark.parametrize("how", [
    "link",    # a symlink elsewhere that points at the database
    "dotdot",  # data/../data/tiermem.db
])
def test_another_name_for_the_store_file_is_refused(data: Path, tmp_path: Path, how: str) -> None:
    if how == "link":
        target = tmp_path / "out.json"
        os.symlink(data / "tiermem.db", target)
    else:
        target = data / ".." / "data" / "tiermem.db"
    res = CliRunner().invoke(cli, ["--data-dir", str(data), "export", "-o", str(target)], obj=CliState())
    assert res.exit_code == 2 and "own database" in res.stderr, res.output
    _intact(data)


def test_a_file_beside_the_store_is_written(data: Path) -> None:
    """Not every file in the data dir: a name of one's own there is still an output."""
    res = CliRunner().invoke(cli, ["--data-dir", str(data), "export", "-o", str(data / "backup.json")],
                             obj=CliState())
    assert res.exit_code == 0, res.output
    assert "precious" in (data / "backup.json").read_text(encoding="utf-8")
    _intact(data)
