"""A command that reads or changes what is stored, run on a data dir without a database (a
typo in `--data-dir` or `TIERMEM_DATA_DIR`), says so naming the database's path and where
data_dir came from, and creates nothing. Before, `tiermem history c1` on such a dir created
the directory and an empty database, then answered "not found" (`search` and `export`
showed nothing, `stats` zeros), as if the user's history were gone. The commands that may
store the first messages still create it, and so does `Memory` (the library)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tiermem import Config, Memory
from tiermem.cli import CliState, cli
from tiermem.config import DEFAULT_DB_FILENAME

pytestmark = pytest.mark.usefixtures("clean_env")

# each command that reads or changes what is stored, with arguments it takes
READERS = [
    ["history", "c1"],  # the bug hunt's: "not found", as if the history were gone
    ["search", "flights"],  # an empty table of hits
    ["context", "c1", "-q", "flights"],  # the hot tier too: created redis/ as well
    ["facts", "c1"],
    ["stats"],  # zeros
    ["export"],  # nothing written, exit 0
    ["fork", "c1", "0"],
    ["pin", "c1", "0"],
    ["unpin", "c1", "0"],
    ["delete", "c1"],
    ["delete-namespace", "team", "--yes"],  # "0 deleted" read as done
    ["prune", "--older-than", "1d"],
    ["rebuild"],
]


def _run(args: list[str], env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, args, obj=CliState(), env=env)


@pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
def test_a_reader_on_a_missing_data_dir_says_so_and_creates_nothing(tmp_path: Path, command: list[str]) -> None:
    typo = tmp_path / "typo"
    res = CliRunner().invoke(cli, ["--data-dir", str(typo), *command], obj=CliState())
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert f"no tiermem database at {typo / DEFAULT_DB_FILENAME}" in res.stderr, res.stderr
    assert "(data_dir from --data-dir)" in res.stderr, res.stderr
    assert not typo.exists()


# (env, the source the error names) -- each way a data dir is given besides --data-dir
SOURCES = [
    ({"TIERMEM_DATA_DIR": "{typo}"}, "env TIERMEM_DATA_DIR"),
    ({"TIERMEM_STORAGE__DATA_DIR": "{typo}"}, "env TIERMEM_STORAGE__DATA_DIR"),
    ({"TIERMEM_CONFIG": "{file}"}, "file {file}"),  # [storage] data_dir in a config file
    ({"XDG_DATA_HOME": "{typo}"}, "the default"),  # $XDG_DATA_HOME/tiermem
]


@pytest.mark.parametrize(("env", "source"), SOURCES)
def test_the_error_names_where_data_dir_came_from(tmp_path: Path, env: dict[str, str], source: str) -> None:
    typo, file = tmp_path / "typo", tmp_path / "c.toml"
    file.write_text(f'[storage]\ndata_dir = "{typo}"\n')
    given = {k: v.format(typo=typo, file=file) for k, v in env.items()}
    res = _run(["history", "c1"], env=given)
    assert res.exit_code == 1, res.output
    assert f"(data_dir from {source.format(file=file)})" in res.stderr, res.stderr
    assert not typo.exists()


def test_an_existing_dir_without_a_database_is_left_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    res = _run(["--data-dir", str(tmp_path), "stats"])
    assert res.exit_code == 1 and "no tiermem database" in res.stderr, res.output
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_a_real_process_says_so(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    env["TIERMEM_DATA_DIR"] = str(tmp_path / "typo")
    res = subprocess.run([sys.executable, "-m", "tiermem.cli", "history", "c1"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 1 and "no tiermem database" in res.stderr, res.stderr
    assert "env TIERMEM_DATA_DIR" in res.stderr and not (tmp_path / "typo").exists()


def test_a_writer_still_creates_it_and_a_reader_then_reads(tmp_path: Path) -> None:
    new = tmp_path / "new"
    res = _run(["--data-dir", str(new), "append", "c1", "--role", "user", "--content", "No red-eyes."])
    assert res.exit_code == 0, res.output
    assert (new / DEFAULT_DB_FILENAME).is_file()
    res = _run(["--data-dir", str(new), "history", "c1"])
    assert res.exit_code == 0 and "No red-eyes." in res.output, res.output


def test_the_library_creates_a_missing_data_dir(tmp_path: Path) -> None:
    # documented (README, Files): a Memory is a writer; the CLI's readers are where a typo is refused
    new = tmp_path / "a" / "b"
    with Memory(Config(data_dir=new), hot=False, background_indexing=False) as mem:
        mem.append("c1", {"role": "user", "content": "hi"})
    assert (new / DEFAULT_DB_FILENAME).is_file()
