"""`tiermem import --skip-bad` of a file whose every line is bad names the bad lines. It
said only "holds no conversation", about a file full of lines, and not which line was
wrong nor why (a bug hunt, 2026-12-06)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import tm

from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

# (id, the file's text, words the error must hold)
FILES: list[tuple[str, str, str]] = [
    # one line, an unknown role
    ("one_bad_message", '{"conversation_id": "c1", "message": {"role": "usr", "content": "hi"}}\n',
     "1 bad line(s), nothing imported (line 1: role: "),
    # one line that is not JSON after one whose conversation id is not an id
    ("two_kinds", '{"conversation_id": "c 1", "role": "user", "content": "hi"}\nnot json\n',
     "2 bad line(s), nothing imported (line 1: conversation_id: must be an id"),
    # a JSON list: its items are numbered from 1
    ("json_list", '[{"conversation_id": "c1", "role": "user"}, 7]',
     "2 bad line(s), nothing imported (line 1: "),
]


@pytest.mark.parametrize(("text", "words"), [f[1:] for f in FILES], ids=[f[0] for f in FILES])
def test_skipping_every_line_names_them(tmp_path: Path, embedder: FastEmbedder, text: str, words: str) -> None:
    f = tmp_path / "in.jsonl"
    f.write_text(text)
    r = tm(tmp_path, embedder, "", "import", str(f), "--skip-bad")
    assert r.exit_code == 1, r.output
    assert words in r.stderr and "no good line is left to import" in r.stderr, r.stderr
    assert "Traceback" not in r.output
    assert not (tmp_path / "data" / "tiermem.db").exists()  # refused before the store was opened


def test_a_file_of_blank_lines_still_holds_no_conversation(tmp_path: Path, embedder: FastEmbedder) -> None:
    f = tmp_path / "in.jsonl"
    f.write_text("\n  \n")
    r = tm(tmp_path, embedder, "", "import", str(f), "--skip-bad")
    assert r.exit_code == 1 and "holds no conversation" in r.stderr, r.output
