"""`tiermem export` of a store holding a conversation whose id today's config refuses (it
was created before `max_id_chars` was lowered) no longer writes a backup that does not
restore. The export did not check the id: it wrote the conversation's lines, exit 0, and
`tiermem import` of the file (under the same config) refused every one of them
("conversation_id: 100 characters exceeds the limit of 64 characters"). Now the id is
checked as import checks it (91b49be did so for each message): the conversation is named
with import's error and fails the export (exit 1, `-o` writing nothing) unless
--skip-unreadable leaves it out whole. Real SQLite, real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import tm

from tiermem.config import DEFAULT_MAX_ID_CHARS, Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

LOWERED = 64  # characters: the max_id_chars the operator set after the conversations were made
LOWERED_TOML = f"max_id_chars = {LOWERED}\n"
LONG = "l" * (LOWERED + 1)  # fit the default limit when created, one past the lowered one
AT_LIMIT = "a" * LOWERED  # exactly the lowered limit: still imports
SHORT = "s"
ERROR = f"conversation_id: {LOWERED + 1} characters exceeds the limit of {LOWERED} characters"


def hello(cid: str) -> dict[str, str]:
    return {"role": "user", "content": f"hello from {cid}"}


def store(data: Path, embedder: FastEmbedder, cids: list[str]) -> None:
    """Each of `cids` with one message, under the default max_id_chars."""
    assert all(len(c) <= DEFAULT_MAX_ID_CHARS for c in cids)
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        for cid in cids:
            mem.append(cid, hello(cid))


# (the conversations named on the command line: () for all of the namespace's)
@pytest.mark.parametrize("named", [
    (),  # the whole namespace
    (SHORT, LONG),  # the long one named
])
def test_the_export_fails_naming_the_conversation_and_writes_nothing(tmp_path: Path, embedder: FastEmbedder,
                                                                     named: tuple[str, ...]) -> None:
    store(tmp_path / "data", embedder, [SHORT, LONG])
    out = tmp_path / "e.jsonl"
    out.write_text("the backup before\n")
    r = tm(tmp_path, embedder, LOWERED_TOML, "export", "-o", str(out), *named)
    assert r.exit_code == 1, r.output
    assert f"conversation {LONG!r}: its id is refused by tiermem import ({ERROR})" in r.stderr, r.stderr
    assert "1 conversation(s) have an id tiermem import would refuse" in r.stderr, r.stderr
    assert f"nothing was written to {out}" in r.stderr and "--skip-unreadable" in r.stderr, r.stderr
    assert out.read_text() == "the backup before\n"


def test_skip_unreadable_leaves_it_out_and_the_file_imports(tmp_path: Path, embedder: FastEmbedder) -> None:
    store(tmp_path / "data", embedder, [SHORT, LONG, AT_LIMIT])
    out = tmp_path / "e.jsonl"
    r = tm(tmp_path, embedder, LOWERED_TOML, "export", "--skip-unreadable", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert f"({ERROR})" in r.stderr, r.stderr
    assert sorted(json.loads(x)["conversation_id"] for x in out.read_text().splitlines()) == sorted([SHORT, AT_LIMIT])
    moved = tmp_path / "moved"
    moved.mkdir()
    r = tm(moved, embedder, LOWERED_TOML, "import", str(out))
    assert r.exit_code == 0, r.output
    with Memory(Config(data_dir=moved / "data", max_id_chars=LOWERED), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        assert sorted(mem.conversations("default")) == sorted([SHORT, AT_LIMIT])
        assert [m.body for m in mem.history(AT_LIMIT)] == [hello(AT_LIMIT)]


def test_ids_within_the_limit_export_as_before(tmp_path: Path, embedder: FastEmbedder) -> None:
    store(tmp_path / "data", embedder, [SHORT, AT_LIMIT])
    r = tm(tmp_path, embedder, LOWERED_TOML, "export")
    assert r.exit_code == 0 and r.stderr == "", r.output
    assert sorted(json.loads(x)["message"]["content"] for x in r.stdout.splitlines()) == sorted(
        hello(c)["content"] for c in (SHORT, AT_LIMIT))
