"""planner.query_text: the embedded text of a query, without the speakers' names and,
with DECLARATIVE, without its question words."""

from __future__ import annotations

import pytest

from tiermem.planner import query_text
from tiermem.planner.query_text import declarative, dense_text


@pytest.mark.parametrize(("text", "want"), [
    # interrogative and auxiliary out, the content kept in order
    ("What activities has she done with her family?", "activities she done with her family"),
    ("Would he still want to pursue counseling?", "he still want to pursue counseling"),  # yes/no question
    ("How long did it take to open the studio?", "long it take to open the studio"),
    ("I went hiking, did you?", "I went hiking, you"),  # punctuation stays attached
    ("What?", "What?"),  # nothing but question words: unchanged
    ("", ""),
])
def test_declarative(text: str, want: str) -> None:
    assert declarative(text) == want


def test_dense_text_strips_names_and_only_with_declarative(monkeypatch: pytest.MonkeyPatch) -> None:
    q = "What does Ann like to cook?"
    monkeypatch.setattr(query_text, "DECLARATIVE", False)
    assert dense_text(q, frozenset({"Ann"})) == "What does like to cook?"  # names out, as before
    monkeypatch.setattr(query_text, "DECLARATIVE", True)
    assert dense_text(q, frozenset({"Ann"})) == "like to cook"
