"""`tiermem tune --write-config` writes the config the best candidate was measured under.

The file was the base file with the grid values over it: a setting env gave (a
TIERMEM_* variable, which every candidate was measured with) was not in it, so loading it
gave other values than those measured. `best_toml` now writes the candidate's whole
effective config (not the run's temporary data dir; secrets left out unless asked), and
a null TOML cannot say is refused naming the key (JSON keeps it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tiermem.config import Config
from tiermem.errors import ValidationError
from tiermem.evals.tune import best_toml, candidates

pytestmark = pytest.mark.usefixtures("clean_env")

RESULT_BEST = {"ranked_by": "recall", "recall": 0.5, "candidate": "c0", "rule": "r", "budget": 500,
               "total_billed": 100, "billed_vs_full": 0.5}

# (env, base file's settings, grid values of the best candidate, output name)
CASES = [
    # the finding: settings from env, in both spellings, with a base file's
    ({"TIERMEM_RETRIEVAL__RRF_K": "30", "TIERMEM_HOT_BUDGET_TOKENS": "900"}, {"hot": {"head_protect": 3}}, {},
     "best.toml"),
    # env under a grid value: the grid's wins, as measured
    ({"TIERMEM_RETRIEVAL_K": "9"}, {}, {"retrieval.k": 4}, "best.toml"),
    # a table's leaf from env beside the base's other leaf
    ({"TIERMEM_LAYER_SHARES__TAIL": "0.3"}, {"layer_shares": {"pinned": 0.05}}, {}, "best.toml"),
    # the base's null (TOML cannot say it): kept in a JSON file
    ({}, {"pricing": {"min_prefix_tokens": None}}, {"retrieval.k": 4}, "best.json"),
]


@pytest.mark.parametrize(("env", "base_data", "values", "name"), CASES)
def test_written_config_loads_to_the_measured_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  env: dict[str, str], base_data: dict[str, Any],
                                                  values: dict[str, Any], name: str) -> None:
    base = tmp_path / "base.json"
    base.write_text(json.dumps(base_data))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    grid = {k: [v] for k, v in values.items()}
    measured = candidates(base, grid)[0].config
    as_json = {"as_json": True} if name.endswith(".json") else {}  # TOML by default
    text, _ = best_toml({"best": {**RESULT_BEST, "values": values}, "data": "d.json"}, base, **as_json)
    out = tmp_path / name
    out.write_text(text, encoding="utf-8")
    for k in env:  # loaded where env no longer gives them: the file alone holds the values
        monkeypatch.delenv(k)
    loaded = Config.load(out).model_dump(mode="json")
    assert {k: v for k, v in loaded.items() if k != "data_dir"} == \
        {k: v for k, v in measured.model_dump(mode="json").items() if k != "data_dir"}


def test_a_null_toml_cannot_say_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"pricing": {"min_prefix_tokens": None}}))
    with pytest.raises(ValidationError, match=r"^pricing\.min_prefix_tokens: .*JSON"):
        best_toml({"best": {**RESULT_BEST, "values": {}}, "data": "d.json"}, base)
