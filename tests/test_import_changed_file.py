"""A file changed between the import's two readings writes nothing it did not check.
Before (a correctness review of the streaming import, 2026-12-06): (a) the second
reading was compared with the first by a digest of each message's body alone, so a
session_id, metadata or created_at rewritten in between was written unchecked; (b) a
change found only in the second reading stopped the import after the conversations
before it were written. Now the whole message as it would be stored is digested, and a
regular file whose inode, size or modification time differ from when its first reading
began is refused before the first write, naming the file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tiermem.config import Config
from tiermem.errors import DataFileError
from tiermem.evals.conversations import import_dataset, open_conversations
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

LIMITS = {"max_content_bytes": 1 << 20, "max_metadata_bytes": 1 << 14}
NS = "default"


def line(conv: str, i: int, **envelope: Any) -> dict[str, Any]:
    return {"conversation_id": conv, "role": "user", "content": f"m{i}", **envelope}


def write(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def memory(tmp_path: Path, embedder: FastEmbedder) -> Memory:
    return Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False)


# (id, the envelope checked, the envelope written in its place: as long, so that with the
# modification time put back the file's inode, size and mtime are what the check saw)
ENVELOPES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("session_id", {"session_id": "s1"}, {"session_id": "s2"}),
    ("metadata", {"metadata": {"k": 1}}, {"metadata": {"k": 2}}),
    ("created_at", {"created_at": 1000}, {"created_at": 2000}),
]


@pytest.mark.parametrize(("before", "after"), [e[1:] for e in ENVELOPES], ids=[e[0] for e in ENVELOPES])
def test_an_envelope_rewritten_between_the_readings_is_found(tmp_path: Path, embedder: FastEmbedder,
                                                             before: dict[str, Any], after: dict[str, Any]) -> None:
    path = tmp_path / "in.jsonl"
    write(path, [line("a", i, **before) for i in range(3)])
    with memory(tmp_path, embedder) as mem, open_conversations(path, **LIMITS) as data:
        st = path.stat()
        write(path, [line("a", i, **after) for i in range(3)])
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert path.stat().st_size == st.st_size
        with pytest.raises(DataFileError, match=r"changed while it was imported \(message 0 of conversation 'a' is "
                           r"not the one checked\)"):
            import_dataset(mem, data, namespace=NS)
        assert mem.conversations(NS) == []


def rewrite_in_place(path: Path) -> None:
    """The last line cut (a truncated write): the same inode, another size."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text[:-10] + "\n", encoding="utf-8")


def replace_by_rename(path: Path) -> None:
    """Another file renamed over it (an editor's save): as long, another inode, "c"'s
    last message another."""
    other = path.with_name("other.jsonl")
    write(other, [line("b", i) for i in range(3)] + [line("c", i) for i in (0, 1, 9)])
    os.replace(other, path)


def append_a_line(path: Path) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line("c", 3)) + "\n")


# (id, how the file changes after its first reading): each would have been found only at
# conversation "c", after "b" was written
CHANGES = [("rewritten_in_place", rewrite_in_place), ("replaced_by_rename", replace_by_rename),
           ("a_line_appended", append_a_line)]


@pytest.mark.parametrize("change", [c[1] for c in CHANGES], ids=[c[0] for c in CHANGES])
def test_a_file_changed_after_its_check_is_refused_before_anything_is_written(
        tmp_path: Path, embedder: FastEmbedder, change: Any) -> None:
    path = tmp_path / "in.jsonl"
    write(path, [line("b", i) for i in range(3)] + [line("c", i) for i in range(3)])
    with memory(tmp_path, embedder) as mem, open_conversations(path, **LIMITS) as data:
        change(path)
        with pytest.raises(DataFileError, match=rf"^{path}: changed after it was checked .*nothing was imported"):
            import_dataset(mem, data, namespace=NS)
        assert mem.conversations(NS) == []
