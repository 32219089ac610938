"""evals.query_paths on a small LoCoMo-format file: every question is asked by both query
paths (the fused query session, the export on one thread) at every budget, and the plans
and the evidence recall are compared."""

from __future__ import annotations

from pathlib import Path

from convo_fixtures import SMALL_QA, one_session_locomo

from tiermem.evals import query_paths

TURNS = [
    ("Ana", "Hey Ben! I finally adopted a dog last week, a grey whippet called Pixel."),
    ("Ben", "Congrats! Whippets are fast. I started pottery classes on Tuesdays."),
    ("Ana", "Pottery sounds relaxing. Pixel loves the beach near Porto."),
    ("Ben", "My sister moved to Lyon for a job at a bakery."),
    ("Ana", "I am training for a half marathon in October."),
    ("Ben", "Good luck! I made two bowls and a cup at pottery so far."),
]
def _locomo_file(tmp_path: Path) -> Path:
    return one_session_locomo(tmp_path / "small-locomo.json", TURNS, SMALL_QA)


def test_both_query_paths_give_the_same_contexts_on_a_small_conversation(tmp_path: Path) -> None:
    out = query_paths.run(_locomo_file(tmp_path), [300, 1000], data_root=tmp_path / "data")
    assert out["contexts"] == len(SMALL_QA) * 2  # every question at every budget, each asked both ways
    assert out["per_sample"] == {"small-1": {"contexts": 4, "differing": out["differing_plans"]}}
    assert out["differing_plans"] == 0  # six turns: no ranking within 1e-7 of a tie
    recall = out["evidence_recall"]
    assert set(recall) == set(query_paths.PATHS) and len(set(recall.values())) == 1
    assert recall[query_paths.PATHS[0]] > 0  # the small conversation's evidence is shown
