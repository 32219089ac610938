"""A path setting that starts with `~` (`data_dir = "~/tiermem"` in a config file, or in env,
where no shell expands it) means the home directory, for every tier. Before, the SQLite
log went to a directory literally named `~` under the working directory while the embedded
Redis (which expands it) went to `$HOME/tiermem`: each directory a command ran from had a
log of its own, and `tiermem config` showed the unexpanded path. A `~user` of no user is
refused naming the setting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Config
from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")


def test_a_data_dir_under_home_in_a_file_keeps_the_log_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(home))
    f = tmp_path / "c.toml"
    f.write_text('[storage]\ndata_dir = "~/tm"\n')
    res = CliRunner().invoke(cli, ["--config", str(f), "append", "c1", "--role", "user", "--content", "hello"],
                             obj=CliState())
    assert res.exit_code == 0, res.output
    assert (home / "tm" / "tiermem.db").is_file()
    assert os.listdir(cwd) == []  # no directory named "~" here


# (setting, the value given): each path setting, flat or in a section
@pytest.mark.parametrize(("setting", "given"), [
    ("data_dir", "~/tm"),
    ("embedding_cache_dir", "~/.cache/onnx"),
    ("embedding_model", "~/models/minilm"),
    ("data_dir", "~"),  # the home directory itself
])
def test_each_path_setting_expands_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      setting: str, given: str) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    if setting == "embedding_model":  # refused unless it has a model's files (only their names are read)
        model = tmp_path / given.removeprefix("~/")
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")
        (model / "model.safetensors").write_bytes(b"\0" * 64)
    monkeypatch.setenv(f"TIERMEM_{setting.upper()}", given)
    kwargs = {} if setting == "data_dir" else {"data_dir": tmp_path / "d"}
    assert getattr(Config(**kwargs), setting) == tmp_path / given.removeprefix("~").lstrip("/")


def test_a_home_of_no_user_is_refused_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"embedding_cache_dir\n.*no user's home"):
        Config(data_dir=tmp_path, embedding_cache_dir="~no_such_user_zq/onnx")
