"""`Memory.append_outcome` (and `append_many`, through it) names a refused message of a
batch `messages[i].<field>` and keeps the refusal's class: a `LimitExceeded` stays one,
with its value and limit, and nothing of the batch is written.

The renaming was done inline; it now goes through `ValidationError.renamed` (232828a),
the one place a refusal is renamed. A refactor: these pass on the code before too (the
inline renaming kept the class as well); they pin the behaviour it must keep.

Real parts: a Memory on a real SQLite file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hash_embedder import HashEmbedder

from tiermem import Config, Memory
from tiermem.tiers.errors import ConversationNotFound, LimitExceeded, ValidationError

MAX_CONTENT_BYTES = 1024
MAX_METADATA_BYTES = 256
PAST_CONTENT = MAX_CONTENT_BYTES + 1  # ASCII chars: bytes
OK = {"role": "user", "content": "fine"}

# (case id, the batch, the class raised, the field, (value, limit) of a LimitExceeded)
CASES: list[tuple[str, list[dict[str, Any]], type, str, tuple[int, int] | None]] = [
    # content past the limit, third of three: LimitExceeded, its index and its numbers kept
    ("content past limit", [OK, OK, {"role": "user", "content": "x" * PAST_CONTENT}],
     LimitExceeded, "messages[2].content", (PAST_CONTENT, MAX_CONTENT_BYTES)),
    # the first of two: index 0 (the index is the batch's, not off by one)
    ("first message", [{"role": "user", "content": "x" * PAST_CONTENT}, OK],
     LimitExceeded, "messages[0].content", (PAST_CONTENT, MAX_CONTENT_BYTES)),
    # a role the store has not: a plain ValidationError, renamed the same way
    ("bad role", [OK, {"role": "wizard", "content": "hi"}], ValidationError, "messages[1].role", None),
]

Append = Callable[[Memory, str, list[dict[str, Any]]], Any]
WAYS: dict[str, Append] = {
    "append_outcome": lambda mem, conv, batch: mem.append_outcome(conv, batch),
    "append_many": lambda mem, conv, batch: mem.append_many(conv, batch),
}


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize(("label", "batch", "kind", "field", "numbers"), CASES, ids=[c[0] for c in CASES])
def test_batch_refusal_named_and_class_kept(tmp_path: Path, way: str, label: str, batch: list[dict[str, Any]],
                                            kind: type, field: str, numbers: tuple[int, int] | None) -> None:
    config = Config(data_dir=tmp_path, max_content_bytes=MAX_CONTENT_BYTES, max_metadata_bytes=MAX_METADATA_BYTES)
    with Memory(config, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        with pytest.raises(ValidationError) as refused:
            WAYS[way](mem, "c", batch)
        assert type(refused.value) is kind, repr(refused.value)
        assert refused.value.field == field
        assert str(refused.value) == f"{field}: {refused.value.problem}"
        if numbers is not None:
            assert isinstance(refused.value, LimitExceeded)
            assert (refused.value.value, refused.value.limit) == numbers
        with pytest.raises(ConversationNotFound):  # nothing of the batch written
            mem.history("c")
