"""A conversations file whose line holds JSON Python's parser refuses with something
other than a JSONDecodeError (an integer past its 4,300-digit limit, nesting past the
recursion limit) is a bad line like any other: named by its number, refused, or skipped
with --skip-bad. On the code before (an audit, 2026-12-03) both ended the whole read with
a raw ValueError or RecursionError naming no file or line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem.config import DEFAULT_MAX_CONTENT_BYTES, DEFAULT_MAX_METADATA_BYTES
from tiermem.errors import DataFileError
from tiermem.evals.conversations import read_conversations

GOOD = '{"conversation_id": "c", "role": "user", "content": "hello"}'
BAD_LINES = [
    # an integer of 4,400 digits
    '{"conversation_id": "c", "role": "user", "content": "x", "created_at": 1' + "0" * 4400 + "}",
    # nested far past Python's recursion limit
    '{"conversation_id": "c", "role": "user", "content": "x", "metadata": ' + "[" * 5000 + "]" * 5000 + "}",
]
LIMITS = {"max_content_bytes": DEFAULT_MAX_CONTENT_BYTES, "max_metadata_bytes": DEFAULT_MAX_METADATA_BYTES}


@pytest.mark.parametrize("bad", BAD_LINES, ids=["4,400-digit integer", "deep nesting"])
def test_a_line_python_cannot_parse_is_a_bad_line(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "convs.jsonl"
    path.write_text("\n".join([GOOD, bad, GOOD]) + "\n")
    with pytest.raises(DataFileError, match="line 2"):
        read_conversations(path, **LIMITS)
    data = read_conversations(path, strict=False, **LIMITS)
    assert [b.line for b in data.bad] == [2]
    assert sum(len(c.messages) for c in data.conversations) == 2


@pytest.mark.parametrize("bad", BAD_LINES, ids=["4,400-digit integer", "deep nesting"])
def test_a_json_file_python_cannot_parse_names_the_file(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "convs.json"
    path.write_text("[" + GOOD + ", " + bad + "]")
    with pytest.raises(DataFileError, match="not valid JSON"):
        read_conversations(path, **LIMITS)
