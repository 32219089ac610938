"""A null inside a LoCoMo question's `evidence` list is counted as a malformed id, as a
number or "D8:6; D9:17" is (`skipped_evidence_ids`, tune's `skipped_evidence`). The
reader dropped it before any reader saw it, so the counts said the file's evidence was
cleaner than it is. Real SQLite, tiny hand-made files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import eval_memory
from locomo_mini import question, sample, write

from tiermem.evals.conversations import read_conversations
from tiermem.evals.locomo import run_locomo
from tiermem.evals.recall_rounds import parse_variant
from tiermem.evals.recall_rounds import run as run_rounds
from tiermem.evals.session import run_session
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

BUDGET = 500
TEXTS = ["I adopted a grey cat named Pixel.", "Nice! How old is Pixel?", "She is two."]


def _file(tmp_path: Path, evidence: list[Any]) -> Path:
    return write(tmp_path / "data.json", [sample("s", TEXTS, [question("How old is the cat?", "two", evidence)])])


# (id, the question's evidence, malformed ids the readers count)
CASES: list[tuple[str, list[Any], int]] = [
    ("null", [None, "D1:3"], 1),  # dropped unseen before
    ("null_and_number", [3, None, "D1:3"], 2),  # the number was counted, the null not
    ("number", [3, "D1:3"], 1),  # counted before too: the yardstick
]


@pytest.mark.parametrize(("evidence", "skipped"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_tune_counts_a_null_evidence_id(tmp_path: Path, evidence: list[Any], skipped: int) -> None:
    data = read_conversations(_file(tmp_path, evidence), max_content_bytes=1 << 20, max_metadata_bytes=1 << 14)
    assert data.skipped_evidence == skipped
    conv = data.conversations[0]
    assert conv.evidence_positions(conv.probes[0]) == ([2], 0)  # the good id still scored


@pytest.mark.parametrize(("evidence", "skipped"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_evals_count_a_null_evidence_id(tmp_path: Path, embedder: FastEmbedder, evidence: list[Any],
                                        skipped: int) -> None:
    data = _file(tmp_path, evidence)
    with eval_memory(tmp_path / "d", embedder, hot=False) as o:
        locomo = run_locomo(o.memory, data, [BUDGET], methods=["full_context"]).result
        session = run_session(o.memory, data, budgets=(BUDGET,), methods=("full_context",)).result
    rounds = run_rounds(data, [BUDGET], [parse_variant("base:")], data_root=tmp_path / "root",
                        sample_questions=None, baselines=False, hot=False)
    assert locomo["skipped_evidence_ids"] == skipped
    assert session["budgets"][str(BUDGET)]["skipped_evidence_ids"] == skipped
    assert rounds["skipped_evidence_ids"] == skipped
    assert locomo["baselines"]["full_context"]["questions_with_evidence"] == 1  # the good id still scored
