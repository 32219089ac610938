"""`tiermem --help` says where --data-dir and --namespace come from when not given.

Its --data-dir line said "default ~/.local/share/tiermem" while the default is
$XDG_DATA_HOME/tiermem wherever XDG_DATA_HOME is set (config.default_data_dir), and its
--namespace line did not name TIERMEM_NAMESPACE, which it reads. Each rule the help states
is checked against what the CLI does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import cli

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


def help_text() -> str:
    r = CliRunner().invoke(cli, ["--help"])
    assert r.exit_code == 0, r.output
    return " ".join(r.output.split())  # click wraps lines: one space between words


def option_help(name: str) -> str:
    """The help of the global option `name`, up to the next option."""
    text = help_text()
    start = text.index(f"{name} ")
    return text[start:text.index(" --", start + len(name))]


@pytest.mark.parametrize("option, says", [
    # both defaults, and when each applies
    ("--data-dir", "$XDG_DATA_HOME/tiermem"),
    ("--data-dir", "~/.local/share/tiermem where XDG_DATA_HOME is unset"),
    ("--data-dir", "env TIERMEM_DATA_DIR"),
    ("--data-dir", "config file's data_dir"),
    # the env variable the option reads
    ("--namespace", "env TIERMEM_NAMESPACE"),
])
def test_help_says_where_the_value_comes_from(option: str, says: str) -> None:
    assert says in option_help(option)


def config_value(env: dict[str, str], key: str) -> str:
    r = CliRunner().invoke(cli, ["config", "--json"], env=env)
    assert r.exit_code == 0, r.output
    return next(row["value"] for row in json.loads(r.output) if row["key"] == key)


def test_the_data_dir_default_is_the_one_the_help_states(tmp_path: Path) -> None:
    # with XDG_DATA_HOME: under it, not under ~/.local/share
    assert Path(config_value({"XDG_DATA_HOME": str(tmp_path / "xdg")}, "data_dir")) == tmp_path / "xdg" / "tiermem"
    # without: under the home directory
    home = tmp_path / "home"
    assert Path(config_value({"XDG_DATA_HOME": "", "HOME": str(home)}, "data_dir")) == (
        home / ".local" / "share" / "tiermem")
