"""Tiny LoCoMo-format files written by the tests of the eval harness: one session per
sample, speakers alternating, dia ids D1:1, D1:2, ..."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SESSION_DATE = "1:56 pm on 8 May, 2023"


def sample(sample_id: str, texts: list[str], qa: list[dict[str, Any]], *,
           speakers: tuple[str, str] = ("Ann", "Bob")) -> dict[str, Any]:
    a, b = speakers
    turns = [{"speaker": a if i % 2 == 0 else b, "dia_id": f"D1:{i + 1}", "text": t} for i, t in enumerate(texts)]
    return {"sample_id": sample_id, "qa": qa, "conversation": {
        "speaker_a": a, "speaker_b": b, "session_1_date_time": SESSION_DATE, "session_1": turns}}


def question(question: str, answer: str, evidence: list[str], category: int = 4) -> dict[str, Any]:
    return {"question": question, "answer": answer, "evidence": evidence, "category": category}


def write(path: Path, samples: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(samples), encoding="utf-8")
    return path
