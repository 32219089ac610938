"""The probes that keep figures per sample (`fusion_probe`'s folds, `query_paths`'
per_sample, `second_model`'s folds) name a sample whose `sample_id` the file repeats
`<id>-2`, `-3`, ... (`locomo.sample_labels`), as `eval session` and `recall_rounds` do
since e059f96. Keyed by the bare id, the second sample's figures replaced the first's
(query_paths, second_model) or were pooled with them, so leave-one-out had one fold where
the file has two conversations. Real SQLite, tiny hand-made files."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from convo_fixtures import SMALL_QA, one_session_locomo

from tiermem.evals import fusion_probe, query_paths, second_model
from tiermem.evals.locomo import load_samples

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TURNS = [
    ("Ana", "Hey Ben! I finally adopted a dog last week, a grey whippet called Pixel."),
    ("Ben", "Congrats! Whippets are fast. I started pottery classes on Tuesdays."),
    ("Ana", "Pottery sounds relaxing. Pixel loves the beach near Porto."),
    ("Ben", "My sister moved to Lyon for a job at a bakery."),
    ("Ana", "I am training for a half marathon in October. My knees hurt after long runs."),
    ("Ben", "Good luck! I made two bowls and a cup at pottery so far."),
    ("Ana", "My brother visited and we cooked paella together."),
    ("Ben", "I read a novel about sailors crossing the Atlantic."),
]
LABELS = ["dup", "dup-2"]
VOCAB = sorted({w for _, t in TURNS for w in re.findall(r"[a-z]+", t.lower())} | {"dog", "made", "kind"})


def _file(tmp_path: Path) -> Path:
    return one_session_locomo(tmp_path / "dup.json", TURNS, SMALL_QA, ("dup", "dup"))


def bag(texts: list[str]) -> np.ndarray:
    """A deterministic stand-in for a sentence model: unit bag-of-words vectors."""
    out = np.zeros((len(texts), len(VOCAB)), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in re.findall(r"[a-z]+", t.lower()):
            if w in VOCAB:
                out[i, VOCAB.index(w)] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


def test_fusion_probe_holds_out_each_repeated_sample(tmp_path: Path) -> None:
    out = fusion_probe.run(_file(tmp_path), [100], tmp_path / "data")
    assert out["contexts"] == 2 * len(SMALL_QA)
    assert sorted(out["folds"]) == LABELS  # was one fold, "dup", chosen on nothing


def test_query_paths_keeps_each_repeated_sample(tmp_path: Path) -> None:
    out = query_paths.run(_file(tmp_path), [300], data_root=tmp_path / "data")
    assert sorted(out["per_sample"]) == LABELS  # was one entry, the second sample's
    assert [out["per_sample"][s]["contexts"] for s in LABELS] == [len(SMALL_QA)] * 2


def test_second_model_holds_out_each_repeated_sample(tmp_path: Path) -> None:
    out = second_model.run(load_samples(_file(tmp_path)), bag, bag, bag, [1])
    assert out["questions"] == 2 * len(SMALL_QA)
    assert sorted(f["held_out"] for f in out["leave_one_out"][1]) == LABELS  # was no fold at all
