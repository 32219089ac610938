"""The LoCoMo report says what its answer coverage counts: category 5's adversarial
answers are in the "answer" figure, and tiermem's headings (speaker names, session
dates) can hold an answer the baselines' contexts cannot. The figure without category 5,
already in the JSON, is shown beside it; the README's table is the report's."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from tiermem.evals.report import locomo_markdown

ROOT = Path(__file__).resolve().parent.parent
RESULT = json.loads((ROOT / "docs" / "locomo.json").read_text(encoding="utf-8"))
BUDGETS = sorted(RESULT["budgets"], key=int)


def _table(md: str) -> list[str]:
    """The first table of a report: recall and answer coverage per method."""
    lines = md.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| method |"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return lines[start:end]


def test_answer_columns_say_what_they_count() -> None:
    md = locomo_markdown(RESULT)
    head, _rule, tiermem = _table(md)[:3]
    assert all(f"answer (all) @ {int(b):,}" in head and f"answer (excl. c5) @ {int(b):,}" in head for b in BUDGETS)
    cells = tiermem.strip("|").split("|")
    want = [f"{100 * RESULT['budgets'][b]['answer_coverage_non_adversarial']:.1f}" for b in BUDGETS]
    assert [c.strip() for c in cells[-len(BUDGETS):]] == want
    assert "adversarial answers included" in md and "headings" in md


def test_an_older_result_without_the_figure_keeps_one_answer_column() -> None:
    old = copy.deepcopy(RESULT)
    for e in old["budgets"].values():
        for m in (e, *e["baselines"].values()):
            m.pop("answer_coverage_non_adversarial", None)
    head = _table(locomo_markdown(old))[0]
    assert "answer (all) @ 500" in head and "excl. c5" not in head


def test_readme_table_is_the_reports() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = _table(locomo_markdown(RESULT))
    assert "\n".join(table) in readme
