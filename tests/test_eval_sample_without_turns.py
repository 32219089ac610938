"""A LoCoMo file with a sample whose sessions hold no turns (every `session_N` an empty
list: valid in the format) is evaluated: its questions are asked of an empty context.
Before, `tiermem eval locomo` and `tiermem tune` asked `Memory.context` (tune also
`catch_up`) of the sample's conversation, which nothing had written, and the whole run
stopped with "conversation 'locomo-empty' not found", the other samples unscored;
`tiermem eval session` stopped so when no sample had a turn. Real SQLite, tiny hand-made
files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import eval_memory
from locomo_mini import question, sample, write

from tiermem.evals.conversations import read_conversations
from tiermem.evals.locomo import run_locomo
from tiermem.evals.session import run_session
from tiermem.evals.tune import candidates, run_tune
from tiermem.tiers.embed_onnx import FastEmbedder

BUDGET = 500
FULL = sample("full", ["I adopted a grey cat named Pixel.", "Nice! How old is Pixel?", "She is two."],
              [question("What is the cat called?", "Pixel", ["D1:1"])])


def _empty(qa: list[dict[str, Any]]) -> dict[str, Any]:
    s = sample("empty", ["unused"], qa, speakers=("Cem", "Dee"))
    s["conversation"]["session_1"] = []  # a session with no turns, the sample's only one
    return s


WITH_QUESTION = _empty([question("Where does Cem live?", "Izmir", ["D1:1"])])
NO_QUESTION = _empty([])


@pytest.mark.parametrize(("samples", "questions"), [
    ([FULL, WITH_QUESTION], 2),  # the empty sample's question: asked, its evidence missing
    ([WITH_QUESTION, FULL], 2),  # the empty sample first
    ([FULL, NO_QUESTION], 1),  # nothing to ask of it
])
def test_eval_locomo_scores_a_file_with_an_empty_sample(tmp_path: Path, embedder: FastEmbedder,
                                                         samples: list[dict[str, Any]], questions: int) -> None:
    data = write(tmp_path / "data.json", samples)
    with eval_memory(tmp_path / "d", embedder, hot=False) as o:
        res = run_locomo(o.memory, data, [BUDGET], methods=["tiermem", "full_context"]).result
    assert res["questions"] == res["baselines"]["full_context"]["questions"] == questions
    assert res["questions_with_evidence"] == 1  # the full sample's
    assert res["missing_evidence_ids"] == questions - 1
    assert res["evidence_recall"] == 1.0  # the full sample's one turn of evidence fits the budget
    # tiermem and full context alike: the empty sample's answer is in no context
    assert res["answer_coverage"] == res["baselines"]["full_context"]["answer_coverage"] == 1 / questions
    assert res["max_context_tokens"] > 0


@pytest.mark.parametrize("samples", [
    [FULL, WITH_QUESTION],  # a probe of a conversation with no messages
    [FULL, NO_QUESTION],  # a conversation with no messages at all
])
def test_tune_replays_a_file_with_an_empty_sample(tmp_path: Path, embedder: FastEmbedder,
                                                  samples: list[dict[str, Any]]) -> None:
    data = read_conversations(write(tmp_path / "data.json", samples), max_content_bytes=1 << 20,
                              max_metadata_bytes=1 << 14)
    res = run_tune(data, [BUDGET], candidates(None, {}), base=None, embedder=embedder, hot=False)
    got = res["candidates"][0]["budgets"][str(BUDGET)]
    assert got["probes"] == len(samples[1]["qa"]) + 1
    assert (got["probes_with_evidence"], got["evidence_recall"]) == (1, 1.0)
    assert got["missing_evidence"] == len(samples[1]["qa"])


def test_session_runs_a_file_without_turns(tmp_path: Path, embedder: FastEmbedder) -> None:
    data = write(tmp_path / "data.json", [WITH_QUESTION])
    with eval_memory(tmp_path / "d", embedder, hot=False) as o:
        res = run_session(o.memory, data, budgets=(BUDGET,), methods=("tiermem", "full_context")).result
    got = res["budgets"][str(BUDGET)]
    assert (got["questions"], got["questions_with_evidence"], got["missing_evidence_ids"]) == (1, 0, 1)
    assert res["history_turns"] == 0
