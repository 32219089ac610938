"""`tiermem config` names the variable that set a setting shown as one row (a table such
as `layer_shares`) when the variable names one of its keys (`TIERMEM_LAYER_SHARES__TAIL`,
or in its section, `TIERMEM_PLANNER__LAYER_SHARES__TAIL`). Before, only the table's own
name (its JSON) was looked for: the row showed the changed value with source `default`.
Now `layer_shares` is shown one leaf per row (`NESTED_FIELDS`), each with its own source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")


# (the variables, each row they set -> (its value, the variable it must name), the rows left at
# their defaults) -- a variable is the source of the leaf it names only; before, the table was
# one row, credited to the first variable found: of two, one went unnamed, and the defaults
# beside them were shown as the variable's
CASES = [
    ({"TIERMEM_LAYER_SHARES__TAIL": "0.2"}, {"layer_shares.tail": (0.2, "TIERMEM_LAYER_SHARES__TAIL")},
     {"layer_shares.pinned": 0.1, "layer_shares.summary": 0.1}),  # flat
    ({"TIERMEM_PLANNER__LAYER_SHARES__PINNED": "0.3"},
     {"layer_shares.pinned": (0.3, "TIERMEM_PLANNER__LAYER_SHARES__PINNED")},
     {"layer_shares.summary": 0.1, "layer_shares.tail": 0.1}),  # in its section
    ({"TIERMEM_LAYER_SHARES__TAIL": "0.2", "TIERMEM_PLANNER__LAYER_SHARES__PINNED": "0.15"},
     {"layer_shares.tail": (0.2, "TIERMEM_LAYER_SHARES__TAIL"),
      "layer_shares.pinned": (0.15, "TIERMEM_PLANNER__LAYER_SHARES__PINNED")},
     {"layer_shares.summary": 0.1}),  # two variables, two spellings: each named for its own leaf
    ({"TIERMEM_LAYER_SHARES": '{"summary": 0.4}'}, {"layer_shares.summary": (0.4, "TIERMEM_LAYER_SHARES")},
     {"layer_shares.pinned": 0.1, "layer_shares.tail": 0.1}),  # the whole table as JSON: its own leaves only
    ({"TIERMEM_PRICING__INPUT_PER_MTOK": "3"}, {"pricing.input_per_mtok": (3.0, "TIERMEM_PRICING__INPUT_PER_MTOK")},
     {"pricing.cached_input_ratio": 0.1}),  # another model-valued table (pins: pricing was split already)
]


@pytest.mark.parametrize(("env", "set_rows", "default_rows"), CASES)
def test_each_variable_is_the_source_of_its_own_leaf(tmp_path: Path, env: dict[str, str],
                                                     set_rows: dict[str, tuple[float, str]],
                                                     default_rows: dict[str, float]) -> None:
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--json"], obj=CliState(), env=env)
    assert res.exit_code == 0, res.output
    rows = {r["key"]: (r["value"], r["source"]) for r in json.loads(res.stdout)}
    for key, (value, name) in set_rows.items():
        assert rows[key] == (value, f"env {name}"), key
    for key, default in default_rows.items():
        assert rows[key] == (default, "default"), key
