"""A `migrate-store` run's unfinished-copy mark is its source's own, and only a copy into
an empty target refuses the store's open.

Invariants (tiers.migrate_store, "Marked until verified"):
- each run writes and clears the mark of its own source only (meta
  `migration_unfinished:<source db_uuid>`): a verified merge from A leaves the mark of B's
  cut copy, and a rerun with nothing to copy leaves another source's mark (before, one
  mark per store: any run cleared it, and the store opened silently missing part of B);
- a run into a store holding another source's mark is refused before writing anything
  (OtherCopyUnfinished: finish that copy first), so that source's rerun can still resume
  and clear it (before, the other run took the target's copy-of marker and the rerun was
  refused);
- a mark of a run into a target with no conversations of its own refuses the open
  (MigrationUnfinished): a new store, one of tombstones only, or one holding only this
  source's earlier copy (a cut rerun carrying its erasures; before, that copy counted as
  the target's own data and the store opened); a merge (`--into-non-empty`) into a
  store with conversations of its own leaves them whole, so the
  store opens during and after the run, warning, and `stats()` lists the mark
  (`unfinished_copies`) until a rerun of that merge verifies it (before, a restart during
  a merge into a live store, or after one failed, was refused);
- `accept_unfinished` clears every source's mark and says which;
- `--accept-unfinished` on a --to that holds no store says so (not "nothing to copy").

Real SQLite targets, sources on the real embedded PostgreSQL (tests/pg_server.py), runs
cut mid-copy by the run's own fault hook (the SIGKILL is test_migrate_store_unfinished's)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from hash_embedder import HashEmbedder
from pg_server import Where, fresh_schema, migrate, migration_spec, opened

from tiermem import Config, Memory
from tiermem.errors import MigrationUnfinished, OtherCopyUnfinished, ValidationError
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

TOKENS = BpeTokenCounter()
NS = "default"
STOP_AT = 2  # a cut run commits this many of its source's conversations
LEGACY_KEY = "migration_unfinished"  # the one-per-store mark a tiermem of 2026-12-07 wrote


class _Cut(Exception):
    """Raised by the run's fault hook: a run that fails mid-copy."""


def _source(pg_url: str, prefix: str, n: int) -> tuple[Where, list[str]]:
    """A filled PostgreSQL source of `n` conversations named prefix0..; (where, their keys)."""
    where: Where = ("postgres", f"{pg_url}#{fresh_schema()}")
    with opened(where, TOKENS) as store:
        for i in range(n):
            store.append_batch(f"{prefix}{i}", [Message(role="user", content=f"{prefix} number {i}")], namespace=NS)
        keys = [store.key_of(NS, f"{prefix}{i}") for i in range(n)]
    return where, keys


def _cut_at(key: str) -> Any:
    def fault(step: str) -> None:
        if step == key:  # in that conversation's transaction: rolled back
            raise _Cut(step)
    return fault


def _memory(data: Path) -> Memory:
    return Memory(Config(data_dir=data), embedder=HashEmbedder(), hot=False, background_indexing=False)


def _production(tmp_path: Path) -> tuple[Path, Where]:
    """A live store with data of its own (a SQLite data dir) and its Where."""
    data = tmp_path / "prod"
    with _memory(data) as mem:
        mem.append("prod", {"role": "user", "content": "production data"})
    return data, ("sqlite", str(data / "tiermem.db"))


def _unfinished_sources(data: Path) -> list[str]:
    with _memory(data) as mem:
        return [m["source"] for m in mem.stats()["unfinished_copies"]]


def _label(where: Where) -> str:
    """How migrate-store names a side (a URL without its password)."""
    from tiermem.tiers.migrate_store import store_label

    return store_label(*migration_spec(where))


def test_a_merge_from_another_source_is_refused_until_a_cut_first_copy_is_finished(tmp_path: Path,
                                                                                   pg_url: str) -> None:
    # B's first copy into an empty target, cut after STOP_AT of 5; A's merge is refused
    # before writing anything (before 2026-12-07's per-source marks: A's verified commit
    # deleted B's mark and the store opened silently holding b0, b1 of b0..b4; before
    # this refusal: A's copy took the target's copy-of marker, so B's rerun was refused
    # and B's mark could be cleared by --accept-unfinished only)
    (b, bkeys), (a, _) = _source(pg_url, "b", 5), _source(pg_url, "a", 2)
    data = tmp_path / "target"
    target: Where = ("sqlite", str(data / "tiermem.db"))
    with pytest.raises(_Cut):
        migrate(b, target, TOKENS, fault=_cut_at(bkeys[STOP_AT]))
    with pytest.raises(OtherCopyUnfinished) as blocked:
        migrate(a, target, TOKENS, into_non_empty=True)
    assert blocked.value.source == _label(b)
    assert f"finish the copy from {_label(b)} first" in str(blocked.value)
    with pytest.raises(MigrationUnfinished) as refused:
        _memory(data)
    assert refused.value.source == _label(b)
    # B's rerun resumes and verifies; then A merges
    assert migrate(b, target, TOKENS).copied == 5 - STOP_AT
    assert migrate(a, target, TOKENS, into_non_empty=True).copied == 2
    with _memory(data) as mem:
        assert sorted(mem.conversations(namespace=NS)) == ["a0", "a1", "b0", "b1", "b2", "b3", "b4"]
        assert mem.stats()["unfinished_copies"] == []


def test_a_run_into_a_store_with_another_sources_mark_writes_nothing_and_leaves_it(tmp_path: Path,
                                                                                   pg_url: str) -> None:
    # a verified copy from A, and a mark of another run (the 2026-12-07 key, naming
    # another source); A's rerun, even with nothing to copy, must not delete what it did
    # not write (before 2026-12-07's per-source marks: it did, and the store opened). The
    # target names A as its copy, so A's run takes no one's copy-of marker: it goes on
    # (refused, two marks left by two runs at once could neither be finished); another
    # source's run is refused, writing nothing
    (a, _), (c2, _) = _source(pg_url, "a", 2), _source(pg_url, "c", 1)
    data = tmp_path / "target"
    target: Where = ("sqlite", str(data / "tiermem.db"))
    migrate(a, target, TOKENS)
    with opened(target, TOKENS) as store, store.transaction() as c:
        c.execute("INSERT INTO meta(key, value) VALUES (?, ?)",
                  (LEGACY_KEY, '{"source": "elsewhere", "source_uuid": "other", "started_at": 1.0}'))
    assert migrate(a, target, TOKENS).copied == 0
    with pytest.raises(OtherCopyUnfinished, match="unfinished copy from elsewhere"):
        migrate(c2, target, TOKENS, into_non_empty=True)
    with pytest.raises(MigrationUnfinished, match="unfinished copy of elsewhere"):
        _memory(data)


def test_the_source_the_target_names_finishes_beside_another_sources_mark(tmp_path: Path,
                                                                          pg_url: str) -> None:
    # A's copy cut, and a mark of another source beside it (two runs that passed the
    # check at once): A's rerun resumes and clears A's mark, the other's stays (before:
    # both reruns were refused OtherCopyUnfinished, each naming the other)
    a, akeys = _source(pg_url, "a", 4)
    data = tmp_path / "target"
    target: Where = ("sqlite", str(data / "tiermem.db"))
    with pytest.raises(_Cut):
        migrate(a, target, TOKENS, fault=_cut_at(akeys[STOP_AT]))
    with opened(target, TOKENS) as store, store.transaction() as c:
        c.execute("INSERT INTO meta(key, value) VALUES (?, ?)",
                  ("migration_unfinished:other", '{"source": "elsewhere", "source_uuid": "other", '
                   '"started_at": 1.0, "target_was_empty": true}'))
    assert migrate(a, target, TOKENS).copied == 4 - STOP_AT
    with pytest.raises(MigrationUnfinished, match="unfinished copy of elsewhere"):
        _memory(data)


def test_a_cut_merge_into_a_live_store_opens_warning_and_stats_name_it(tmp_path: Path, pg_url: str,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    # a merge into a production store with data of its own: a restart during the run,
    # and after the run failed, opens it (before: MigrationUnfinished both times)
    data, target = _production(tmp_path)
    b, bkeys = _source(pg_url, "b", 4)
    during: dict[str, list[str]] = {}

    def progress(done: int, total: int) -> None:
        if done == 1:  # a service restarting mid-merge
            with _memory(data) as mem:
                during["listed"] = sorted(mem.conversations(namespace=NS))

    with pytest.raises(_Cut):
        migrate(b, target, TOKENS, into_non_empty=True, progress=progress, fault=_cut_at(bkeys[STOP_AT]))
    assert during["listed"] == ["b0", "prod"]
    caplog.clear()  # the open mid-run warned too
    with caplog.at_level(logging.WARNING, logger="tiermem"), _memory(data) as mem:
        assert sorted(mem.conversations(namespace=NS)) == ["b0", "b1", "prod"]
        assert [m["source"] for m in mem.stats()["unfinished_copies"]] == [_label(b)]
        assert mem.stats()["unfinished_copies"][0]["refuses_open"] is False
    warned = [r.getMessage() for r in caplog.records if "unfinished merge" in r.getMessage()]
    assert len(warned) == 1 and _label(b) in warned[0] and "--accept-unfinished" in warned[0]
    # the merge's rerun resumes, verifies and clears its mark
    assert migrate(b, target, TOKENS, into_non_empty=True).copied == 4 - STOP_AT
    assert _unfinished_sources(data) == []


def test_accept_unfinished_clears_every_sources_mark_and_names_each(tmp_path: Path, pg_url: str) -> None:
    from tiermem.tiers.migrate_store import accept_unfinished

    data, target = _production(tmp_path)
    b, bkeys = _source(pg_url, "b", 3)
    with pytest.raises(_Cut):  # a merge cut, leaving its own mark
        migrate(b, target, TOKENS, into_non_empty=True, fault=_cut_at(bkeys[1]))
    # and a second source's (two runs begun together both pass the preflight)
    with opened(target, TOKENS) as store, store.transaction() as c:
        c.execute("INSERT INTO meta(key, value) VALUES (?, ?)",
                  (LEGACY_KEY + ":c-uuid", '{"source": "c", "source_uuid": "c-uuid", "started_at": 2.0, '
                   '"target_was_empty": false}'))
    c_label = "c"
    assert sorted(_unfinished_sources(data)) == sorted([_label(b), c_label])
    named, was = accept_unfinished(target[1], tokens=TOKENS)
    assert named == target[1]
    assert sorted(m.source for m in was) == sorted([_label(b), c_label])
    assert _unfinished_sources(data) == []
    assert accept_unfinished(target[1], tokens=TOKENS)[1] == []


@pytest.mark.parametrize("make", [
    "missing",  # a --to that does not exist: no store there, nothing created
    "empty",  # an empty file: SQLite would take it for an empty store
])
def test_accept_unfinished_on_no_store_says_there_is_none(tmp_path: Path, make: str) -> None:
    from tiermem.tiers.migrate_store import accept_unfinished

    path = tmp_path / "nowhere"
    if make == "empty":
        path.mkdir()
        (path / "tiermem.db").touch()
    with pytest.raises(ValidationError, match="no store there and no unfinished copy to accept") as refused:
        accept_unfinished(path, tokens=TOKENS)
    assert "nothing to copy" not in str(refused.value)
    assert make == "empty" or not path.exists()


@pytest.mark.parametrize("merged", [
    False,  # the target is the source's copy only: a cut rerun leaves it partial, refused
    True,  # the copy was merged into a store with data of its own: that data is whole, it opens
])
def test_a_cut_rerun_of_the_copy_the_target_holds_refuses_the_open_unless_it_has_its_own_data(
        tmp_path: Path, pg_url: str, merged: bool) -> None:
    # a verified copy of S; S erases a0 and grows by a3, a4; the rerun that carries the
    # erasure and copies them is cut at a4. The target's own data excludes S's earlier
    # copy (before: that copy made the rerun's target "not empty", so its mark warned
    # only and the store opened without a4, as it would have served a conversation the
    # source erased had the cut come between two erasures)
    s, skeys = _source(pg_url, "a", 3)
    if merged:
        data, target = _production(tmp_path)
    else:
        data = tmp_path / "target"
        target = ("sqlite", str(data / "tiermem.db"))
    assert migrate(s, target, TOKENS, into_non_empty=merged).copied == 3
    with opened(s, TOKENS) as store:
        store.delete_conversation(skeys[0])
        for name in ("a3", "a4"):
            store.append_batch(name, [Message(role="user", content=name)], namespace=NS)
        cut = store.key_of(NS, "a4")
    with pytest.raises(_Cut):
        migrate(s, target, TOKENS, fault=_cut_at(cut))
    if merged:
        assert _unfinished_sources(data) == [_label(s)]
    else:
        with pytest.raises(MigrationUnfinished) as refused:
            _memory(data)
        assert refused.value.source == _label(s)
    # the rerun finishes it and clears the mark
    assert migrate(s, target, TOKENS).copied == 1
    with _memory(data) as mem:
        assert sorted(mem.conversations(namespace=NS)) == ["a1", "a2", "a3", "a4"] + (["prod"] if merged else [])
        assert mem.stats()["unfinished_copies"] == []


@pytest.mark.parametrize("kind", [
    "empty",  # a new store: refused (so before too)
    "tombstones only",  # everything it held erased: no data of its own to keep whole (before: it opened)
])
def test_a_cut_copy_into_a_store_without_conversations_of_its_own_refuses_the_open(tmp_path: Path, pg_url: str,
                                                                                   kind: str) -> None:
    b, bkeys = _source(pg_url, "b", 4)
    data = tmp_path / "target"
    with _memory(data) as mem:
        if kind == "tombstones only":
            mem.append("old", {"role": "user", "content": "erased before the copy"})
            mem.delete_conversation("old")
    with pytest.raises(_Cut):
        migrate(b, ("sqlite", str(data / "tiermem.db")), TOKENS, into_non_empty=kind != "empty",
                fault=_cut_at(bkeys[STOP_AT]))
    with pytest.raises(MigrationUnfinished) as refused:
        _memory(data)
    assert refused.value.source == _label(b)
