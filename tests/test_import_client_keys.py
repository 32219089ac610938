"""A caller's idempotency key cannot collide with an import's. Before (a correctness
review of the streaming import, 2026-12-06), an import appended each chunk under
`tiermem-import:<first position>`, a key any caller could send too (over HTTP, the
client, the library): a conversation holding a caller's append under
`tiermem-import:10` made a later import's chunk at position 10 fail with
IdempotencyKeyReused, then a false ImportConflict. An import now appends without keys
(each chunk is a conditional append at its position: `tests/test_import_erased.py`), so
no key of a caller's is in its way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiermem.config import Config
from tiermem.evals.conversations import import_dataset, open_conversations
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

LIMITS = {"max_content_bytes": 1 << 20, "max_metadata_bytes": 1 << 14}
NS = "default"
MESSAGES = 20


def line(i: int) -> dict[str, str]:
    return {"role": "user", "content": f"message {i}"}


# (id, the caller's key, the import's batch: its chunks start at 1, 1 + batch, ...)
KEYS: list[tuple[str, str, int]] = [
    ("at_a_later_chunk", "tiermem-import:10", 9),  # the chunk 10..18
    ("at_the_first_chunk", "tiermem-import:1", 5),  # the import's first write
]


@pytest.mark.parametrize(("key", "batch"), [k[1:] for k in KEYS], ids=[k[0] for k in KEYS])
def test_a_callers_key_of_the_import_form_is_no_conflict(tmp_path: Path, embedder: FastEmbedder, key: str,
                                                        batch: int) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"conversation_id": "c", **line(i)}) + "\n" for i in range(MESSAGES)),
                    encoding="utf-8")
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("c", line(0), namespace=NS, idempotency_key=key)  # the file's first message, by a caller
        with open_conversations(path, **LIMITS) as data:
            report = import_dataset(mem, data, namespace=NS, batch=batch)
        assert (report.appended, report.already_present) == (MESSAGES - 1, 1)
        assert [m.body["content"] for m in mem.history("c", namespace=NS)] == [f"message {i}" for i in range(MESSAGES)]
