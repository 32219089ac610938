"""A value assigned to one of Config's tables after construction (`cfg.layer_shares.tail`,
`cfg.pricing.input_per_mtok`, a `slice_shares` class's share) meets the rules of one given
at construction, as Config's own settings do (test_config_assignment.py); a refused one
changes nothing. Before, `cfg.layer_shares.tail = 5` or a NaN price was taken as is: the
nested models had no validate_assignment, so neither the field rules nor the share sum
check (7143896) ran on an assignment."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from tiermem import Config

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


def _table(cfg: Config, path: str) -> BaseModel:
    """`layer_shares` -> cfg.layer_shares; `slice_shares.default` -> cfg.slice_shares["default"]."""
    head, _, key = path.partition(".")
    table = getattr(cfg, head)
    return table[key] if key else table  # type: ignore[no-any-return]


# (table, field, a value its rules refuse, what the error says)
REFUSED = [
    ("layer_shares", "tail", 5, "less than or equal to 1"),           # past its own ceiling
    ("layer_shares", "tail", 0.9, "sum must be at most 1"),           # alone fine, with the others' 0.1 each 1.1
    ("layer_shares", "pinned", float("nan"), "finite number"),        # NaN: NaN caps in the planner
    ("layer_shares", "summary", True, "boolean"),                     # a boolean is no share
    ("pricing", "input_per_mtok", float("nan"), "finite number"),     # NaN costs in every report
    ("pricing", "input_per_mtok", -1.0, "greater than or equal to 0"),  # a negative price
    ("pricing", "cached_input_ratio", 2.0, "less than or equal to 1"),  # cached dearer than uncached
    ("slice_shares.default", "retrieved", float("inf"), "finite number"),  # an infinite share
    ("slice_shares.new_subtask", "retrieved", -0.5, "greater than or equal to 0"),  # a negative share
]


@pytest.mark.parametrize(("table", "field", "value", "said"), REFUSED)
def test_a_nested_assignment_is_checked_and_a_refused_one_changes_nothing(
        table: str, field: str, value: Any, said: str) -> None:
    cfg = Config()
    model = _table(cfg, table)
    before = model.model_dump()
    with pytest.raises(ValidationError) as err:
        setattr(model, field, value)
    assert said in str(err.value)
    assert model.model_dump() == before  # the refused value is not left behind


def test_the_same_value_is_refused_at_construction() -> None:
    # the consistency the assignment now has: each refused value above is refused here too
    for table, field, value, said in REFUSED:
        head, _, key = table.partition(".")
        given = {head: {key: {field: value}} if key else {field: value}}
        with pytest.raises(ValidationError) as err:
            Config(**given)
        assert said in str(err.value), (table, field, value)


def test_a_good_nested_assignment_takes() -> None:
    cfg = Config()
    cfg.layer_shares.tail = 0.3  # with 0.1 + 0.1: a sum of 0.5
    cfg.pricing.input_per_mtok = 3  # an int is taken as the float it means
    cfg.slice_shares["default"].retrieved = 0.05
    assert (cfg.layer_shares.tail, cfg.pricing.input_per_mtok, cfg.slice_shares["default"].retrieved) == (0.3, 3.0, 0.05)
    assert isinstance(cfg.pricing.input_per_mtok, float)
