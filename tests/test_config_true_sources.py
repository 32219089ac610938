"""`tiermem config` names the true source of a value: a bad `data_dir` is refused naming
where it came from (file, env variable, `--data-dir`, default), as every other command
does (`CliState.config`); and a whole table given as JSON in one variable is the source of
the leaves it holds, not of the sibling leaves it left at their defaults (or to a file).

Before, `tiermem config` (plain, `--check`, `--export`) refused a bad data_dir without its
source, and `TIERMEM_PRICING='{"input_per_mtok": 3}'` was shown as the source of
`pricing.cached_input_ratio` too, which it did not set (and, until `NESTED_FIELDS` was
derived from the model, `TIERMEM_LAYER_SHARES='{"tail": 0.2}'` of pinned and summary). Every case below fails on the code
before except the ones marked as pinning what was already right."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")


# (how data_dir is given, the config subcommand's options, the source the error must name)
BAD_DATA_DIR = [
    ("file", [], "file {conf}"),  # a config file's data_dir, flat
    ("file-section", [], "file {conf}"),  # [storage] data_dir
    ("check", ["--check", "{conf}"], "file {conf}"),  # the file --check names, not --config's
    ("file", ["--export", "-"], "file {conf}"),  # --export reads the config too
    ("env", [], "env TIERMEM_STORAGE__DATA_DIR"),  # the sectioned variable (click reads TIERMEM_DATA_DIR)
    ("option", [], "--data-dir"),  # a path below a file: click refuses only the file itself
    ("default", [], "default"),  # XDG_DATA_HOME is a file: the default data_dir is below it
]


@pytest.mark.parametrize(("how", "options", "source"), BAD_DATA_DIR)
def test_config_names_where_a_bad_data_dir_came_from(tmp_path: Path, how: str, options: list[str],
                                                     source: str) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    bad = a_file / "sub"
    conf = tmp_path / "c.toml"
    conf.write_text(f'[storage]\ndata_dir = "{bad}"\n' if how == "file-section" else f'data_dir = "{bad}"\n')
    top: list[str] = []
    env: dict[str, str] = {}
    if how in ("file", "file-section"):
        top = ["--config", str(conf)]
    elif how == "env":
        env = {"TIERMEM_STORAGE__DATA_DIR": str(bad)}
    elif how == "option":
        top = ["--data-dir", str(bad)]
    elif how == "default":
        env = {"XDG_DATA_HOME": str(a_file)}
    args = [*top, "config", *[o.format(conf=conf) for o in options]]
    res = CliRunner().invoke(cli, args, obj=CliState(), env=env)
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert f"(data_dir from {source.format(conf=conf)})" in res.stderr, res.stderr
    assert "must be a directory" in res.stderr, res.stderr
    assert a_file.read_text() == "x"


def _rows(tmp_path: Path, env: dict[str, str], conf: Path | None = None) -> dict[str, tuple[object, str]]:
    top = ["--config", str(conf)] if conf is not None else []
    res = CliRunner().invoke(cli, [*top, "--data-dir", str(tmp_path), "config", "--json"], obj=CliState(), env=env)
    assert res.exit_code == 0, res.output
    return {r["key"]: (r["value"], r["source"]) for r in json.loads(res.stdout)}


# (the variable, its JSON, a row it set, a sibling row it did not set, that sibling's value)
JSON_TABLES = [
    ("TIERMEM_PRICING", '{"input_per_mtok": 3}', "pricing.input_per_mtok",
     "pricing.cached_input_ratio", 0.1),  # the report's case: a sibling leaf of the same table
    ("TIERMEM_PLANNER__SLICE_SHARES__NEW_SUBTASK", '{"retrieved": 0.05}', "slice_shares.new_subtask.retrieved",
     "slice_shares.default.retrieved", 0.4),  # a class given as JSON under its sectioned name
    ("TIERMEM_SLICE_SHARES", '{"default": {"retrieved": 0.05}}', "slice_shares.default.retrieved",
     "slice_shares.new_subtask.retrieved", 0.25),  # a class it did not give at all
    ("TIERMEM_PLANNER__SLICE_SHARES", '{"new_subtask": {"retrieved": 0.05}}', "slice_shares.new_subtask.retrieved",
     "slice_shares.default.retrieved", 0.4),  # the sectioned spelling of the table
    ("TIERMEM_SLICE_SHARES__DEFAULT", '{"retrieved": 0.05}', "slice_shares.default.retrieved",
     "slice_shares.new_subtask.retrieved", 0.25),  # a class given as JSON under its nested name
    # layer_shares was one row before (left out of NESTED_FIELDS), the variable its source whole
    ("TIERMEM_LAYER_SHARES", '{"tail": 0.2}', "layer_shares.tail",
     "layer_shares.pinned", 0.1),  # the review's case: pinned's default credited to the variable
    ("TIERMEM_PLANNER__LAYER_SHARES", '{"summary": 0.3}', "layer_shares.summary",
     "layer_shares.tail", 0.1),  # the sectioned spelling of the table
]


@pytest.mark.parametrize(("name", "text", "set_key", "sibling", "default"), JSON_TABLES)
def test_a_json_table_is_the_source_of_its_own_leaves_only(tmp_path: Path, name: str, text: str, set_key: str,
                                                           sibling: str, default: float) -> None:
    rows = _rows(tmp_path, {name: text})
    assert rows[set_key][1] == f"env {name}"  # pins what was right: the leaf it holds
    assert rows[sibling] == (default, "default")


def test_a_sibling_from_the_file_is_the_files(tmp_path: Path) -> None:
    # the file's leaf, merged under the variable's table, is shown as the file's
    conf = tmp_path / "c.toml"
    conf.write_text("[slice_shares.default]\nretrieved = 0.03\n")
    rows = _rows(tmp_path, {"TIERMEM_SLICE_SHARES": '{"new_subtask": {"retrieved": 0.02}}'}, conf)
    assert rows["slice_shares.new_subtask.retrieved"] == (0.02, "env TIERMEM_SLICE_SHARES")
    assert rows["slice_shares.default.retrieved"] == (0.03, f"file {conf}")


def test_every_table_setting_is_shown_one_leaf_per_row(tmp_path: Path) -> None:
    # derived from the defaults, not a list: a table-valued setting added later is covered too
    # (bearer-token tables excepted: their keys are secrets, redacted with the row)
    from tiermem.config import SECRET_KEYED_FIELDS, Config

    rows = _rows(tmp_path, {})
    tables = {k: v for k, v in Config(data_dir=tmp_path).model_dump(mode="json").items()
              if isinstance(v, dict) and v and k not in SECRET_KEYED_FIELDS}
    assert {"layer_shares", "pricing", "slice_shares"} <= set(tables)
    for name, table in tables.items():
        assert name not in rows, name  # not one row for the whole table
        assert {k.split(".")[1] for k in rows if k.startswith(name + ".")} == set(table), name  # every key
