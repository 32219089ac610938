"""`tiermem import -` reads standard input (click's convention): `zcat f.jsonl.gz |
tiermem import -`. Before (a bug hunt, 2026-12-06) it looked for a file named `-`. The
input, which cannot be read twice, is copied to a temporary file (the data dir's when
there is one) for the import's two readings, and the copy is removed whatever happens;
bad input on stdin writes nothing, as from a file."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from convo_fixtures import support_lines, tiny_locomo

from tiermem.cli import CliState, cli
from tiermem.evals import conversations
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

# the temporary copies' prefix (read so, as the code before had none and this file still runs there)
SPOOL_PREFIX: str = getattr(conversations, "SPOOL_PREFIX", "tiermem-import-")
JSONL = "".join(json.dumps(x) + "\n" for x in support_lines("a"))
BAD_LINE = len(support_lines("a")) + 1  # a bad line put after the good ones

# (id, what stdin carries, format, messages)
PIPED: list[tuple[str, str, str, int]] = [
    # JSONL, the export's own format
    ("jsonl", JSONL, "conversations", 19),
    # a JSON list of the same lines
    ("json_list", json.dumps(support_lines("a")), "conversations", 19),
    # a LoCoMo file
    ("locomo", json.dumps(tiny_locomo()), "locomo", 4),
]


@pytest.fixture
def spool_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system's temporary directory, for this test alone: what is left in it is seen."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def stdin_import(tmp_path: Path, embedder: FastEmbedder, text: str, *args: str) -> Any:
    from click.testing import CliRunner

    return CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "import", "-", *args],
                              input=text.encode("utf-8"), obj=CliState(embedder=embedder))


def spools(*dirs: Path) -> list[Path]:
    return [p for d in dirs if d.is_dir() for p in d.iterdir() if p.name.startswith(SPOOL_PREFIX)]


@pytest.mark.parametrize(("text", "fmt", "messages"), [p[1:] for p in PIPED], ids=[p[0] for p in PIPED])
def test_dash_reads_standard_input(tmp_path: Path, embedder: FastEmbedder, spool_dir: Path, text: str, fmt: str,
                                   messages: int) -> None:
    r = stdin_import(tmp_path, embedder, text, "--json")
    assert r.exit_code == 0, r.output
    report: dict[str, Any] = json.loads(r.stdout)
    assert (report["format"], report["appended"]) == (fmt, messages)
    assert spools(spool_dir, tmp_path / "data") == []
    # again, now that the data dir exists (the copy goes there): nothing more is appended
    again = stdin_import(tmp_path, embedder, text, "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["already_present"] == messages, again.output
    assert spools(spool_dir, tmp_path / "data") == []


def test_bad_standard_input_writes_nothing_and_is_named(tmp_path: Path, embedder: FastEmbedder,
                                                       spool_dir: Path) -> None:
    text = JSONL + '{"conversation_id": "a", "role": "user"}\n'  # a message without content, last
    r = stdin_import(tmp_path, embedder, text)
    assert r.exit_code == 1 and f"<stdin>: 1 bad line(s), nothing imported (line {BAD_LINE}: " in r.stderr, r.output
    assert json.loads(tm(tmp_path, embedder, "", "export").stdout or "null") is None  # no conversation
    assert spools(spool_dir, tmp_path / "data") == []


def test_skipped_lines_of_standard_input_are_named_by_it(tmp_path: Path, embedder: FastEmbedder,
                                                        spool_dir: Path) -> None:
    r = stdin_import(tmp_path, embedder, JSONL + "not json\n", "--skip-bad")
    assert r.exit_code == 0 and f"skipped <stdin>:{BAD_LINE}: not valid JSON" in r.stderr, r.output


def test_a_file_named_dash_is_read_as_dot_slash_dash(tmp_path: Path, embedder: FastEmbedder) -> None:
    (tmp_path / "-").write_text(JSONL, encoding="utf-8")
    r = tm(tmp_path, embedder, "", "import", str(tmp_path / "-"), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["appended"] == 19, r.output


def test_the_help_says_dash_is_standard_input(tmp_path: Path, embedder: FastEmbedder) -> None:
    r = tm(tmp_path, embedder, "", "import", "--help")
    assert "`-` for standard input" in " ".join(r.stdout.split())
