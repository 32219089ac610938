"""evals/plots.py: the cost plots label every point with its token budget, through one
helper (`_annotate_budgets`), so both plots write the same label the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

from tiermem.evals import plots


def test_each_point_is_labelled_with_its_budget() -> None:
    fig, ax = plt.subplots()
    try:
        plots._annotate_budgets(ax, [400, 1600], [10.0, 20.0], [50.0, 70.0])
        assert [(t.get_text(), t.xy) for t in ax.texts] == [("400", (10.0, 50.0)), ("1,600", (20.0, 70.0))]
        with pytest.raises(ValueError):  # a budget without its point is a caller's bug, not a silent skip
            plots._annotate_budgets(ax, [400], [1.0, 2.0], [1.0, 2.0])
    finally:
        plt.close(fig)


def _labels(monkeypatch: pytest.MonkeyPatch, draw: Any) -> list[str]:
    seen: list[str] = []
    real = plots._annotate_budgets

    def spy(ax: Any, budgets: Any, xs: Any, ys: Any) -> None:
        real(ax, budgets, xs, ys)
        seen.extend(t.get_text() for t in ax.texts[-len(budgets):])

    monkeypatch.setattr(plots, "_annotate_budgets", spy)
    draw()
    return seen


def test_both_cost_plots_label_their_budgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    method = {"total_billed_openai": 1000, "total_billed_anthropic": 900, "evidence_recall": 0.5}
    session = {"budgets": {"400": {"methods": {"tiermem": method}}, "1600": {"methods": {"tiermem": method}}}}
    assert _labels(monkeypatch, lambda: plots.recall_vs_cost(session, tmp_path / "a.png")) == ["400", "1,600"]
    tune = {"data": "x.json", "candidates": [{"name": "base", "values": {}, "budgets": {
        "1600": {"total_billed": 50, "evidence_recall": 0.4, "reply_recall": None},
        "400": {"total_billed": 20, "evidence_recall": 0.3, "reply_recall": None}}}]}
    assert _labels(monkeypatch, lambda: plots.tune_recall_vs_cost(tune, tmp_path / "b.png")) == ["400", "1,600"]
    assert (tmp_path / "a.png").stat().st_size > 1000 and (tmp_path / "b.png").stat().st_size > 1000
