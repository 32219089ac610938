"""An import refuses an erased conversation's lines even where they were stamped ahead of
the server clock (review of d782306 / 9a3ba10).

Before, the check compared each line's `created_at` with the erasure's server time only:
lines stamped later than the erasure (a client clock ahead of the server's, or an export
of lines whose created_at the caller set) read as written after it, and the erased text
came back, exit 0. Now each tombstone records the newest created_at among the messages
it erased (SQLite m034, PostgreSQL m019: `newest_message_at`), and an import refuses a
line created at or before the later of the two (`Erasure.until`).

Invariants: a line of an erased conversation stamped at or before its newest erased
message is refused, ImportOfErased naming both times, nothing of the file written; a
line stamped after both is a new conversation of that name and imports; lines with no
created_at are written now, new; `restore_erased=True` still restores; a tombstone that
records no newest message (written before the migration, or by an older tiermem still
running) keeps the erasure time alone; `migrate-store` carries the record. Both engines
(tests/conftest.py `engine_config`; tests/pg_server.py for migrate-store)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from cold_helpers import sql_behind
from convo_fixtures import write_jsonl
from pg_server import MIGRATION_DIRECTIONS, copied_sides, opened

from tiermem.config import Config
from tiermem.errors import ImportOfErased
from tiermem.evals.conversations import import_dataset, open_conversations
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

SECRET = "my SSN is 078-05-1120"
HOUR_S = 3600.0
NOW = time.time()
PAST = NOW - 10 * HOUR_S  # an export's lines stamped by a client whose clock is right: before any erasure
AHEAD = NOW + 10 * HOUR_S  # stamped by a client whose clock runs 10 h ahead: after the erasure's server time
BETWEEN = NOW + 5 * HOUR_S  # after the erasure's server time, before the newest erased line (AHEAD)
LATER = NOW + 20 * HOUR_S  # after both: a new conversation written after the erasure


def line(conv: str, text: str, at: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {"conversation_id": conv, "message": {"role": "user", "content": text}}
    if at is not None:
        out["created_at"] = at
    return out


def import_file(mem: Memory, path: Path, restore_erased: bool = False) -> Any:
    with open_conversations(path, max_content_bytes=mem.config.max_content_bytes,
                            max_metadata_bytes=mem.config.max_metadata_bytes) as data:
        return import_dataset(mem, data, namespace="default", restore_erased=restore_erased)


def opened_memory(cfg: Config, embedder: FastEmbedder) -> Memory:
    return Memory(cfg, embedder=embedder, hot=False, background_indexing=False)


def stored_then_erased(cfg: Config, embedder: FastEmbedder, tmp_path: Path, stamp: float) -> Path:
    """alice (SECRET, then 'more', both stamped `stamp`) and bob imported from a file,
    then alice erased on request (bob stays); returns that file, the old export."""
    old = write_jsonl(tmp_path / "old.jsonl", [line("alice", SECRET, stamp), line("alice", "more", stamp),
                                               line("bob", "hello", PAST)])
    with opened_memory(cfg, embedder) as mem:
        import_file(mem, old)
        mem.delete_conversation("alice")
    return old


def contents(cfg: Config, embedder: FastEmbedder) -> dict[str, list[str]]:
    with opened_memory(cfg, embedder) as mem:
        return {c: [m.body["content"] for m in mem.history(c)] for c in mem.conversations("default")}


# (id, alice's stamps when erased, the file imported after it (None: the old export), restore_erased,
#  the refusal's oldest line (None: imported), alice's contents after)
CASES: list[tuple[str, float, list[dict[str, Any]] | None, bool, float | None, list[str]]] = [
    # the reviewer's case: the old export of lines a client stamped 10 h ahead, imported after the erasure
    ("ahead_old_export", AHEAD, None, False, AHEAD, []),
    # one line stamped after the erasure but before the newest erased line: still the erased data's span
    ("ahead_line_between", AHEAD, [line("alice", SECRET, BETWEEN)], False, BETWEEN, []),
    # lines stamped after the newest erased line: a new conversation of that name
    ("ahead_then_new_lines", AHEAD, [line("alice", "hi again", LATER)], False, None, ["hi again"]),
    # lines with no created_at are written now: new, even though now is before the erased stamps
    ("ahead_then_undated_lines", AHEAD, [line("alice", "hi again", None)], False, None, ["hi again"]),
    # the operator's explicit word restores the old export whole
    ("ahead_restore_erased", AHEAD, None, True, None, [SECRET, "more"]),
    # stamps the server's clock agrees with: a line after the erasure is new, as before
    ("past_then_new_lines", PAST, [line("alice", "hi again", BETWEEN)], False, None, ["hi again"]),
    # and the old export is refused, as before
    ("past_old_export", PAST, None, False, PAST, []),
]


@pytest.mark.parametrize(("stamp", "lines", "restore", "oldest", "alice"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_import_after_erasure(tmp_path: Path, engine_config: Config, embedder: FastEmbedder, stamp: float,
                              lines: list[dict[str, Any]] | None, restore: bool, oldest: float | None,
                              alice: list[str]) -> None:
    old = stored_then_erased(engine_config, embedder, tmp_path, stamp)
    before = contents(engine_config, embedder)
    assert before == {"bob": ["hello"]}
    f = old if lines is None else write_jsonl(tmp_path / "again.jsonl", lines)
    with opened_memory(engine_config, embedder) as mem:
        if oldest is not None:
            with pytest.raises(ImportOfErased) as exc:
                import_file(mem, f, restore_erased=restore)
            assert (exc.value.conversation_id, exc.value.oldest) == ("alice", oldest)
            said = str(exc.value)
            assert "'alice' was erased on request at" in said and "nothing was written" in said
        else:
            import_file(mem, f, restore_erased=restore)
    after = contents(engine_config, embedder)
    if oldest is not None:
        assert after == before  # nothing of the file written
    else:
        assert after["alice"] == alice


# (id, alice's stamps when erased, whether the refusal names her newest line's time)
RECORD_CASES = [
    # stamped ahead of the erasure: the record is what refuses, so the refusal names it
    ("ahead", AHEAD, True),
    # stamped before it: the erasure's own time, as before
    ("past", PAST, False),
]


@pytest.mark.parametrize(("stamp", "named"), [c[1:] for c in RECORD_CASES], ids=[c[0] for c in RECORD_CASES])
def test_tombstone_records_newest_message(tmp_path: Path, engine_config: Config, embedder: FastEmbedder,
                                          stamp: float, named: bool) -> None:
    old = stored_then_erased(engine_config, embedder, tmp_path, stamp)
    with opened_memory(engine_config, embedder) as mem:
        erasure = mem.cold.erasures_of("default", ["alice", "bob"])
        assert list(erasure) == ["alice"] and erasure["alice"].newest == stamp  # bob was never erased
        assert erasure["alice"].until == max(stamp, erasure["alice"].at)
        with pytest.raises(ImportOfErased) as exc:
            import_file(mem, old)
    assert (exc.value.erased_at, exc.value.newest) == (erasure["alice"].at, stamp)
    assert ("stamped at or before" in str(exc.value)) is named
    assert ("created before then" in str(exc.value)) is not named


# (id, the file imported after an erasure whose tombstone records no newest message, refused?)
OLD_TOMBSTONE_CASES = [
    # the erasure time alone, as before the record: a line stamped after it imports
    ("ahead_line_imports", [line("alice", SECRET, AHEAD)], False),
    # a line stamped before the erasure is still refused
    ("past_line_refused", [line("alice", SECRET, PAST)], True),
]


@pytest.mark.parametrize(("lines", "refused"), [c[1:] for c in OLD_TOMBSTONE_CASES],
                         ids=[c[0] for c in OLD_TOMBSTONE_CASES])
def test_tombstone_without_record_keeps_erasure_time(tmp_path: Path, engine_config: Config,
                                                     embedder: FastEmbedder, lines: list[dict[str, Any]],
                                                     refused: bool) -> None:
    stored_then_erased(engine_config, embedder, tmp_path, AHEAD)
    # as a tombstone written before the migration (or by an older tiermem) reads
    sql_behind(engine_config, "UPDATE tombstones SET newest_message_at = NULL", ())
    f = write_jsonl(tmp_path / "again.jsonl", lines)
    with opened_memory(engine_config, embedder) as mem:
        assert mem.cold.erasures_of("default", ["alice"])["alice"].newest is None
        if refused:
            with pytest.raises(ImportOfErased) as exc:
                import_file(mem, f)
            assert exc.value.newest is None and "created before then" in str(exc.value)
        else:
            import_file(mem, f)
    assert ("alice" in contents(engine_config, embedder)) is not refused


@pytest.mark.parametrize("to_postgres", MIGRATION_DIRECTIONS)
def test_migrate_store_carries_the_record(tmp_path: Path, pg_url: str, counter: BpeTokenCounter,
                                          to_postgres: bool) -> None:
    def fill(store: Any) -> None:
        store.append("alice", Message(role="user", content=SECRET, created_at=AHEAD))
        store.delete_conversation(store.key_of("default", "alice"))

    src, dst = copied_sides(tmp_path, pg_url, counter, to_postgres, fill)
    with opened(src, counter) as store:
        want = store.erasures_of("default", ["alice"])
    with opened(dst, counter) as store:
        got = store.erasures_of("default", ["alice"])
    assert got == want and got["alice"].newest == AHEAD  # before: no such column to carry
