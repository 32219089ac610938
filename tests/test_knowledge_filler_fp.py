"""The knowledge eval counts every filler turn wrongly superseded as a false positive of
its own: it scored pairs as a set of case positions, where each such turn became the same
(-1, -1), so N of them counted as one and precision read too high. Real Memory; the
filler is replaced by a chain of corrections so that the real superseder marks filler
turns (the shipped filler is written never to be)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.evals import knowledge
from tiermem.tiers.embed_onnx import FastEmbedder

CHAIN = 6  # filler exchanges used by a two-turn case: FILLER_PAIRS after each turn
CASE = {"id": "fp", "supersede": [[0, 1]], "echo": [], "present": [], "past": [], "kinds": [],
        "turns": [{"role": "user", "content": "My budget for the trip is 100 EUR."},
                  {"role": "user", "content": "Actually, make the trip budget 200 EUR instead."}]}


def test_each_filler_false_positive_counts(tmp_path: Path, embedder: FastEmbedder,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(CASE["turns"]) * knowledge.FILLER_PAIRS == CHAIN
    # each filler user turn corrects the one before it: a topic apart from the case's
    monkeypatch.setattr(knowledge, "FILLER", tuple(
        (f"{'Actually, ' if i else ''}my locker number at the gym is {11 + i}{' now' if i else ''}.", "Noted.")
        for i in range(CHAIN)))
    with Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False) as mem:
        res = knowledge.run(mem, [CASE])
        case_positions = {0, 1 + 2 * knowledge.FILLER_PAIRS}  # each case turn, then its filler pairs
        filler_ended = [v for v in mem.facts("k-fp") if v.role == "user" and v.until_position is not None
                        and v.position not in case_positions]
    assert len(filler_ended) >= 2  # else this case would not tell one count from many
    s = res["supersession"]
    assert (s["tp"], s["fn"]) == (1, 0), res["errors"]
    assert s["fp"] == len(filler_ended), res["errors"]
    assert s["precision"] == 1 / (1 + len(filler_ended))
    assert sum("filler turn" in e for e in res["errors"]) == len(filler_ended)
