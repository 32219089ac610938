"""A TIERMEM_<setting of one value>__<anything> variable is refused, naming it.

`__` nests into a table (`TIERMEM_LAYER_SHARES__TAIL`). Below a setting of one value it
names nothing: the flat spelling was silently ignored (and `tiermem config` credited the
default to the variable), the sectioned one refused as a type error naming no variable.
README: a TIERMEM_* variable that names no setting is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from tiermem.cli import CliState, cli
from tiermem.config import Config

pytestmark = pytest.mark.usefixtures("clean_env")

# (variable, value, the variable to set instead, named in the error)
REFUSED = [
    ("TIERMEM_HOT_BUDGET_TOKENS__X", "300", "TIERMEM_HOT_BUDGET_TOKENS"),  # flat: was ignored
    ("TIERMEM_SCHEDULER_ENABLED__VALUE", "false", "TIERMEM_SCHEDULER_ENABLED"),  # a boolean: was ignored
    ("TIERMEM_HOT__BUDGET_TOKENS__X", "300", "TIERMEM_HOT__BUDGET_TOKENS"),  # sectioned: a type error naming none
    ("TIERMEM_RETRIEVAL__K__A__B", "3", "TIERMEM_RETRIEVAL__K"),  # deeper still
    ("TIERMEM_DATA_DIR__X", "/tmp/x", "TIERMEM_DATA_DIR"),  # a path setting
]
# tables still take their keys by `__` (each value read)
TABLE_KEYS = [
    ("TIERMEM_LAYER_SHARES__TAIL", "0.3", lambda c: c.layer_shares.tail == 0.3),  # flat
    ("TIERMEM_PLANNER__LAYER_SHARES__TAIL", "0.3", lambda c: c.layer_shares.tail == 0.3),  # sectioned
    ("TIERMEM_PRICING__MIN_PREFIX_TOKENS", "2048", lambda c: c.pricing.min_prefix_tokens == 2048),  # top level
    ("TIERMEM_PLANNER__SLICE_SHARES__DEFAULT__RETRIEVED", "0.05",
     lambda c: c.slice_shares["default"].retrieved == 0.05),  # two levels
]


@pytest.mark.parametrize(("name", "value", "own"), REFUSED)
def test_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str, own: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as exc:
        Config()
    text = str(exc.value)
    assert name in text and f"set {own}" in text


@pytest.mark.parametrize(("name", "value", "check"), TABLE_KEYS)
def test_table_keys_still_read(monkeypatch: pytest.MonkeyPatch, name: str, value: str, check: object) -> None:
    monkeypatch.setenv(name, value)
    assert check(Config())  # type: ignore[operator]


def test_config_command_refuses_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `tiermem config` showed hot_budget_tokens 4000 with source "env TIERMEM_HOT_BUDGET_TOKENS__X"
    monkeypatch.setenv("TIERMEM_HOT_BUDGET_TOKENS__X", "300")
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--json"], obj=CliState())
    assert res.exit_code != 0
    assert "TIERMEM_HOT_BUDGET_TOKENS__X" in res.output
    with pytest.raises(json.JSONDecodeError):
        json.loads(res.stdout)
