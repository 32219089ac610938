"""`tiermem eval report` says when a run's failure counters are not 0: contexts over the
budget, token count mismatches, plan positions whose text is not in the context,
degraded contexts. A LoCoMo or cost result with any of them rendered exactly like a
clean one. The results are the committed docs/*.json, with counters set by hand."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tiermem.evals.report import cost_markdown, locomo_markdown

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _load(name: str) -> dict[str, Any]:
    return json.loads((DOCS / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def locomo() -> dict[str, Any]:
    return _load("locomo.json")


@pytest.fixture(scope="module")
def cost() -> dict[str, Any]:
    return _load("cost.json")


def test_locomo_failures_are_printed(locomo: dict[str, Any]) -> None:
    bad = copy.deepcopy(locomo)
    e = bad["budgets"]["500"]
    e.update(budget_violations=120, token_mismatches=7, unverified_positions=55, degraded=40)
    e["baselines"]["hybrid_topk"]["budget_violations"] = 300
    md = locomo_markdown(bad)
    assert ("**Failures:** 500 **tiermem**: 120 over the budget, 7 token count mismatches, 55 plan positions "
            "whose text is not in the context, 40 degraded contexts; 500 hybrid top-k (RRF): 300 over the budget."
            ) in md
    assert md != locomo_markdown(locomo)


def test_cost_failures_are_printed(cost: dict[str, Any]) -> None:
    bad = copy.deepcopy(cost)
    bad["methods"]["tiermem"].update(budget_violations=3, token_mismatches=2)
    assert "**Failures:** **tiermem**: 3 over the budget, 2 token count mismatches." in cost_markdown(bad)


def test_a_clean_run_says_so(locomo: dict[str, Any], cost: dict[str, Any]) -> None:
    for md in (locomo_markdown(locomo), cost_markdown(cost)):
        assert "**Failures:**" not in md
        assert "Failures: none (over the budget, token count mismatches" in md
