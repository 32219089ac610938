"""`tiermem config` names the variable that set a setting shown as one row (a table such
as `layer_shares`) when the variable names one of its keys (`TIERMEM_LAYER_SHARES__TAIL`,
or in its section, `TIERMEM_PLANNER__LAYER_SHARES__TAIL`). Before, only the table's own
name (its JSON) was looked for: the row showed the changed value with source `default`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")


# (the variable, its value, the row, the value the row must show)
CASES = [
    ("TIERMEM_LAYER_SHARES__TAIL", "0.2", "layer_shares", {"pinned": 0.1, "summary": 0.1, "tail": 0.2}),  # flat
    ("TIERMEM_PLANNER__LAYER_SHARES__PINNED", "0.3", "layer_shares",
     {"pinned": 0.3, "summary": 0.1, "tail": 0.1}),  # in its section
    ("TIERMEM_LAYER_SHARES", '{"summary": 0.4}', "layer_shares",
     {"pinned": 0.1, "summary": 0.4, "tail": 0.1}),  # the whole table as JSON: was already named
]


@pytest.mark.parametrize(("name", "value", "key", "shown"), CASES)
def test_the_variable_of_a_table_row_is_its_source(tmp_path: Path, name: str, value: str, key: str,
                                                   shown: object) -> None:
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--json"], obj=CliState(),
                             env={name: value})
    assert res.exit_code == 0, res.output
    (row,) = [r for r in json.loads(res.stdout) if r["key"] == key]
    assert (row["value"], row["source"]) == (shown, f"env {name}")
