"""`python -m tiermem.evals.second_model` refuses a data file with no question to score,
in one line naming the file (exit 1, as the other data-file errors), before any model
loads. Before, `[]` (or a file whose every question is adversarial or has no evidence
that resolves to a turn) loaded both models and printed "0 questions" with recall 0.0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from locomo_mini import question, sample

from tiermem.evals import second_model

pytestmark = pytest.mark.usefixtures("clean_env")

TEXTS = ["I adopted a grey cat named Pixel.", "Nice! How old is Pixel?", "She is two."]

# (what the file holds, how many questions are skipped)
NOTHING_TO_SCORE: list[tuple[str, list[dict[str, Any]], int]] = [
    ("empty_list", [], 0),  # the case reported: no sample at all
    ("no_questions", [sample("s", TEXTS, [])], 0),  # a conversation with no qa
    # every question skipped: adversarial (category 5), a turn that does not exist, an id
    # that is not one
    ("all_skipped", [sample("s", TEXTS, [question("What did Pixel paint?", "", ["D1:1"], category=5),
                                         question("Where?", "x", ["D9:9"]),
                                         question("Who?", "x", ["not-an-id"])])], 3),
]


def _no_model(*_: object) -> Any:
    raise AssertionError("a model was loaded for a file with nothing to score")


@pytest.mark.parametrize(("samples", "skipped"), [c[1:] for c in NOTHING_TO_SCORE],
                         ids=[c[0] for c in NOTHING_TO_SCORE])
def test_a_file_with_no_question_to_score_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      samples: list[dict[str, Any]], skipped: int) -> None:
    data = tmp_path / "data.json"
    data.write_text(json.dumps(samples), encoding="utf-8")
    # the real loaders, refused: the check comes before either model is loaded
    monkeypatch.setattr(second_model, "minilm_embedders", _no_model)
    monkeypatch.setitem(second_model.SECOND_MODELS, "wordllama", _no_model)
    out = tmp_path / "r.json"
    with pytest.raises(SystemExit) as exc:
        second_model.main(["--data", str(data), "--json-out", str(out)])
    assert isinstance(exc.value.code, str), exc.value.code
    assert exc.value.code.startswith(f"error: {data}: holds no question with evidence"), exc.value.code
    assert f"{len(samples)} samples, {skipped} questions skipped" in exc.value.code
    assert "\n" not in exc.value.code and exc.value.code.count(str(data)) == 1
    assert not out.exists()  # nothing written


def test_one_question_to_score_is_enough(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the refusal is for nothing to score, not for some questions skipped
    data = tmp_path / "data.json"
    data.write_text(json.dumps([sample("s", TEXTS, [question("What is the cat called?", "Pixel", ["D1:1"]),
                                                    question("Where?", "x", ["D9:9"])])]), encoding="utf-8")

    def bag(texts: list[str]) -> Any:
        return np.eye(len(texts), 4, dtype=np.float32)

    assert second_model.main(["--data", str(data), "--ks", "1"], embedders=(bag, bag, bag)) == 0
    assert capsys.readouterr().out.startswith("1 questions (1 skipped")


def test_the_module_prints_one_error_line(tmp_path: Path) -> None:
    # the command as typed: exit 1, one line on stderr, no traceback, no model loaded
    data = tmp_path / "data.json"
    data.write_text("[]", encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "tiermem.evals.second_model", "--data", str(data)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip() == (f"error: {data}: holds no question with evidence to score "
                                  f"(0 samples, 0 questions skipped: adversarial or no evidence)")
    assert res.stdout == ""
