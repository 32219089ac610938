"""`tiermem migrate-store` refuses a `--from` that holds no log and a `--to` file that is
not a database, naming the option, before anything is created or chmodded. Before (an
audit, 2026-12-05): a mistyped `--from` path was opened as a new SQLite log, so a typo
left an empty database (or a data dir holding one) behind, and with a PostgreSQL target
the run "verified 0 conversations", marked the schema as migrated and made the real run
after it refuse; a `--to` naming a text file was chmodded 0600, then refused with
"DatabaseError: file is not a database". Real SQLite files, a real PostgreSQL."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.cli import cli
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.migrate_store import migrate_store
from tiermem.tiers.tokens import BpeTokenCounter

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TOKENS = BpeTokenCounter()
USER_MODE = 0o644  # a file the user made: a refusal must leave its mode as it was


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    """A data dir holding one conversation of three messages."""
    data = tmp_path_factory.mktemp("src") / "data"
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": f"real data {i}"} for i in range(3)])
    return data


def tree(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under `root` with its mode and content: what a refusal must not change."""
    return {str(p.relative_to(root)): (stat.S_IMODE(p.stat().st_mode), p.read_bytes() if p.is_file() else b"")
            for p in sorted(root.rglob("*"))}


def user_file(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    os.chmod(path, USER_MODE)
    return path


# (id, makes the --from path under tmp_path, words of the refusal)
BAD_SOURCES: list[tuple[str, Callable[[Path], Path], str]] = [
    # a mistyped database file name
    ("missing_file", lambda d: d / "tiermme.db", "tiermme.db does not exist"),
    # a mistyped data dir (no suffix: a data dir, whose tiermem.db is the log)
    ("missing_dir", lambda d: d / "data-typo", "data-typo/tiermem.db does not exist"),
    # a directory that exists but holds no tiermem.db
    ("dir_without_log", lambda d: (d / "empty-dir").mkdir() or d / "empty-dir", "tiermem.db does not exist"),
    # an empty file: SQLite would take it for an empty database and "copy" nothing
    ("empty_file", lambda d: user_file(d / "zero.db", b""), "is empty"),
    # a text file
    ("text_file", lambda d: user_file(d / "notes.txt", b"my notes\n"), "is not a SQLite database"),
]


@pytest.mark.parametrize(("make", "words"), [c[1:] for c in BAD_SOURCES], ids=[c[0] for c in BAD_SOURCES])
def test_a_source_without_a_log_is_refused_and_nothing_is_created(tmp_path: Path, make: Callable[[Path], Path],
                                                                   words: str) -> None:
    bad = make(tmp_path)
    before = tree(tmp_path)
    with pytest.raises(ValidationError, match=f"^--from: .*{words}"):
        migrate_store(bad, tmp_path / "target.db", tokens=TOKENS)
    assert tree(tmp_path) == before  # no source created, no target, no mode changed


@pytest.mark.parametrize(("make", "words"), [c[1:] for c in BAD_SOURCES], ids=[c[0] for c in BAD_SOURCES])
def test_cli_names_from_and_the_postgres_target_is_untouched(tmp_path: Path, pg_url: str,
                                                             make: Callable[[Path], Path], words: str) -> None:
    bad = make(tmp_path)
    schema = fresh_schema()
    r = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "unused"), "migrate-store", "--from", str(bad),
                                 "--to", pg_url, "--schema", schema])
    assert r.exit_code == 1 and r.output.startswith("error: --from: ") and words in r.output, r.output
    with psycopg.connect(pg_url, autocommit=True) as c:  # not created, so not marked as migrated
        assert c.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None


def test_the_real_run_after_a_typo_copies_everything(tmp_path: Path, source: Path, pg_url: str) -> None:
    schema = fresh_schema()
    base = ["--data-dir", str(source), "migrate-store", "--to", pg_url, "--schema", schema]
    typo = CliRunner().invoke(cli, [*base, "--from", str(tmp_path / "data-typo")])
    assert typo.exit_code == 1 and "--from" in typo.output, typo.output
    real = CliRunner().invoke(cli, base)
    assert real.exit_code == 0 and "1 conversation(s), 3 message(s)" in real.output, real.output


def test_a_postgres_source_schema_without_a_log_is_refused(tmp_path: Path, pg_url: str) -> None:
    schema = fresh_schema()
    with pytest.raises(ValidationError, match=f"^--from: .*schema {schema} holds no tiermem log"):
        migrate_store(pg_url, tmp_path / "back", tokens=TOKENS, source_schema=schema)
    with psycopg.connect(pg_url, autocommit=True) as c:
        assert c.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None
    assert not (tmp_path / "back").exists()


# (id, the --to file's name, its content)
BAD_TARGETS = [
    # a text file named like a database
    ("text_db_name", "notes.db", b"my notes\n"),
    # a text file without a suffix (once taken for a data dir to create)
    ("text_no_suffix", "notes", b"my notes\n"),
    # shorter than SQLite's 16-byte header
    ("short_file", "tiny.db", b"SQL"),
]


@pytest.mark.parametrize(("name", "content"), [c[1:] for c in BAD_TARGETS], ids=[c[0] for c in BAD_TARGETS])
def test_a_target_file_that_is_not_a_database_is_refused_untouched(tmp_path: Path, source: Path, pg_url: str,
                                                                    name: str, content: bytes) -> None:
    schema = fresh_schema()
    migrate_store(source, pg_url, tokens=TOKENS, target_schema=schema)  # a PostgreSQL source to copy back
    where = tmp_path / "t"
    where.mkdir()
    target = user_file(where / name, content)
    before = tree(where)
    with pytest.raises(ValidationError, match=f"^--to: .*{name} is not a SQLite database"):
        migrate_store(pg_url, target, tokens=TOKENS, source_schema=schema)
    assert tree(where) == before  # mode 0644 and content as they were, no sidecar
    r = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "unused"), "migrate-store", "--from", pg_url,
                                 "--from-schema", schema, "--to", str(target)])
    assert r.exit_code == 1 and r.output.startswith("error: --to: ") and "Traceback" not in r.output, r.output
    assert tree(where) == before
