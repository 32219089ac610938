"""`tiermem export` of a store whose unreadable row is hidden (a later `tiermem.clear`, or
a retraction naming it) still fails without --skip-unreadable, and now says the row is
hidden and still part of the history. No context shows such a row, but history() does,
and an export is the store's log (README "The file"; export_lines: "import of them gives
the same histories"), so a backup without it is not one; --skip-unreadable then loses
nothing a context shows. Before, the message named the row as for any other (a review,
2026-12-06: the row before a clear looked like a loss of something visible). A real
SQLite file; the old row written behind tiermem's back (test_export_unreadable_row)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from test_export_unreadable_row import old_store, retract, texts, user

from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

CLEAR = {"type": "tiermem.clear"}

# (id, the conversation as appended, the positions made unreadable afterwards,
#  the warning's words on what hides them, the refusal's count of hidden rows)
STORES: list[tuple[str, list[dict[str, Any]], list[int], str, str]] = [
    # the reviewer's store: the unreadable row, then a clear
    ("before_a_clear", [user("u0"), user("old row"), user("u2"), CLEAR, user("after")], [1],
     "(1 before the clear at position 3)", "(all"),
    # the unreadable row retracted (its retraction is left out too)
    ("retracted", [user("u0"), user("old row"), retract(1), user("u3")], [1], "(1 retracted)", "(all"),
    # one row before a clear, one retracted after it, one shown: only the first two are hidden
    ("mixed", [user("old a"), CLEAR, user("old b"), retract(2), user("old c"), user("u5")], [0, 2, 4],
     "(0 before the clear at position 1, 2 retracted)", "(2"),
]


@pytest.mark.parametrize(("rows", "unreadable", "how", "count"), [s[1:] for s in STORES],
                         ids=[s[0] for s in STORES])
def test_a_hidden_unreadable_row_is_named_hidden_and_still_refused(
        tmp_path: Path, embedder: FastEmbedder, rows: list[dict[str, Any]], unreadable: list[int],
        how: str, count: str) -> None:
    old_store(tmp_path / "data", embedder, rows, unreadable)
    out = tmp_path / "e.jsonl"
    out.write_text("the backup before\n")
    r = tm(tmp_path, embedder, "", "export", "-o", str(out))
    assert r.exit_code == 1, r.output  # refused: history() still has the row
    assert f"of them, hidden from every context {how} but still part of the history" in r.stderr, r.stderr
    assert f"{len(unreadable)} stored row(s) cannot be read {count} hidden by a clear or a retraction, " \
           "still part of the history)" in r.stderr, r.stderr
    assert out.read_text() == "the backup before\n"  # nothing written


@pytest.mark.parametrize("rows", [s[1] for s in STORES[:2]], ids=[s[0] for s in STORES[:2]])
def test_skipping_a_hidden_row_changes_no_context(tmp_path: Path, embedder: FastEmbedder,
                                                 rows: list[dict[str, Any]]) -> None:
    # every unreadable row hidden: the import's context is the store's, only history lacks the row
    old_store(tmp_path / "data", embedder, rows, [1])
    history, context = texts(tmp_path / "data", embedder)
    out = tmp_path / "e.jsonl"
    r = tm(tmp_path, embedder, "", "export", "--skip-unreadable", "-o", str(out))
    assert r.exit_code == 0 and "still part of the history" in r.stderr, r.output
    assert CLEAR not in rows or CLEAR in [json.loads(x)["message"] for x in out.read_text().splitlines()]
    moved = tmp_path / "moved"
    assert tm(moved, embedder, "", "import", str(out)).exit_code == 0
    assert texts(moved / "data", embedder) == (history, context)


def test_a_shown_unreadable_row_is_not_called_hidden(tmp_path: Path, embedder: FastEmbedder) -> None:
    # a clear before the row hides nothing after it: the message is as before
    old_store(tmp_path / "data", embedder, [user("u0"), CLEAR, user("old row"), user("u3")], [2])
    r = tm(tmp_path, embedder, "", "export")
    assert r.exit_code == 1 and "stored row(s) at position(s) 2 cannot be read" in r.stderr, r.output
    assert "hidden" not in r.stderr, r.stderr
