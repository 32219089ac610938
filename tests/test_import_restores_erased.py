"""An import does not bring back a conversation erased on request. Before (a data
portability review, 2026-12-07), `tiermem export`, `tiermem delete alice`, `tiermem
import <the export>` exited 0 ("imported 1 message(s)") and alice's erased messages were
readable again beside her tombstone. Now a conversation with a tombstone of reason
'erase' whose lines in the file were created at or before that erasure is refused
(ImportOfErased, naming it and the erasure's time), nothing of the file written, unless
`--restore-erased` / `restore_erased=True`. Lines created after the erasure are a new
conversation of the same name (as an append after it is), and a pruned conversation
(retention, not a request) re-imports: its messages keep their old times, so the next
prune takes it again."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from convo_fixtures import write_jsonl

from tiermem.config import Config
from tiermem.errors import ImportOfErased
from tiermem.evals.conversations import import_dataset, open_conversations
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

SECRET = "my SSN is 078-05-1120"
HOUR_S = 3600.0
BEFORE = time.time() - 10 * HOUR_S  # the old export's lines: hours before any erasure a test makes
AFTER = time.time() + 10 * HOUR_S  # lines written after the erasure (a date ahead is stored as given)


def line(conv: str, text: str, at: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {"conversation_id": conv, "message": {"role": "user", "content": text}}
    if at is not None:
        out["created_at"] = at
    return out


OLD = [line("alice", SECRET, BEFORE), line("bob", "hello", BEFORE)]

# (id, how alice goes, the file imported after, refused?, alice's stored contents after)
CASES: list[tuple[str, str, list[dict[str, Any]], bool, list[str]]] = [
    # the reviewer's case: an export made before the erasure, imported after it
    ("erased_old_export", "erase", OLD, True, []),
    # one old line among new ones is enough: the file holds erased data
    ("erased_mixed_times", "erase", [line("alice", "new", AFTER), line("alice", SECRET, BEFORE)], True, []),
    # lines created after the erasure: a new conversation of the same name, as an append after it
    ("erased_new_lines", "erase", [line("alice", "hi again", AFTER)], False, ["hi again"]),
    # lines with no created_at are written now, after the erasure: new too
    ("erased_undated_lines", "erase", [line("alice", "hi again", None)], False, ["hi again"]),
    # pruned (retention, not a request): re-imported, as a restore; the next prune takes it again
    ("pruned_old_export", "prune", OLD, False, [SECRET]),
]


def first_import(data: Path, embedder: FastEmbedder, tmp_path: Path, how: str) -> None:
    """alice and bob stored from the old file, then alice erased or pruned (bob stays)."""
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        import_file(mem, write_jsonl(tmp_path / "first.jsonl", OLD))
        if how == "erase":
            mem.delete_conversation("alice")
        else:
            mem.append("bob", {"role": "user", "content": "still here"})  # bob stays: written now
            assert mem.prune(HOUR_S).conversation_ids == ["alice"]


def import_file(mem: Memory, path: Path, restore_erased: bool = False) -> Any:
    with open_conversations(path, max_content_bytes=mem.config.max_content_bytes,
                            max_metadata_bytes=mem.config.max_metadata_bytes) as data:
        return import_dataset(mem, data, namespace="default", restore_erased=restore_erased)


def contents(data: Path, embedder: FastEmbedder) -> dict[str, list[str]]:
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        return {c: [m.body["content"] for m in mem.history(c)] for c in mem.conversations("default")}


@pytest.mark.parametrize(("how", "lines", "refused", "alice"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_library_import(tmp_path: Path, embedder: FastEmbedder, how: str, lines: list[dict[str, Any]],
                        refused: bool, alice: list[str]) -> None:
    data = tmp_path / "data"
    first_import(data, embedder, tmp_path, how)
    before = contents(data, embedder)
    f = write_jsonl(tmp_path / "again.jsonl", lines)
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        if refused:
            with pytest.raises(ImportOfErased) as exc:
                import_file(mem, f)
            assert exc.value.conversation_id == "alice" and exc.value.oldest == BEFORE
            assert "'alice' was erased on request at" in str(exc.value) and "--restore-erased" in str(exc.value)
        else:
            import_file(mem, f)
    after = contents(data, embedder)
    if refused:
        assert after == before and "alice" not in after  # nothing of the file written, bob's line neither
    else:
        assert after["alice"] == alice


@pytest.mark.parametrize(("how", "lines", "refused", "alice"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cli_import(tmp_path: Path, embedder: FastEmbedder, how: str, lines: list[dict[str, Any]],
                    refused: bool, alice: list[str]) -> None:
    data = tmp_path / "data"
    first_import(data, embedder, tmp_path, how)
    before = contents(data, embedder)
    r = tm(tmp_path, embedder, "", "import", str(write_jsonl(tmp_path / "again.jsonl", lines)))
    if refused:
        assert r.exit_code == 1, r.output
        assert "conversation 'alice' was erased on request at" in r.stderr and "nothing was written" in r.stderr
        assert "Traceback" not in r.output
        assert contents(data, embedder) == before
    else:
        assert r.exit_code == 0, r.output
        assert contents(data, embedder)["alice"] == alice


def test_cli_restore_erased_flag_restores(tmp_path: Path, embedder: FastEmbedder) -> None:
    # the operator's explicit word: the old export comes back whole, alice's line included
    data = tmp_path / "data"
    first_import(data, embedder, tmp_path, "erase")
    r = tm(tmp_path, embedder, "", "import", "--restore-erased", "--json",
           str(write_jsonl(tmp_path / "again.jsonl", OLD)))
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["appended"] == 1  # alice's; bob's is present already
    assert contents(data, embedder)["alice"] == [SECRET]


# A conversation restored with --restore-erased keeps its old tombstone, and its restored
# lines keep their old times. Before (review r_c5 F1), every later import that held it was
# refused, even the same file again or the store's own next export. The only way through was
# the file-wide flag, which also brought back other erased conversations. Now only lines the
# import would write (past what is stored) are compared with the erasure.
def restored(data: Path, embedder: FastEmbedder, tmp_path: Path) -> Path:
    """alice erased, then restored from the old file with restore_erased; returns that file."""
    first_import(data, embedder, tmp_path, "erase")
    old = write_jsonl(tmp_path / "old.jsonl", OLD)
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        import_file(mem, old, restore_erased=True)
    return old


def current_export(data: Path, embedder: FastEmbedder, tmp_path: Path, then: str | None) -> Path:
    """alice's stored lines as an export gives them (old times kept), and `then` after them."""
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        if then is not None:
            mem.append("alice", {"role": "user", "content": then})
        lines = [line("alice", m.body["content"], m.created_at) for m in mem.history("alice")]
    return write_jsonl(tmp_path / "now.jsonl", lines)


# (id, the file after the restore, refused?, alice's stored contents after)
RESTORED: list[tuple[str, str, bool, list[str]]] = [
    # the same file again: all present, nothing new
    ("same_file_again", "old", False, [SECRET]),
    # the store's own export after an append: all present
    ("own_next_export", "now", False, [SECRET, "c2"]),
    # the own export plus a line written after it: only that line is new, and it is new data
    ("own_export_plus_new_line", "now+new", False, [SECRET, "c2", "later"]),
    # the own export plus an old line (from before the erasure) past what is stored: refused
    ("own_export_plus_old_line", "now+old", True, [SECRET, "c2"]),
]


def restored_case(data: Path, embedder: FastEmbedder, tmp_path: Path, which: str) -> Path:
    old = restored(data, embedder, tmp_path)
    if which == "old":
        return old
    now = current_export(data, embedder, tmp_path, "c2")
    extra = {"now": [], "now+new": [line("alice", "later", AFTER)], "now+old": [line("alice", "older", BEFORE)]}
    lines = [json.loads(x) for x in now.read_text().splitlines()] + extra[which]
    return write_jsonl(tmp_path / "file.jsonl", lines)


@pytest.mark.parametrize(("which", "refused", "alice"), [c[1:] for c in RESTORED], ids=[c[0] for c in RESTORED])
def test_library_restored_reimports(tmp_path: Path, embedder: FastEmbedder, which: str, refused: bool,
                                    alice: list[str]) -> None:
    data = tmp_path / "data"
    f = restored_case(data, embedder, tmp_path, which)
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        if refused:
            with pytest.raises(ImportOfErased) as exc:
                import_file(mem, f)
            assert exc.value.conversation_id == "alice" and exc.value.oldest == BEFORE
        else:
            report = import_file(mem, f)
            assert report.already_present >= 1
    assert contents(data, embedder)["alice"] == alice


@pytest.mark.parametrize(("which", "refused", "alice"), [c[1:] for c in RESTORED], ids=[c[0] for c in RESTORED])
def test_cli_restored_reimports(tmp_path: Path, embedder: FastEmbedder, which: str, refused: bool,
                                alice: list[str]) -> None:
    data = tmp_path / "data"
    f = restored_case(data, embedder, tmp_path, which)
    r = tm(tmp_path, embedder, "", "import", str(f))
    if refused:
        assert r.exit_code == 1, r.output
        assert "conversation 'alice' was erased on request at" in r.stderr and "Traceback" not in r.output
    else:
        assert r.exit_code == 0, r.output
    assert contents(data, embedder)["alice"] == alice


def test_restored_beside_erased_refuses_only_the_erased(tmp_path: Path, embedder: FastEmbedder) -> None:
    # the file holds restored alice (present) and bob, erased since: bob's old line is refused,
    # naming bob, so the restored conversation no longer pushes anyone to the file-wide flag
    data = tmp_path / "data"
    old = restored(data, embedder, tmp_path)
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.delete_conversation("bob")
        with pytest.raises(ImportOfErased) as exc:
            import_file(mem, old)
    assert exc.value.conversation_id == "bob"
    assert "bob" not in contents(data, embedder)


def test_recreated_then_old_export_is_refused_as_erased(tmp_path: Path, embedder: FastEmbedder) -> None:
    # erased, then the name used again: the old export differs from what is stored at 0, and
    # its line there is older than the erasure, so the refusal names the erasure, not a conflict
    data = tmp_path / "data"
    first_import(data, embedder, tmp_path, "erase")
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("alice", {"role": "user", "content": "hi again"})
        with pytest.raises(ImportOfErased):
            import_file(mem, write_jsonl(tmp_path / "again.jsonl", OLD))
    assert contents(data, embedder)["alice"] == ["hi again"]
