"""The `tiermem eval` commands that read a LoCoMo file have no default one: without
`--data` (or its env) each says how to give it, before opening anything. `eval session`
used the missing path as a Path and died with an AttributeError."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import cli

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_LOCOMO_DATA of the runner leaks in

README = Path(__file__).resolve().parent.parent / "README.md"
NEEDS_DATA = ("locomo", "cost", "session")
CLICK_ERROR_EXIT = 1  # a ClickException: a one-line error, no traceback


@pytest.mark.parametrize("command", NEEDS_DATA)
def test_without_data_each_says_how_to_give_it(command: str, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    r = CliRunner().invoke(cli, ["eval", command, "--budget", "500", "--data-dir", str(data_dir)])
    assert r.exit_code == CLICK_ERROR_EXIT, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "no data file" in r.output and "--data PATH" in r.output
    assert not data_dir.exists()  # refused before a Memory was opened


def test_readme_commands_name_their_data_file() -> None:
    # a command shown above a results table must run as shown
    lines = [ln for ln in README.read_text(encoding="utf-8").splitlines()
             if re.fullmatch(rf"`tiermem eval ({'|'.join(NEEDS_DATA)}) [^`]*`", ln)]
    assert lines
    assert [ln for ln in lines if "--data " not in ln] == []
