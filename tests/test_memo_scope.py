"""The embedder's memo of recent texts never answers one tenant from another's texts.

The memo is what makes `context()` on the message just appended skip the model. It was
keyed by the text alone and shared by every caller of the process, so a text another
tenant had written came back ~10x faster (1.8 against 19.9 ms in the audit's search
timing): a tenant could test guesses of other tenants' exact messages. A vector is now
found again only in the scope it was computed for (`tiers.embed.remembered_for`): the
conversation, as the catch-up and `Memory` set it.
"""

from __future__ import annotations

import numpy as np
import pytest

from tiermem import Memory
from tiermem.tiers.embed import MEMO_MAX_TEXTS, TextMemo, remembered_for

SECRET = "Our merger with Globex closes on the 14th of March"


def _counting() -> tuple[list[list[str]], object]:
    calls: list[list[str]] = []

    def compute(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        return np.ones((len(texts), 3), dtype=np.float32)

    return calls, compute


@pytest.mark.parametrize("stored_in, asked_in, found", [
    ("conv-a", "conv-a", True),   # the same conversation: the memo's purpose
    ("conv-a", "conv-b", False),  # another conversation (another tenant's, maybe)
    (None, "conv-a", False),      # computed outside any scope (an eval, a warm-up)
    ("conv-a", None, False),      # asked outside any scope
])
def test_a_vector_is_found_again_only_in_its_scope(stored_in: str | None, asked_in: str | None,
                                                    found: bool) -> None:
    memo = TextMemo()
    calls, compute = _counting()
    with remembered_for(stored_in):
        memo.through([SECRET], compute, dim=3)  # type: ignore[arg-type]
    with remembered_for(asked_in):
        memo.through([SECRET], compute, dim=3)  # type: ignore[arg-type]
    assert len(calls) == (1 if found else 2) and memo.hits == (1 if found else 0)


def test_a_pool_remembers_each_text_for_its_own_conversation() -> None:
    memo = TextMemo()
    _calls, compute = _counting()
    with remembered_for(["a", "b"]):  # one call, texts of two conversations
        memo.through(["x", "y"], compute, dim=3)  # type: ignore[arg-type]
    for scope, text, hit in [("a", "x", True), ("b", "y", True), ("b", "x", False), ("a", "y", False)]:
        before = memo.hits
        with remembered_for(scope):
            memo.through([text], compute, dim=3)  # type: ignore[arg-type]
        assert (memo.hits == before + 1) is hit, (scope, text)
    with remembered_for(["a"]), pytest.raises(ValueError, match="1 memo scopes for 2 texts"):
        memo.through(["x", "y"], compute, dim=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("how", ["search in the namespace", "search in a conversation", "context"])
def test_another_tenants_text_is_never_a_memo_hit(cold_memory: Memory, how: str) -> None:
    emb = cold_memory.embedder
    emb.memo_size = MEMO_MAX_TEXTS  # type: ignore[attr-defined]
    cold_memory.append("board", {"role": "user", "content": SECRET}, namespace="acme")
    cold_memory.catch_up()  # acme's text is embedded, and remembered for its conversation
    cold_memory.append("probe", {"role": "user", "content": "hello"}, namespace="evil")
    cold_memory.catch_up()
    hits = emb.memo_hits  # type: ignore[attr-defined]
    if how == "context":
        cold_memory.context("probe", SECRET, 500, namespace="evil")
    elif how == "search in a conversation":
        cold_memory.search("probe", SECRET, 3, namespace="evil")
    else:
        cold_memory.search(None, SECRET, 3, namespace="evil")
    assert emb.memo_hits == hits  # type: ignore[attr-defined]


def test_the_message_just_appended_is_still_not_embedded_twice(cold_memory: Memory) -> None:
    emb = cold_memory.embedder
    emb.memo_size = MEMO_MAX_TEXTS  # type: ignore[attr-defined]
    cold_memory.append("c", {"role": "user", "content": SECRET}, namespace="acme")
    cold_memory.catch_up()  # by the indexer, before the agent asks
    hits = emb.memo_hits  # type: ignore[attr-defined]
    cold_memory.search("c", SECRET, 3, namespace="acme")
    assert emb.memo_hits == hits + 1  # type: ignore[attr-defined]
