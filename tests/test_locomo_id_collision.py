"""Samples of one LoCoMo file never share a conversation, and a stored conversation is
reused only when it holds the sample's own turns. Sample ids that sanitize to the same
conversation id (`team/1` and `team_1`, or one id given twice) used to land in one
conversation: the second sample, with as many turns, reused the first's, and its
questions were scored against the wrong turns. Real SQLite, tiny hand-made files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import eval_memory
from locomo_mini import question, sample, write

from tiermem.evals.conversations import read_conversations
from tiermem.evals.locomo import LocomoError, run_locomo
from tiermem.tiers.embed_onnx import FastEmbedder

BUDGET = 500
ANN = sample("team/1", ["I live in Oslo.", "Nice city.", "My sister plays the cello.", "Lovely."],
             [question("Where does Ann live?", "Oslo", ["D1:1"])])
CEM = sample("team_1", ["I work as a welder in Izmir.", "Tough job.", "I keep three goats.", "Fun."],
             [question("Where does Cem work?", "welder in Izmir", ["D1:1"]),
              question("How many goats does Cem keep?", "three goats", ["D1:3"])],
             speakers=("Cem", "Dee"))


def _run(data_dir: Path, data: Path, embedder: FastEmbedder) -> dict[str, Any]:
    with eval_memory(data_dir, embedder, hot=False) as o:
        return run_locomo(o.memory, data, [BUDGET], methods=["full_context"]).result


def test_colliding_sample_ids_get_conversations_of_their_own(tmp_path: Path,
                                                              embedder: FastEmbedder) -> None:
    data = write(tmp_path / "collide.json", [ANN, CEM])
    res = _run(tmp_path / "d", data, embedder)
    # full context holds each sample's own turns: every answer is in it
    assert res["baselines"]["full_context"]["answer_coverage"] == 1.0
    assert res["reused_conversations"] == 0
    assert res["conversation_ids"] == ["locomo-team_1", "locomo-team_1-2"]
    # the same file again on the same data dir: both reused, still each its own
    again = _run(tmp_path / "d", data, embedder)
    assert again["reused_conversations"] == 2
    assert again["baselines"]["full_context"]["answer_coverage"] == 1.0


def test_reuse_refuses_a_stored_conversation_with_other_turns(tmp_path: Path,
                                                              embedder: FastEmbedder) -> None:
    _run(tmp_path / "d", write(tmp_path / "ann.json", [ANN]), embedder)
    # another sample under the same id, as many turns: reusing it would score the wrong text
    edited = {**CEM, "sample_id": ANN["sample_id"]}
    with pytest.raises(LocomoError, match=r"other turns than sample 'team/1' \(position 0"):
        _run(tmp_path / "d", write(tmp_path / "edited.json", [edited]), embedder)


def test_ids_are_unique_within_a_file_and_within_the_id_limit() -> None:
    from tiermem.evals.locomo import ID_MAX_CHARS, conversation_ids  # new here: the other tests run before it

    long = "x" * (2 * ID_MAX_CHARS)
    got = conversation_ids(["team/1", "team_1", "team_1", "locomo-team_1-2", long, long])
    assert got[:3] == ["locomo-team_1", "locomo-team_1-2", "locomo-team_1-3"]
    assert len(set(got)) == len(got)
    assert all(len(c) <= ID_MAX_CHARS for c in got)


def test_tune_reads_colliding_samples_as_two_conversations(tmp_path: Path) -> None:
    ds = read_conversations(write(tmp_path / "collide.json", [ANN, CEM]), max_content_bytes=1 << 20,
                            max_metadata_bytes=1 << 14)
    assert [c.conversation_id for c in ds.conversations] == ["locomo-team_1", "locomo-team_1-2"]
