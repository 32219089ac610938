"""A file that starts with a UTF-8 byte order mark imports as the same file without it.
Windows tools write one (PowerShell 5's `Out-File -Encoding utf8`, Notepad before 2019),
and RFC 8259 lets a JSON reader ignore it. The reader kept it as text: a JSONL file's
first line was refused ("Unexpected UTF-8 BOM (decode using utf-8-sig)", a fix the user
cannot apply; with --skip-bad the first message was dropped), and a JSON list or a
LoCoMo file, no longer starting with "[", was read as JSONL and every line of it refused
(a bug hunt, 2026-12-06)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from convo_fixtures import tiny_locomo

from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

BOM = "\ufeff"
LINES = [{"conversation_id": "c1", "message": {"role": "user", "content": "My dog is called Biscuit."}},
         {"conversation_id": "c1", "message": {"role": "assistant", "content": "Lovely name!"}}]


def jsonl(end: str) -> str:
    return "".join(json.dumps(x) + end for x in LINES)


# (id, the file's text after the BOM, the messages it holds)
FILES: list[tuple[str, str, int]] = [
    ("jsonl", jsonl("\n"), 2),  # JSONL: the BOM sat before the first line's "{"
    ("jsonl_crlf", jsonl("\r\n"), 2),  # a Windows file: a BOM and CRLF line ends together
    ("json_list", json.dumps(LINES, indent=2), 2),  # a pretty-printed JSON list: it began with the BOM, not "["
    ("locomo", json.dumps(tiny_locomo()), 4),  # a LoCoMo file, read again by evals.locomo
]


@pytest.mark.parametrize(("text", "messages"), [f[1:] for f in FILES], ids=[f[0] for f in FILES])
@pytest.mark.parametrize("skip_bad", [False, True], ids=["strict", "skip_bad"])
def test_a_leading_byte_order_mark_is_not_part_of_the_file(tmp_path: Path, embedder: FastEmbedder, text: str,
                                                           messages: int, skip_bad: bool) -> None:
    f = tmp_path / "in.json"
    f.write_text(BOM + text, encoding="utf-8")
    r = tm(tmp_path, embedder, "", "import", str(f), "--json", *(["--skip-bad"] if skip_bad else []))
    assert r.exit_code == 0, r.output
    report: dict[str, Any] = json.loads(r.stdout)
    assert (report["appended"], report["bad_lines"]) == (messages, [])
    # and it is the same import as the file without the BOM: nothing more to add
    f.write_text(text, encoding="utf-8")
    again = json.loads(tm(tmp_path, embedder, "", "import", str(f), "--json").stdout)
    assert (again["appended"], again["already_present"]) == (0, messages)


def test_a_byte_order_mark_inside_a_string_is_kept(tmp_path: Path, embedder: FastEmbedder) -> None:
    # only the file's first character is the mark: U+FEFF in a message is its text
    f = tmp_path / "in.jsonl"
    line = {"conversation_id": "c1", "message": {"role": "user", "content": BOM + "text"}}
    f.write_text(BOM + json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    assert tm(tmp_path, embedder, "", "import", str(f)).exit_code == 0
    out = tm(tmp_path, embedder, "", "export")
    assert json.loads(out.stdout)["message"]["content"] == BOM + "text"
