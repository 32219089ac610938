"""`tiermem import` writes the whole file or nothing. The reader did not check what
`Memory.append_many` checks beyond each message: the conversation id's length against
the Config's `max_id_chars`, and that a retraction names an earlier message. So a bad
later conversation (or a bad row after the first chunk of 1,000) failed mid-import: the
conversations (or chunk) before it stayed committed, the error named a batch index
instead of the file's line, and --skip-bad could not skip it (an audit, 2026-12-05).
Now the reader refuses such a line by its number before anything is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from convo_fixtures import write_jsonl

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

RETRACT = "tiermem.retract"
CHUNK_ROWS = 1000  # import_dataset's batch: a bad row after it once left the first chunk written


def msg(conv: str, text: str) -> dict[str, Any]:
    return {"conversation_id": conv, "message": {"role": "user", "content": text}}


def retract(conv: str, position: int) -> dict[str, Any]:
    return {"conversation_id": conv, "message": {"type": RETRACT, "position": position}}


GOOD = [msg("good-1", f"hello {i}") for i in range(3)]

# (id, lines, config TOML or "", the bad line's number, words the error must hold)
CASES: list[tuple[str, list[dict[str, Any]], str, int, str]] = [
    # an id of 200 characters, over the default max_id_chars (128), after a good conversation
    ("long_id", [*GOOD, msg("x" * 200, "hi")], "", 4, "200 characters exceeds the limit of 128"),
    # the Config's own limit, not the default: 20 characters over max_id_chars = 16
    ("long_id_config", [*GOOD, msg("y" * 20, "hi")], "[limits]\nmax_id_chars = 16\n", 4,
     "20 characters exceeds the limit of 16"),
    # a retraction naming a position its conversation has not reached (it has one message)
    ("retract_unwritten", [*GOOD, msg("bad-2", "hi"), retract("bad-2", 50)], "", 5,
     "50 is not written yet"),
    # a retraction naming itself (position 1 is the retraction's own)
    ("retract_itself", [*GOOD, msg("bad-2", "hi"), retract("bad-2", 1)], "", 5, "1 is not written yet"),
    # positions count per conversation, not per file: good-1's three rows come first, yet bad-2 has no 2
    ("retract_other_conversation", [*GOOD, msg("bad-2", "hi"), retract("bad-2", 2)], "", 5,
     "2 is not written yet"),
    # a bad retraction after 1,000 good rows of one conversation (past the first chunk)
    ("after_first_chunk", [*(msg("long", f"m{i}") for i in range(CHUNK_ROWS + 100)), retract("long", 5000)], "",
     CHUNK_ROWS + 101, "5000 is not written yet"),
    # inside a conversation object: named by its index in `messages`
    ("retract_in_messages_list", [*GOOD, {"conversation_id": "bad-3", "messages": [
        {"role": "user", "content": "hi"}, {"type": RETRACT, "position": 7}]}], "", 4,
     "messages[1].position: must name an earlier message"),
]


def stored(tmp_path: Path, embedder: FastEmbedder) -> dict[str, int]:
    """Messages per conversation in the data dir (none: no database was even created)."""
    if not (tmp_path / "data" / "tiermem.db").exists():
        return {}
    with Memory(Config(data_dir=tmp_path / "data", max_id_chars=256), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        return {c: len(mem.history(c, namespace="default")) for c in mem.conversations("default")}


@pytest.mark.parametrize(("lines", "toml", "line", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_strict_import_refuses_the_file_and_writes_nothing(tmp_path: Path, embedder: FastEmbedder,
                                                           lines: list[dict[str, Any]], toml: str, line: int,
                                                           words: str) -> None:
    f = write_jsonl(tmp_path / "in.jsonl", lines)
    r = tm(tmp_path, embedder, toml, "import", str(f))
    assert r.exit_code == 1, r.output
    assert f"1 bad line(s), nothing imported (line {line}: " in r.stderr and words in r.stderr, r.stderr
    assert "Traceback" not in r.output
    assert stored(tmp_path, embedder) == {}


@pytest.mark.parametrize(("lines", "toml", "line", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_skip_bad_skips_the_line_and_imports_the_rest(tmp_path: Path, embedder: FastEmbedder,
                                                      lines: list[dict[str, Any]], toml: str, line: int,
                                                      words: str) -> None:
    f = write_jsonl(tmp_path / "in.jsonl", lines)
    r = tm(tmp_path, embedder, toml, "import", str(f), "--skip-bad", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert [b["line"] for b in report["bad_lines"]] == [line] and words in report["bad_lines"][0]["problem"]
    want: dict[str, int] = {}
    for n, x in enumerate(lines, start=1):
        if n != line:
            conv = x["conversation_id"]
            want[conv] = want.get(conv, 0) + len(x.get("messages", [x]))
    assert stored(tmp_path, embedder) == want


def test_a_retraction_of_an_earlier_message_still_imports(tmp_path: Path, embedder: FastEmbedder) -> None:
    # positions counted per conversation across interleaved lines: c2's retraction names
    # c2's position 1, written by its second line (file line 4)
    lines = [msg("c1", "a"), msg("c2", "x"), msg("c1", "b"), msg("c2", "y"), retract("c2", 1), retract("c1", 0)]
    r = tm(tmp_path, embedder, "", "import", str(write_jsonl(tmp_path / "in.jsonl", lines)))
    assert r.exit_code == 0, r.output
    assert stored(tmp_path, embedder) == {"c1": 3, "c2": 3}
