"""The knowledge-update eval and the supersession benchmark run end to end (small)."""

from __future__ import annotations

from pathlib import Path

from tiermem import Config, Memory
from tiermem.evals import bench_supersede, knowledge
from tiermem.tiers.embed_onnx import FastEmbedder

# one case of each kind the eval scores: a correction with an echo and a question with
# "now" after it, a question that looks like an update, a retraction, a partial update
SMOKE_IDS = ("travel-budget", "support-plan-q", "code-retract-tabs", "pa-party-partial")


def test_knowledge_eval_scores_a_few_cases(tmp_path: Path, embedder: FastEmbedder) -> None:
    cases = [c for c in knowledge.load_cases() if c["id"] in SMOKE_IDS]
    assert len(cases) == len(SMOKE_IDS)
    with Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False) as mem:
        res = knowledge.run(mem, cases)
    assert res["supersession"] == {"precision": 1.0, "recall": 1.0, "tp": 2, "fp": 0, "fn": 0}, res["errors"]
    assert res["echo_recall"] == 1.0 and res["present_share"] == 1.0 and res["past_share"] == 1.0, res["errors"]


def test_the_case_file_is_well_formed() -> None:
    cases = knowledge.load_cases()
    assert len(cases) >= 60
    assert {c["topic"] for c in cases} == {"travel", "support", "personal", "coding"}
    for c in cases:
        n = len(c["turns"])
        for old, new in c["supersede"] + c["echo"]:
            assert 0 <= old < new < n, c["id"]
        assert c["present"], c["id"]


def test_bench_supersede_reports_a_ratio() -> None:
    res = bench_supersede.run(messages=60, reps=1)
    assert res["superseded_pairs_per_batch"] > 0  # the cue batch does supersede
    assert res["ratio_median"] > 0 and res["cues_s"]["median"] > 0
    assert res["body_bytes"] == 60 * bench_supersede.MESSAGE_BYTES
