"""A table's variable that is empty or not JSON, beside a leaf's variable: the table's own
error ("must be JSON (a table)"), not "set twice".

`_env_leaves_once` counted such a variable as setting the whole table, so any leaf's
variable beside it was reported as set twice, hiding the real fault (an empty or
malformed table). A table's variable now sets leaves only where its text is a JSON object.
"""

from __future__ import annotations

import pytest

from tiermem.config import Config

pytestmark = pytest.mark.usefixtures("clean_env")

# (env, the variable the error names)
CASES = [
    ({"TIERMEM_LAYER_SHARES": "", "TIERMEM_LAYER_SHARES__TAIL": "0.2"}, "TIERMEM_LAYER_SHARES"),  # the finding: empty
    ({"TIERMEM_LAYER_SHARES": "{tail: 0.3}", "TIERMEM_LAYER_SHARES__PINNED": "0.05"},
     "TIERMEM_LAYER_SHARES"),  # not JSON (keys unquoted)
    ({"TIERMEM_LAYER_SHARES": "[0.3]", "TIERMEM_LAYER_SHARES__TAIL": "0.2"}, "TIERMEM_LAYER_SHARES"),  # a list
    ({"TIERMEM_PLANNER__LAYER_SHARES": "x", "TIERMEM_PLANNER__LAYER_SHARES__TAIL": "0.2"},
     "TIERMEM_PLANNER__LAYER_SHARES"),  # sectioned spelling
    ({"TIERMEM_SLICE_SHARES__DEFAULT": "x", "TIERMEM_SLICE_SHARES__DEFAULT__TAIL": "0.2"},
     "TIERMEM_SLICE_SHARES__DEFAULT"),  # a sub-table of a table of tables
    ({"TIERMEM_PRICING": "", "TIERMEM_PRICING__MIN_PREFIX_TOKENS": "2048"}, "TIERMEM_PRICING"),  # pricing
]


@pytest.mark.parametrize(("env", "name"), CASES)
def test_table_error_not_set_twice(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], name: str) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValueError, match="must be JSON") as exc:
        Config()
    assert "set twice" not in str(exc.value) and name in str(exc.value)


def test_two_leaf_variables_still_set_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    # one leaf in both spellings: still refused, naming both (a leaf is not a table)
    monkeypatch.setenv("TIERMEM_LAYER_SHARES__TAIL", "0.2")
    monkeypatch.setenv("TIERMEM_PLANNER__LAYER_SHARES__TAIL", "0.3")
    with pytest.raises(ValueError, match=r"layer_shares\.tail is set twice in env"):
        Config()


@pytest.mark.parametrize("null", [
    "null",    # the table unset as JSON
    " null ",  # with the spaces a shell may keep
])
def test_a_null_table_beside_a_leaf_is_refused(monkeypatch: pytest.MonkeyPatch, null: str) -> None:
    # null unsets the whole table and pydantic-settings then drops the leaf's variable: the
    # 0.2 was ignored without a word (b97e33f); it is refused as set twice, naming both
    monkeypatch.setenv("TIERMEM_LAYER_SHARES", null)
    monkeypatch.setenv("TIERMEM_LAYER_SHARES__TAIL", "0.2")
    with pytest.raises(ValueError, match=r"layer_shares\.tail is set twice in env") as exc:
        Config()
    assert "TIERMEM_LAYER_SHARES__TAIL" in str(exc.value)


def test_a_null_table_alone_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    # alone, null still means the defaults, as before
    monkeypatch.setenv("TIERMEM_LAYER_SHARES", "null")
    assert Config().layer_shares == Config.model_fields["layer_shares"].get_default(call_default_factory=True)
