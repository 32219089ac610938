"""A file a command writes whose directory does not exist (or is a file) is a usage error
naming the option, found while the arguments are parsed. Before, `tiermem tune --json-out
/typo/r.json` ran every candidate (minutes on a real file) and then failed with "[Errno 2]
No such file or directory", the results lost; `export -o` and `config --export` failed
naming their hidden temporary file (`/typo/.r.jsonl.x8w4lca.tmp`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")
CONVERSATION = [{"conversation_id": "c1", "message": {"role": "user", "content": "I live in Oslo."}},
                {"conversation_id": "c1", "message": {"role": "assistant", "content": "Noted."}}]


def _data(tmp_path: Path) -> Path:
    f = tmp_path / "conv.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in CONVERSATION))
    return f


# (the command before its output option, the option) -- each wrote only after its work
CASES = [
    (["tune", "--budgets", "500"], "--json-out"),      # the whole run, then the write
    (["tune", "--budgets", "500"], "--write-config"),
    (["export"], "--out"),
    (["config"], "--export"),
]


@pytest.mark.parametrize(("command", "option"), CASES)
@pytest.mark.parametrize("where", ["missing", "a file"])
def test_an_output_in_no_directory_is_a_usage_error(tmp_path: Path, command: list[str], option: str,
                                                    where: str) -> None:
    (tmp_path / "a-file").write_text("x")
    parent = tmp_path / ("no-such-dir" if where == "missing" else "a-file")
    args = [*command, option, str(parent / "out.json")]
    if command[0] == "tune":
        args.insert(1, str(_data(tmp_path)))
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "d"), *args], obj=CliState())
    assert res.exit_code == 2, res.output
    assert option in res.output and str(parent) in res.output and "Traceback" not in res.output, res.output


def test_an_output_in_an_existing_directory_is_written(tmp_path: Path) -> None:
    out = tmp_path / "c.toml"
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "d"), "config", "--export", str(out)],
                             obj=CliState())
    assert res.exit_code == 0 and out.is_file(), res.output
