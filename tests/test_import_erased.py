"""A conversation erased while an import writes it stops the import (ImportErased, an
ImportConflict naming it), instead of coming back holding only the file's tail. Before
(a correctness review of the streaming import, 2026-12-06), the import checked the data
dir once and appended each chunk under `tiermem-import:<first position>`; the erasure
took those keys with it, so the next chunk created a fresh conversation from position 0
with the file's tail, the report counted every message as appended, and every later
import of the file failed with ImportConflict. Each chunk is now a conditional append
(the incarnation the import saw, ending where the chunk starts). Deterministic: the
erasure runs inside the import's progress callback, between two of its steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pg_server import fresh_schema

from tiermem.config import Config
from tiermem.errors import ImportConflict
from tiermem.evals.conversations import import_dataset, open_conversations
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

LIMITS = {"max_content_bytes": 1 << 20, "max_metadata_bytes": 1 << 14}
NS = "default"
MESSAGES = 10
BATCH = 5  # two chunks of "c"


@pytest.fixture(params=["sqlite", "postgres"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    """Both engines: the conditional append is each store's own."""
    extra: dict[str, str] = {}
    if request.param == "postgres":
        extra = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    return Config(data_dir=tmp_path / "data", **extra)  # type: ignore[arg-type]


def write_file(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"conversation_id": "c", "role": "user", "content": f"message {i}"}) + "\n"
                            for i in range(n)), encoding="utf-8")
    return path


def contents(mem: Memory) -> list[str]:
    return [m.body["content"] for m in mem.history("c", namespace=NS)] if "c" in mem.conversations(NS) else []


# (id, messages of the file already stored before the import, the progress call at which
# "c" is erased: the import makes one call per conversation after checking them all,
# before any write, then one per chunk written; the import's first chunk's position)
ERASURES: list[tuple[str, int, int, int, int]] = [
    # the import wrote 0..4, then "c" is erased: the second chunk must not re-create it
    ("between_chunks", 0, 2, 5, BATCH),
    # 0..4 stored by an earlier import, the import checked them, then "c" is erased
    # before its first write (5..9)
    ("between_the_check_and_the_first_write", BATCH, 1, 5, 0),
]


@pytest.mark.parametrize(("stored", "erase_at", "at", "written"), [e[1:] for e in ERASURES],
                         ids=[e[0] for e in ERASURES])
def test_an_erasure_during_the_import_stops_it(tmp_path: Path, config: Config, embedder: FastEmbedder,
                                               stored: int, erase_at: int, at: int, written: int) -> None:
    path = write_file(tmp_path / "in.jsonl", MESSAGES)
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem:
        if stored:
            with open_conversations(write_file(tmp_path / "head.jsonl", stored), **LIMITS) as head:
                import_dataset(mem, head, namespace=NS, batch=BATCH)
        calls = [0]

        def progress(_n: int) -> None:
            calls[0] += 1
            if calls[0] == erase_at:
                mem.delete_conversation("c", namespace=NS)

        # ImportErased: an ImportConflict, what a caller of import already catches
        with open_conversations(path, **LIMITS) as data, pytest.raises(ImportConflict) as err:
            import_dataset(mem, data, namespace=NS, batch=BATCH, progress=progress)
        assert type(err.value).__name__ == "ImportErased"
        assert (err.value.conversation_id, err.value.position, getattr(err.value, "written", None)) == ("c", at, written)
        assert str(err.value).startswith(f"conversation 'c' was erased while it was imported (the import was to go "
                                         f"on at position {at}; {written} of its message(s)")
        assert contents(mem) == []  # not re-created holding the tail
        # the file imports whole again
        with open_conversations(path, **LIMITS) as data:
            report = import_dataset(mem, data, namespace=NS, batch=BATCH)
        assert (report.appended, report.already_present) == (MESSAGES, 0)
        assert contents(mem) == [f"message {i}" for i in range(MESSAGES)]


def test_another_conversation_of_the_file_is_not_stopped_before_the_erased_one(
        tmp_path: Path, config: Config, embedder: FastEmbedder) -> None:
    # "a" whole, then "c" erased between its chunks: "a" stays, "c" is gone
    path = tmp_path / "two.jsonl"
    lines = [{"conversation_id": "a", "role": "user", "content": "a0"}]
    lines += [{"conversation_id": "c", "role": "user", "content": f"message {i}"} for i in range(MESSAGES)]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem:
        calls = [0]

        def progress(_n: int) -> None:
            calls[0] += 1
            if calls[0] == 4:  # 2 checks, "a" written, "c"'s first chunk written
                mem.delete_conversation("c", namespace=NS)

        with open_conversations(path, **LIMITS) as data, pytest.raises(ImportConflict, match="'c' was erased"):
            import_dataset(mem, data, namespace=NS, batch=BATCH, progress=progress)
        assert mem.conversations(NS) == ["a"]
