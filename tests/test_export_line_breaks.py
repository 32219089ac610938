"""`tiermem export` then `tiermem import` restores messages holding characters that
Python's `str.splitlines` takes for line breaks. The import read JSONL with
`splitlines()`, and the export writes raw UTF-8 (ensure_ascii=False), so a message with
U+2028, U+2029 or U+0085 was cut in pieces: a strict import refused its own export, and
--skip-bad dropped those messages (an audit, 2026-12-05: 1 of 4 rows restored). Lines
now end at "\\n" only, and the export escapes those three characters (still readable
UTF-8 otherwise), so any line-based reader sees one record per line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.config import DEFAULT_MAX_CONTENT_BYTES, DEFAULT_MAX_METADATA_BYTES, Config
from tiermem.evals.conversations import read_conversations
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

LIMITS = {"max_content_bytes": DEFAULT_MAX_CONTENT_BYTES, "max_metadata_bytes": DEFAULT_MAX_METADATA_BYTES}

BREAKS = [
    ("\u2028", "LINE SEPARATOR: text pasted from a PDF or a web page"),
    ("\u2029", "PARAGRAPH SEPARATOR"),
    ("\u0085", "NEXT LINE (C1 control, left raw by JSON)"),
    ("\x1c", "FILE SEPARATOR (JSON escapes it; splitlines breaks at it)"),
    ("\x1d", "GROUP SEPARATOR"),
    ("\x1e", "RECORD SEPARATOR"),
    ("\x0b", "vertical tab"),
    ("\x0c", "form feed"),
]


def tm(embedder: FastEmbedder, data: Path, *args: str) -> str:
    r = CliRunner().invoke(cli, ["--data-dir", str(data), *args], obj=CliState(embedder=embedder))
    assert r.exit_code == 0, r.output
    return r.stdout


def stored(data: Path, embedder: FastEmbedder) -> list[tuple[str, str | None, object]]:
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        return [(json.dumps(m.body, ensure_ascii=False), m.session_id, m.metadata)
                for m in mem.history("c1", namespace="default")]


def test_export_then_import_restores_every_line_breaking_character(tmp_path: Path, embedder: FastEmbedder) -> None:
    src, dst, dump = tmp_path / "src", tmp_path / "dst", tmp_path / "dump.jsonl"
    with Memory(Config(data_dir=src), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("c1", {"role": "user", "content": "plain line before, café"})
        for ch, _why in BREAKS:
            # in the content, in a metadata value and key, and in the session id
            # (a session id may not hold a control character below U+0020)
            session = f"s{ch}1" if ch >= " " else "s1"
            mem.append("c1", {"role": "user", "content": f"first{ch}second", "session_id": session,
                              "metadata": {f"k{ch}": f"v{ch}"}})
        mem.append("c1", {"role": "assistant", "content": "plain line after"})
    tm(embedder, src, "export", "-o", str(dump))
    raw = dump.read_text("utf-8")
    assert len(raw.splitlines()) == len(BREAKS) + 2  # one record per line for any line-based reader
    assert "café" in raw and "\\u2028" in raw and "\u2028" not in raw  # escaped; the rest stays readable
    tm(embedder, dst, "import", str(dump))
    want = stored(src, embedder)
    assert stored(dst, embedder) == want and len(want) == len(BREAKS) + 2  # byte-identical bodies


@pytest.mark.parametrize(("ch", "why"), BREAKS[:3], ids=["U+2028", "U+2029", "U+0085"])
def test_a_raw_line_breaking_character_inside_a_string_is_not_a_line_end(tmp_path: Path, ch: str,
                                                                        why: str) -> None:
    # a file another tool wrote with the character raw (valid JSON: only U+0000-U+001F
    # must be escaped), and CRLF line ends
    path = tmp_path / "in.jsonl"
    rows = [{"conversation_id": "c1", "role": "user", "content": f"a{ch}b"},
            {"conversation_id": "c1", "role": "assistant", "content": "ok"}]
    path.write_bytes("".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows).encode("utf-8"))
    data = read_conversations(path, **LIMITS)
    assert [m["content"] for m in data.conversations[0].messages] == [f"a{ch}b", "ok"], why
    assert data.bad == []


def test_bad_lines_are_numbered_by_newlines_only(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    good = json.dumps({"conversation_id": "c1", "role": "user", "content": "a\u2028b"}, ensure_ascii=False)
    path.write_text(good + "\n" + good + "\n{not json\n", encoding="utf-8")
    data = read_conversations(path, strict=False, **LIMITS)
    assert [b.line for b in data.bad] == [3] and len(data.conversations[0].messages) == 2
