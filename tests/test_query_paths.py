"""evals.query_paths on a small LoCoMo-format file: every question is asked by both query
paths (the fused query session, the export on one thread) at every budget, and the plans
and the evidence recall are compared."""

from __future__ import annotations

import json
from pathlib import Path

from tiermem.evals import query_paths

TURNS = [
    ("Ana", "Hey Ben! I finally adopted a dog last week, a grey whippet called Pixel."),
    ("Ben", "Congrats! Whippets are fast. I started pottery classes on Tuesdays."),
    ("Ana", "Pottery sounds relaxing. Pixel loves the beach near Porto."),
    ("Ben", "My sister moved to Lyon for a job at a bakery."),
    ("Ana", "I am training for a half marathon in October."),
    ("Ben", "Good luck! I made two bowls and a cup at pottery so far."),
]
QUESTIONS = [
    {"question": "What kind of dog did Ana adopt?", "answer": "a whippet", "evidence": ["D1:1"], "category": 4},
    {"question": "What has Ben made at pottery?", "answer": "two bowls and a cup", "evidence": ["D1:2", "D1:6"],
     "category": 1},
]


def _locomo_file(tmp_path: Path) -> Path:
    convo = {"speaker_a": "Ana", "speaker_b": "Ben", "session_1_date_time": "1:56 pm on 8 May, 2023",
             "session_1": [{"speaker": s, "dia_id": f"D1:{i}", "text": t} for i, (s, t) in enumerate(TURNS, start=1)]}
    path = tmp_path / "small-locomo.json"
    path.write_text(json.dumps([{"sample_id": "small-1", "conversation": convo, "qa": QUESTIONS}]))
    return path


def test_both_query_paths_give_the_same_contexts_on_a_small_conversation(tmp_path: Path) -> None:
    out = query_paths.run(_locomo_file(tmp_path), [300, 1000], data_root=tmp_path / "data")
    assert out["contexts"] == len(QUESTIONS) * 2  # every question at every budget, each asked both ways
    assert out["per_sample"] == {"small-1": {"contexts": 4, "differing": out["differing_plans"]}}
    assert out["differing_plans"] == 0  # six turns: no ranking within 1e-7 of a tie
    recall = out["evidence_recall"]
    assert set(recall) == set(query_paths.PATHS) and len(set(recall.values())) == 1
    assert recall[query_paths.PATHS[0]] > 0  # the small conversation's evidence is shown
