"""A relative path in a config file is read against the file's own directory, as docker
compose, git and most tools read theirs; env variables, keyword arguments and CLI options
keep reading it against the working directory. Before, `data_dir = "data"` in
/etc/tiermem/c.toml meant ./data wherever the command ran: each working directory got a
database of its own, and a service started by an init system (cwd /) wrote to /data.

On the code before, every file case whose value is relative fails (the value stayed
relative to the working directory); the absolute, home, env, keyword and empty cases pass
there too: they pin what must not change."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pydantic
import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.config import Config
from tiermem.evals.tune import best_toml

pytestmark = pytest.mark.usefixtures("clean_env")


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(the config file's directory, the working directory): two different places."""
    conf, cwd = tmp_path / "etc" / "tiermem", tmp_path / "elsewhere"
    conf.mkdir(parents=True)
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return conf, cwd


# (file name, its text, the setting, the expected value: "{conf}", "{cwd}" and "{home}" filled in)
FILE_CASES = [
    ("c.toml", 'data_dir = "data"\n', "data_dir", "{conf}/data"),  # the report's case, flat name
    ("c.toml", '[storage]\ndata_dir = "./data"\n', "data_dir", "{conf}/data"),  # in its section
    ("c.toml", 'data_dir = "."\n', "data_dir", "{conf}"),  # '.' is the file's directory
    ("c.toml", '[embedding]\ncache_dir = "cache"\n', "embedding_cache_dir", "{conf}/cache"),
    ("c.toml", '[embedding]\nmodel = "../models/m"\n', "embedding_model", "{conf}/../models/m"),  # '..' kept
    ("c.json", '{"storage": {"data_dir": "d"}}', "data_dir", "{conf}/d"),  # a JSON file the same
    ("c.toml", 'data_dir = "/abs/data"\n', "data_dir", "/abs/data"),  # absolute: unchanged
    ("c.toml", 'data_dir = "~/tm"\n', "data_dir", "{home}/tm"),  # home: unchanged
]


@pytest.mark.parametrize(("name", "text", "attr", "want"), FILE_CASES)
def test_a_file_path_is_read_against_the_file(layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
                                              name: str, text: str, attr: str, want: str) -> None:
    conf, cwd = layout
    f = conf / name
    f.write_text(text)
    expected = Path(want.format(conf=conf, cwd=cwd, home=os.environ["HOME"]))
    if attr == "embedding_model":  # refused unless it has a model's files (only their names are read)
        expected.mkdir(parents=True)
        (expected / "config.json").write_text("{}")
        (expected / "model.safetensors").write_bytes(b"\0" * 64)
    assert getattr(Config.load(f), attr) == expected
    # Config() reading the file env TIERMEM_CONFIG names agrees
    monkeypatch.setenv("TIERMEM_CONFIG", str(f))
    assert getattr(Config(), attr) == expected


def test_a_config_file_named_by_a_relative_path(layout: tuple[Path, Path]) -> None:
    # the file's own path is read against the working directory, its settings against the file
    _conf, cwd = layout
    (cwd / "sub").mkdir()
    (cwd / "sub" / "c.toml").write_text('data_dir = "data"\n')
    assert Config.load("sub/c.toml").data_dir == cwd / "sub" / "data"


# (where the relative value comes from) -- each keeps the working directory's reading
@pytest.mark.parametrize("how", [
    "env",       # TIERMEM_DATA_DIR=rel, over a file's relative data_dir
    "sectioned-env",  # TIERMEM_STORAGE__DATA_DIR=rel
    "kwargs",    # Config.load(path, data_dir="rel")
])
def test_env_and_arguments_keep_the_working_directory(layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
                                                      how: str) -> None:
    conf, _cwd = layout
    f = conf / "c.toml"
    f.write_text('data_dir = "from-file"\n[embedding]\ncache_dir = "cache"\n')
    kwargs: dict[str, Any] = {}
    if how == "kwargs":
        kwargs = {"data_dir": "rel"}
    else:
        monkeypatch.setenv("TIERMEM_DATA_DIR" if how == "env" else "TIERMEM_STORAGE__DATA_DIR", "rel")
    cfg = Config.load(f, **kwargs)
    assert cfg.data_dir == Path("rel")
    assert cfg.embedding_cache_dir == conf / "cache"  # the file's other path, still the file's


@pytest.mark.parametrize("text", ['data_dir = ""\n', 'data_dir = "  "\n'])
def test_an_empty_path_in_a_file_is_still_refused(layout: tuple[Path, Path], text: str) -> None:
    # not read as the file's directory: an empty value stays an error naming the setting
    conf, _cwd = layout
    (conf / "c.toml").write_text(text)
    with pytest.raises(pydantic.ValidationError, match="data_dir"):
        Config.load(conf / "c.toml")


def test_the_cli_reads_the_file_against_its_directory(layout: tuple[Path, Path]) -> None:
    conf, cwd = layout
    (conf / "c.toml").write_text('data_dir = "data"\n')
    runner = CliRunner()
    res = runner.invoke(cli, ["--config", str(conf / "c.toml"), "append", "c1", "--role", "user", "--content", "hi"],
                        obj=CliState())
    assert res.exit_code == 0, res.output
    assert (conf / "data" / "tiermem.db").is_file() and not (cwd / "data").exists()
    rows = json.loads(runner.invoke(cli, ["--config", str(conf / "c.toml"), "config", "--json"],
                                    obj=CliState()).stdout)
    row = next(r for r in rows if r["key"] == "data_dir")
    assert row["value"] == str(conf / "data") and row["source"] == f"file {conf / 'c.toml'}"
    # --data-dir keeps the working directory
    rows = json.loads(runner.invoke(cli, ["--config", str(conf / "c.toml"), "--data-dir", "rel", "config", "--json"],
                                    obj=CliState()).stdout)
    assert next(r for r in rows if r["key"] == "data_dir")["value"] == "rel"


def test_tune_write_config_keeps_the_base_files_directory(layout: tuple[Path, Path], tmp_path: Path) -> None:
    # the best candidate's file is written elsewhere: a base file's relative path must still
    # name the directory it named in the base
    conf, _cwd = layout
    base = conf / "base.toml"
    base.write_text('data_dir = "data"\n')
    best = {"values": {"retrieval.k": 3}, "ranked_by": "recall", "recall": 0.5, "candidate": "c1", "rule": "r",
            "budget": 500, "total_billed": 100, "billed_vs_full": 0.5}
    out = tmp_path / "out" / "best.toml"
    out.parent.mkdir()
    out.write_text(best_toml({"best": best, "data": "d.json"}, base)[0])
    assert Config.load(out).data_dir == Config.load(base).data_dir == conf / "data"
