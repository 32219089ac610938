"""The config file's path starts with `~` where no shell expands it (`TIERMEM_CONFIG=~/c.toml`
in a unit file or compose file, `--config=~/c.toml`): it means the home directory, as in
the path settings (`data_dir = "~/tm"`, 0a55dfe). Before, click said the file did not exist
and `Config()` raised FileNotFoundError for it. A `~user` of no user is refused naming the
file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Config
from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")

BUDGET = 3000  # hot_budget_tokens in the file, not the default


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (home / "c.toml").write_text(f"[hot]\nbudget_tokens = {BUDGET}\n")
    return home


# (global options, env): each way the CLI is given the file
GIVEN = [
    ([], {"TIERMEM_CONFIG": "~/c.toml"}),  # env: no shell expands it
    (["--config=~/c.toml"], {}),  # one word: the shell expands only a ~ that starts a word
]


@pytest.mark.parametrize(("options", "env"), GIVEN)
def test_the_cli_reads_the_file_under_home(home: Path, tmp_path: Path, options: list[str],
                                           env: dict[str, str]) -> None:
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "d"), *options, "config", "--json"],
                             obj=CliState(), env=env)
    assert res.exit_code == 0, res.output
    (row,) = [r for r in json.loads(res.stdout) if r["key"] == "hot_budget_tokens"]
    assert (row["value"], row["source"]) == (BUDGET, f"file {home / 'c.toml'}")


def test_the_library_reads_the_file_env_names_under_home(home: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_CONFIG", "~/c.toml")
    assert Config(data_dir=tmp_path).hot_budget_tokens == BUDGET
    assert Config.load(data_dir=tmp_path).hot_budget_tokens == BUDGET


def test_a_file_to_check_too(home: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "d"), "config", "--check=~/c.toml", "--json"],
                             obj=CliState())
    assert res.exit_code == 0, res.output
    (row,) = [r for r in json.loads(res.stdout) if r["key"] == "hot_budget_tokens"]
    assert row["value"] == BUDGET


def test_a_home_of_no_user_is_refused_naming_the_file(home: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    given = "~no_such_user_zq/c.toml"
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "d"), "config"], obj=CliState(),
                             env={"TIERMEM_CONFIG": given})
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "--config" in res.output and given in res.output and "no user's home" in res.output, res.output
    monkeypatch.setenv("TIERMEM_CONFIG", given)
    with pytest.raises(ValueError, match=f"config file {given} .*no user's home"):
        Config(data_dir=tmp_path)
    assert not (tmp_path / "d").exists()
