"""`data_dir` must name a directory: an empty one (an unset shell variable expanded,
`TIERMEM_DATA_DIR=$DIR`) is refused, naming the setting, instead of meaning the current
directory; a NUL byte is refused naming it too. Before (audit_input2, finding 8) the empty
value became Path("") == "." and the log, redis/ and logs were written into whatever
directory the command ran from; a NUL gave "embedded null byte", naming no setting."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pydantic
import pytest
from click.testing import CliRunner

from tiermem import Config
from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")

# (env, keyword arguments, config file text, the error's location, what it says) -- each a way to give it
REFUSED: list[tuple[dict[str, str], dict[str, Any], str | None, str, str]] = [
    # the audit's: an unset shell variable expanded into the env
    ({"TIERMEM_DATA_DIR": ""}, {}, None, "data_dir", "empty"),
    # only blanks
    ({"TIERMEM_DATA_DIR": "  "}, {}, None, "data_dir", "empty"),
    # the sectioned env name
    ({"TIERMEM_STORAGE__DATA_DIR": ""}, {}, None, "storage.data_dir", "empty"),
    # a config file, flat and sectioned
    ({}, {}, 'data_dir = ""\n', "data_dir", "empty"),
    ({}, {}, '[storage]\ndata_dir = ""\n', "storage.data_dir", "empty"),
    # a keyword argument
    ({}, {"data_dir": ""}, None, "data_dir", "empty"),
    # a NUL byte: was "embedded null byte", from wherever the path was first used
    ({}, {}, '[storage]\ndata_dir = "a\\u0000b"\n', "storage.data_dir", "NUL"),
    ({}, {"data_dir": "a\x00b"}, None, "data_dir", "NUL"),
]


@pytest.mark.parametrize(("env", "kwargs", "toml", "loc", "says"), REFUSED)
def test_an_empty_or_nul_data_dir_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       env: dict[str, str], kwargs: dict[str, Any],
                                                       toml: str | None, loc: str, says: str) -> None:
    monkeypatch.chdir(tmp_path)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    path = None
    if toml is not None:
        path = tmp_path / "c.toml"
        path.write_text(toml)
    with pytest.raises(pydantic.ValidationError) as info:
        Config.load(path, **kwargs)
    (err,) = info.value.errors()
    assert ".".join(str(p) for p in err["loc"]) == loc and says in err["msg"]


def test_the_cli_writes_nothing_into_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    res = CliRunner().invoke(cli, ["append", "c1", "--role", "user", "--content", "secret note"], obj=CliState(),
                             env={"TIERMEM_DATA_DIR": ""})
    assert res.exit_code == 1 and "data_dir" in res.stderr and "Traceback" not in res.output, res.output
    assert os.listdir(cwd) == []


@pytest.mark.parametrize("given", [
    "",     # an unset shell variable in --data-dir "$DIR": click made it Path(".")
    "   ",  # blanks
])
def test_the_cli_option_refuses_an_empty_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  given: str) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    res = CliRunner().invoke(cli, ["--data-dir", given, "append", "c1", "--role", "user", "--content", "note"],
                             obj=CliState())
    assert res.exit_code == 2 and "--data-dir" in res.output and "Traceback" not in res.output, res.output
    assert os.listdir(cwd) == []


def test_the_current_directory_said_as_dot_still_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TIERMEM_DATA_DIR", ".")
    assert Config().data_dir == Path(".")
