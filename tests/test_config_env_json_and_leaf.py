"""A table given as JSON in env and one of its leaves by its own variable: refused,
naming both, in either spelling.

Across spellings (`TIERMEM_LAYER_SHARES` and `TIERMEM_PLANNER__LAYER_SHARES__TAIL`) it was
refused as set twice; within one (`TIERMEM_LAYER_SHARES__TAIL`) the leaf silently won, so
which value acted hung on how the two were spelt. A leaf the JSON leaves out still merges.
"""

from __future__ import annotations

import pytest

from tiermem.config import Config

pytestmark = pytest.mark.usefixtures("clean_env")

# (env, the two variables the error names)
TWICE = [
    # the finding: same spelling, the leaf won
    ({"TIERMEM_LAYER_SHARES": '{"tail": 0.3}', "TIERMEM_LAYER_SHARES__TAIL": "0.2"},
     ("TIERMEM_LAYER_SHARES", "TIERMEM_LAYER_SHARES__TAIL")),
    # same, sectioned spelling
    ({"TIERMEM_PLANNER__LAYER_SHARES": '{"tail": 0.3}', "TIERMEM_PLANNER__LAYER_SHARES__TAIL": "0.2"},
     ("TIERMEM_PLANNER__LAYER_SHARES", "TIERMEM_PLANNER__LAYER_SHARES__TAIL")),
    # across spellings: refused before, still
    ({"TIERMEM_LAYER_SHARES": '{"tail": 0.3}', "TIERMEM_PLANNER__LAYER_SHARES__TAIL": "0.2"},
     ("TIERMEM_LAYER_SHARES", "TIERMEM_PLANNER__LAYER_SHARES__TAIL")),
    # a table of tables and a sub-table as JSON
    ({"TIERMEM_SLICE_SHARES": '{"default": {"retrieved": 0.1}}',
      "TIERMEM_SLICE_SHARES__DEFAULT": '{"retrieved": 0.2}'},
     ("TIERMEM_SLICE_SHARES", "TIERMEM_SLICE_SHARES__DEFAULT")),
    # pricing, top level: a leaf under the JSON's
    ({"TIERMEM_PRICING": '{"min_prefix_tokens": 2048}', "TIERMEM_PRICING__MIN_PREFIX_TOKENS": "4096"},
     ("TIERMEM_PRICING", "TIERMEM_PRICING__MIN_PREFIX_TOKENS")),
]
# (env, what it gives): the JSON and a leaf it leaves out merge
MERGED = [
    ({"TIERMEM_LAYER_SHARES": '{"pinned": 0.05}', "TIERMEM_LAYER_SHARES__TAIL": "0.2"}, (0.05, 0.2)),
    ({"TIERMEM_LAYER_SHARES": "{}", "TIERMEM_PLANNER__LAYER_SHARES__TAIL": "0.2"}, (0.1, 0.2)),  # empty JSON
]


@pytest.mark.parametrize(("env", "names"), TWICE)
def test_set_twice_refused(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], names: tuple[str, str]) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValueError, match="set twice in env") as exc:
        Config()
    assert all(n in str(exc.value) for n in names)


@pytest.mark.parametrize(("env", "shares"), MERGED)
def test_other_leaves_merge(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], shares: tuple[float, float]) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    c = Config()
    assert (c.layer_shares.pinned, c.layer_shares.tail) == shares
