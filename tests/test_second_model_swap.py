"""evals.second_model --swap ranks with the second model as the dense base (stored and
query vectors) and asks whether MiniLM adds to it; --model-dir takes any local
sentence-transformers directory and refuses a path that is none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from convo_fixtures import SMALL_QA, one_session_locomo
from test_second_model import TURNS, bag, blank

from tiermem.evals import second_model


def run(tmp_path: Path, *extra: str) -> dict[str, Any]:
    data = one_session_locomo(tmp_path / "s.json", TURNS, SMALL_QA, sample_ids=("s-1", "s-2"))
    out = tmp_path / "r.json"
    assert second_model.main(["--data", str(data), "--ks", "1,3", "--json-out", str(out), *extra],
                             embedders=(bag, bag, blank)) == 0
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_swap_puts_the_second_model_first(tmp_path: Path) -> None:
    plain, swapped = run(tmp_path), run(tmp_path, "--swap")
    # the base's recall alone is what the second model alone was, and the other way round
    assert swapped["single"]["dense"] == plain["single"]["second"]
    assert swapped["single"]["second"] == plain["single"]["dense"]
    assert swapped["base"] == "wordllama" and swapped["model"] == "MiniLM"


def test_a_model_dir_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    data = one_session_locomo(tmp_path / "s.json", TURNS, SMALL_QA)
    with pytest.raises(SystemExit, match="--model-dir"):
        second_model.main(["--data", str(data), "--model-dir", str(tmp_path / "missing")])
