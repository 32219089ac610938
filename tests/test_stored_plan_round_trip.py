"""A plan as `Plan.to_json` stores it reads back whole through the inspector's check
(`planner.plan.read_stored_plan`): no problem line, every part kept. Its view's `covers`,
a tuple in `to_dict`, is a list once the JSON is read back, and the strict check refused
it, so every real stored plan lost its views on the inspector's plans page."""

from __future__ import annotations

import json

from tiermem.planner.plan import Plan, ViewStaleness, read_stored_plan


def test_a_stored_plan_with_a_view_reads_back_whole() -> None:
    plan = Plan(conversation_id="c", query="q", query_class="targeted_recall", class_reason="r", budget=500,
                views=[ViewStaleness("rolling", 1, (0, 3), 0, 0.0, False)])
    got, problems = read_stored_plan(json.loads(plan.to_json()))
    assert problems == []
    assert got["views"] == [{"kind": "rolling", "version": 1, "covers": (0, 3), "turns_behind": 0,
                             "seconds_behind": 0.0, "over_budget": False}]
