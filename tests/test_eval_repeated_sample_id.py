"""A LoCoMo file that gives two samples the same `sample_id` keeps each sample's figures
apart. `tiermem eval session` keyed its per-sample figures by the bare id: the second
sample's entry replaced the first's (its question count) while their recalls were pooled
into it; `recall_rounds` put both samples in one data dir (`--data-root/<sample_id>`) and
stopped with "the data dir holds conversation ... with other turns". The second now goes by
`<id>-2`, as `conversation_ids` names its conversation. Real SQLite, tiny hand-made files."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import eval_memory
from locomo_mini import question, sample, write

from tiermem.evals.locomo import sample_labels
from tiermem.evals.recall_rounds import parse_variant, run
from tiermem.evals.session import run_session
from tiermem.tiers.embed_onnx import FastEmbedder

BUDGET = 500
ANN = sample("dup", ["I adopted a grey cat named Pixel.", "Nice! How old is Pixel?", "She is two."],
             [question("What is the cat called?", "Pixel", ["D1:1"])])
CEM = sample("dup", ["I work as a welder in Izmir.", "Tough job.", "I keep three goats.", "Fun."],
             [question("Where does Cem work?", "welder in Izmir", ["D1:1"]),
              question("How many goats?", "three goats", ["D1:3"])], speakers=("Cem", "Dee"))


@pytest.mark.parametrize(("ids", "want"), [
    (["a", "b"], ["a", "b"]),  # unique: the ids themselves
    (["a", "a", "a"], ["a", "a-2", "a-3"]),  # repeated
    (["a-2", "a", "a"], ["a-2", "a", "a-3"]),  # a suffix the file already uses is skipped
])
def test_sample_labels(ids: list[str], want: list[str]) -> None:
    assert sample_labels(ids) == want


def test_session_keeps_each_repeated_sample_apart(tmp_path: Path, embedder: FastEmbedder) -> None:
    data = write(tmp_path / "dup.json", [ANN, CEM])
    with eval_memory(tmp_path / "d", embedder, hot=False) as o:
        res = run_session(o.memory, data, budgets=(BUDGET,), methods=("full_context",)).result
    got = res["budgets"][str(BUDGET)]["methods"]["full_context"]["by_sample"]
    assert sorted(got) == ["dup", "dup-2"]
    assert (got["dup"]["questions"], got["dup-2"]["questions"]) == (1, 2)
    assert got["dup"]["billed_openai"] > 0 and got["dup-2"]["billed_openai"] > 0


def test_recall_rounds_runs_each_repeated_sample_in_its_own_data_dir(tmp_path: Path) -> None:
    data = write(tmp_path / "dup.json", [ANN, CEM])
    res = run(data, [BUDGET], [parse_variant("base:")], data_root=tmp_path / "root", sample_questions=None,
              baselines=False, hot=False)
    base = res["variants"]["base"]["budgets"][str(BUDGET)]
    assert res["samples"] == ["dup", "dup-2"]
    assert base["questions"] == 3
    assert sorted(base["by_sample"]) == ["dup", "dup-2"]
    assert sorted(res["leave_one_out"][str(BUDGET)]) == ["dup", "dup-2"]
