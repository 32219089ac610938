"""`tiermem eval session` (and the per-sample evals over recall_rounds.prepared) report
the evidence ids they drop, as `eval locomo` does: malformed ids (`"D1:1; D1:3"`) and ids
absent from the conversation were dropped unseen, and recall was averaged over fewer
questions than were asked without a word. Real SQLite, a tiny hand-made LoCoMo file."""

from __future__ import annotations

from pathlib import Path

from conftest import eval_memory
from locomo_mini import question, sample, write

from tiermem.evals.locomo import EvidenceCounts, load_samples
from tiermem.evals.recall_rounds import prepared
from tiermem.evals.session import run_session, table
from tiermem.tiers.embed_onnx import FastEmbedder

BUDGETS = (300, 500)
ODD = sample("odd", ["I adopted a grey cat named Pixel.", "Nice! How old is Pixel?", "She is two years old.",
                     "I bought a red kayak last week.", "Where do you paddle?", "On the lake near my house."],
             [question("What is the cat called?", "Pixel", ["D1:1; D1:3"]),  # glued: malformed
              question("What did Ann buy?", "red kayak", ["D9:4"]),  # no session 9: missing
              question("Where does Ann paddle?", "lake near my house", ["D1:6"])])


def test_session_reports_dropped_evidence_per_budget(tmp_path: Path, embedder: FastEmbedder) -> None:
    data = write(tmp_path / "odd.json", [ODD])
    with eval_memory(tmp_path / "d", embedder, hot=False) as o:
        res = run_session(o.memory, data, budgets=BUDGETS, methods=("full_context", "tail")).result
    for b in BUDGETS:
        got = res["budgets"][str(b)]
        assert (got["questions"], got["questions_with_evidence"]) == (3, 1)
        assert (got["skipped_evidence_ids"], got["missing_evidence_ids"]) == (1, 1)
        assert got["methods"]["full_context"]["evidence_recall"] == 1.0  # over the one question with evidence
    assert "1 of 3 questions with evidence, evidence ids skipped 1 malformed, 1 not in the conversation" in str(
        table(res).caption)


def test_prepared_counts_dropped_evidence(tmp_path: Path) -> None:
    counts = EvidenceCounts()
    preps = list(prepared(load_samples(write(tmp_path / "odd.json", [ODD])), tmp_path / "root", hot=False,
                          sample_questions=None, counts=counts))
    assert [len(p.questions) for p in preps] == [1]
    assert (counts.skipped, counts.missing) == (1, 1)
