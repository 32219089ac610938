"""The `tiermem eval` commands that read a LoCoMo file have no default one: without
`--data` (or its env) each says how to give it, before opening anything. `eval session`
used the missing path as a Path and died with an AttributeError.

A missing `--data`, or one naming no file, is a bad command line: a usage error (exit 2),
as the README says of every one ("2 usage, 1 error") and as `tiermem tune DATA` already
answered a missing file. Both exited 1 (a ClickException) before."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import cli

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_LOCOMO_DATA of the runner leaks in

README = Path(__file__).resolve().parent.parent / "README.md"
NEEDS_DATA = ("locomo", "cost", "session")
USAGE_EXIT = 2  # click's usage error: the usage line and the error, no traceback


@pytest.mark.parametrize("command", NEEDS_DATA)
def test_without_data_each_says_how_to_give_it(command: str, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    r = CliRunner().invoke(cli, ["eval", command, "--budget", "500", "--data-dir", str(data_dir)])
    assert r.exit_code == USAGE_EXIT, r.output  # 1 before
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "no data file" in r.output and "--data PATH" in r.output
    assert not data_dir.exists()  # refused before a Memory was opened


@pytest.mark.parametrize("command", NEEDS_DATA)
def test_a_data_file_that_does_not_exist_is_a_usage_error(command: str, tmp_path: Path) -> None:
    data_dir, missing = tmp_path / "data", tmp_path / "no-such.json"
    r = CliRunner().invoke(cli, ["eval", command, "--budget", "500", "--data-dir", str(data_dir),
                                 "--data", str(missing)])
    assert r.exit_code == USAGE_EXIT, r.output  # 1 before
    assert "'--data'" in r.output and str(missing) in r.output and "does not exist" in r.output
    assert not data_dir.exists()


def test_readme_commands_name_their_data_file() -> None:
    # a command shown above a results table must run as shown
    lines = [ln for ln in README.read_text(encoding="utf-8").splitlines()
             if re.fullmatch(rf"`tiermem eval ({'|'.join(NEEDS_DATA)}) [^`]*`", ln)]
    assert lines
    assert [ln for ln in lines if "--data " not in ln] == []
