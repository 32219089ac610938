"""The streamed import (`open_conversations` + `import_dataset`) reads the file twice: the
second reading gives what the first checked, a JSON list is parsed an item at a time
(items across the reader's blocks, numbers cut by a block's end), conversations that
interleave in the file are each appended in order with what waits bounded, and a file
changed between the two readings stops the import rather than write what was not checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from convo_fixtures import support_lines, write_jsonl

import tiermem.evals.conversations as conversations
from tiermem.config import DEFAULT_MAX_CONTENT_BYTES, DEFAULT_MAX_METADATA_BYTES, Config
from tiermem.errors import DataFileError
from tiermem.evals.conversations import import_dataset, open_conversations, read_conversations
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

LIMITS = {"max_content_bytes": DEFAULT_MAX_CONTENT_BYTES, "max_metadata_bytes": DEFAULT_MAX_METADATA_BYTES}
SMALL_BLOCK_CHARS = 7  # the JSON list reader's block, shrunk: every item spans several


def memory(tmp_path: Path, embedder: FastEmbedder) -> Memory:
    return Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False)


# (id, a JSON list's text): items of every kind, numbers that a block's end would cut
LISTS: list[tuple[str, str]] = [
    # the conversations format as a list, spaced out
    ("objects", json.dumps(support_lines("a"), indent=2)),
    # numbers and literals as items (bad lines, but parsed whole: 12345 is not 12 then 345)
    ("numbers", '[12345678901234567890, -0.125e-7, true ,null,"x" , {"a": [1, 2, {"b": "]"}]}]'),
    # empty
    ("empty", " [ ] "),
]


@pytest.mark.parametrize("text", [x[1] for x in LISTS], ids=[x[0] for x in LISTS])
def test_a_json_list_is_parsed_item_by_item_as_a_whole_parse_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    path = tmp_path / "l.json"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setattr(conversations, "JSON_READ_CHARS", SMALL_BLOCK_CHARS)
    got = [obj for _n, obj in conversations._json_items(path, str(path))]
    assert got == json.loads(text)


# (id, a text that is no JSON list)
NOT_JSON: list[tuple[str, str]] = [
    # a comma missing between items
    ("missing comma", '[{"a": 1} {"b": 2}]'),
    # cut short
    ("unterminated", '[{"a": 1}, {"b": '),
    # a comma then nothing
    ("trailing comma", '[{"a": 1},]'),
    # something after the list
    ("extra data", '[{"a": 1}] [2]'),
]


@pytest.mark.parametrize("text", [x[1] for x in NOT_JSON], ids=[x[0] for x in NOT_JSON])
def test_a_list_that_is_not_json_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    path = tmp_path / "l.json"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setattr(conversations, "JSON_READ_CHARS", SMALL_BLOCK_CHARS)
    with pytest.raises(DataFileError, match=r"l\.json: is not valid JSON"):
        read_conversations(path, **LIMITS)


def interleaved(n: int) -> list[dict[str, Any]]:
    """`n` messages in each of three conversations, a line of each in turn."""
    return [{"conversation_id": f"c{c}", "role": "user", "content": f"{c}/{i}"} for i in range(n) for c in range(3)]


def test_interleaved_conversations_are_each_appended_in_order(tmp_path: Path, embedder: FastEmbedder,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_jsonl(tmp_path / "i.jsonl", interleaved(7))
    monkeypatch.setattr(conversations, "MAX_PENDING_CHUNKS", 1)  # partial chunks are flushed early too
    with memory(tmp_path, embedder) as mem:
        with open_conversations(path, **LIMITS) as data:
            report = import_dataset(mem, data, namespace="default", batch=2)
        assert (report.appended, report.already_present) == (21, 0)
        for c in range(3):
            assert [m.body["content"] for m in mem.history(f"c{c}", namespace="default")] == \
                [f"{c}/{i}" for i in range(7)]
        with open_conversations(path, **LIMITS) as data:
            again = import_dataset(mem, data, namespace="default", batch=2)
        assert (again.appended, again.already_present) == (0, 21)


def test_a_file_changed_between_the_readings_stops_the_import(tmp_path: Path, embedder: FastEmbedder) -> None:
    lines = interleaved(3)
    path = write_jsonl(tmp_path / "i.jsonl", lines)
    with memory(tmp_path, embedder) as mem, open_conversations(path, **LIMITS) as data:
        lines[4]["content"] = "not what was checked"
        write_jsonl(path, lines)
        with pytest.raises(DataFileError, match=r"changed while it was imported \(message 1 of conversation 'c1'"):
            import_dataset(mem, data, namespace="default", batch=1000)
