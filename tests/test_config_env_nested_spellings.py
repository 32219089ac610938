"""Env may name one nested setting's leaves in both spellings, the flat one
(`TIERMEM_SLICE_SHARES__DEFAULT__RETRIEVED`) and the sectioned one
(`TIERMEM_PLANNER__SLICE_SHARES__NEW_SUBTASK__RETRIEVED`): each leaf it sets is kept, and a leaf
given both ways is refused naming both variables, as a top-level setting given both ways
already was. Before, the two were merged one level deep only: the sectioned class table
replaced the flat one, so the flat variable's share was silently dropped (while
`tiermem config` said it came from that variable), and a leaf given twice was a silent
pick of the sectioned value."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Config
from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")


# (env, attribute path, the value each must end with)
KEPT = [
    # the flat spelling names one class's share, the sectioned one another class's
    ({"TIERMEM_SLICE_SHARES__DEFAULT__RETRIEVED": "0.05", "TIERMEM_PLANNER__SLICE_SHARES__NEW_SUBTASK__RETRIEVED": "0.06"},
     [("slice_shares.default.retrieved", 0.05), ("slice_shares.new_subtask.retrieved", 0.06)]),
    # the flat spelling as a JSON table, the sectioned one a leaf of another class
    ({"TIERMEM_SLICE_SHARES": '{"new_subtask": {"retrieved": 0.03}}',
      "TIERMEM_PLANNER__SLICE_SHARES__DEFAULT__RETRIEVED": "0.02"},
     [("slice_shares.new_subtask.retrieved", 0.03), ("slice_shares.default.retrieved", 0.02)]),
    # one level deep (layer_shares), which was already merged: still is
    ({"TIERMEM_LAYER_SHARES__PINNED": "0.3", "TIERMEM_PLANNER__LAYER_SHARES__TAIL": "0.2"},
     [("layer_shares.pinned", 0.3), ("layer_shares.tail", 0.2)]),
]


def _get(cfg: Config, path: str) -> object:
    cur: object = cfg
    for part in path.split("."):
        cur = cur[part] if isinstance(cur, dict) else getattr(cur, part)
    return cur


@pytest.mark.parametrize(("env", "want"), KEPT)
def test_each_leaf_of_either_spelling_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              env: dict[str, str], want: list[tuple[str, float]]) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    cfg = Config(data_dir=tmp_path)
    for path, value in want:
        assert _get(cfg, path) == value, path


# (env: one leaf given in both spellings, the leaf the error names)
TWICE = [
    ({"TIERMEM_SLICE_SHARES__DEFAULT__RETRIEVED": "0.06", "TIERMEM_PLANNER__SLICE_SHARES__DEFAULT__RETRIEVED": "0.05"},
     "slice_shares.default.retrieved"),
    ({"TIERMEM_LAYER_SHARES__TAIL": "0.2", "TIERMEM_PLANNER__LAYER_SHARES__TAIL": "0.3"}, "layer_shares.tail"),
    # a whole table in one spelling and one of its leaves in the other
    ({"TIERMEM_LAYER_SHARES": '{"tail": 0.2}', "TIERMEM_PLANNER__LAYER_SHARES__TAIL": "0.3"}, "layer_shares.tail"),
]


@pytest.mark.parametrize(("env", "leaf"), TWICE)
def test_a_leaf_given_both_ways_is_refused_naming_both(tmp_path: Path, env: dict[str, str], leaf: str) -> None:
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config"], obj=CliState(), env=env)
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert leaf in res.stderr and "set twice in env" in res.stderr, res.stderr
    for name in env:
        assert name in res.stderr, (name, res.stderr)
