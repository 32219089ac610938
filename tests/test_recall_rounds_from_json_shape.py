"""`python -m tiermem.evals.recall_rounds --from-json PATH` checks the saved result's shape
while its arguments are parsed: an object lacking `variants` or `leave_one_out`, or
holding them (or the baselines, or the records --loo chooses on) in another shape than
--json-out writes, is a usage error naming the option and the key (exit 2). Before, such
a file passed the read and stopped inside `table()` (or loo_one_setting) with a KeyError,
AttributeError or TypeError traceback. Every refused row fails on the code before; a
result a real --json-out run saved still prints, --loo too (passes before and after)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from locomo_mini import question, sample, write

from tiermem.evals import recall_rounds

pytestmark = pytest.mark.usefixtures("clean_env")

BUDGET = 500
CATS = {str(c): None for c in (1, 2, 3, 4, 5)}
FIGURES = {"evidence_recall": 0.5, "by_category": CATS}
FOLD = {"chosen": "base", "chosen_on_others": 0.5, "held_out": 1.0, "base_held_out": 1.0}
GOOD: dict[str, Any] = {  # the least a saved result holds that the tables and --loo read
    "budgets": [BUDGET], "samples": ["a", "b"],
    "variants": {"base": {"budgets": {str(BUDGET): FIGURES}}},
    "leave_one_out": {str(BUDGET): {"a": FOLD}},
    "records": {"base": {str(BUDGET): [["a", 4, 1.0], ["b", 4, 0.0]]}},
}


def _without(*path: str) -> dict[str, Any]:
    out = copy.deepcopy(GOOD)
    at = out
    for key in path[:-1]:
        at = at[key]
    del at[path[-1]]
    return out


def _with(value: Any, *path: str) -> dict[str, Any]:
    out = copy.deepcopy(GOOD)
    at = out
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    return out


B = str(BUDGET)
# (id, the saved JSON object, what the error says after the file's name)
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    # the report's cases: a KeyError inside table()
    ("no_leave_one_out", _without("leave_one_out"), "has no 'leave_one_out' (a --json-out result holds"),
    ("no_variants", _without("variants"), "has no 'variants' (a --json-out result holds"),
    ("variants_a_list", _with([], "variants"), "variants must be an object, got a list"),
    ("no_budgets_in_variant", _without("variants", "base", "budgets"), "variants.base has no 'budgets'"),
    ("no_recall", _without("variants", "base", "budgets", B, "evidence_recall"),
     f"variants.base.budgets.{B} has no 'evidence_recall'"),
    ("recall_a_string", _with("50%", "variants", "base", "budgets", B, "evidence_recall"),
     f"variants.base.budgets.{B}.evidence_recall must be a number or null, got a string"),  # a TypeError
    ("a_category_missing", _without("variants", "base", "budgets", B, "by_category", "3"),
     f"variants.base.budgets.{B}.by_category has no '3'"),
    ("layer_tokens_a_list", _with([1], "variants", "base", "budgets", B, "layer_tokens"),
     f"variants.base.budgets.{B}.layer_tokens must be an object, got a list"),  # an AttributeError
    ("context_ms_a_number", _with(3, "variants", "base", "budgets", B, "context_ms"),
     f"variants.base.budgets.{B}.context_ms must be an object, got a number"),
    ("baselines_lack_figures", _with({"bm25_topk": {B: {}}}, "baselines"),
     f"baselines.bm25_topk.{B} has no 'evidence_recall'"),
    ("folds_a_list", _with([], "leave_one_out", B), f"leave_one_out.{B} must be an object, got a list"),
    ("fold_without_held_out", _without("leave_one_out", B, "a", "held_out"), f"leave_one_out.{B}.a has no 'held_out'"),
    ("fold_null_figure", _with(None, "leave_one_out", B, "a", "held_out"),
     f"leave_one_out.{B}.a.held_out must be a number, got null"),  # 100 * None: a TypeError
    # the records --loo reads
    ("records_without_budgets", _without("budgets"), "has no 'budgets' (--loo reads it with 'records')"),
    ("records_lack_a_budget", _with({"base": {}}, "records"), f"records.base has no '{B}'"),
    ("records_of_no_variant", _with({}, "records"), "records holds no variant"),  # an IndexError
    ("a_record_not_a_row", _with({"base": {B: [["a", 4]]}}, "records"),
     f"records.base.{B}[0] must be a [sample, category, value] list"),
]


@pytest.mark.parametrize(("saved", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_saved_result_of_another_shape_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          saved: dict[str, Any], words: str) -> None:
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(saved), encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        recall_rounds.main(["--from-json", str(path), "--loo", "--data-root", str(tmp_path / "root")])
    assert exc.value.code == 2  # a usage error, not a traceback
    err = capsys.readouterr().err
    assert f"argument --from-json: {str(path)!r}: {words}" in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "root").exists()


def test_the_least_a_result_holds_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(GOOD), encoding="utf-8")
    assert recall_rounds.main(["--from-json", str(path), "--loo"]) == 0
    out = capsys.readouterr().out
    assert f"LOO {BUDGET} a: chose base" in out and "leave-one-out, one setting per fold" in out


def test_a_real_saved_result_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # what --json-out writes (two samples: folds; the baselines; two variants) always reads
    texts = ["I adopted a grey cat named Pixel.", "Nice! How old is Pixel?", "She is two."]
    data = write(tmp_path / "data.json", [
        sample(sid, texts, [question("What is the cat called?", "Pixel", ["D1:1"])]) for sid in ("a", "b")])
    saved = tmp_path / "out.json"
    assert recall_rounds.main(["--data", str(data), "--data-root", str(tmp_path / "root"), "--budgets", str(BUDGET),
                               "--variant", "base:", "--variant", "hop:hop=1.0", "--baselines",
                               "--json-out", str(saved)]) == 0
    ran = capsys.readouterr().out
    assert recall_rounds.main(["--from-json", str(saved), "--loo"]) == 0
    again = capsys.readouterr().out
    assert again.startswith(ran) and "leave-one-out, one setting per fold" in again
