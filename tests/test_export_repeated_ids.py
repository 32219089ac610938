"""`tiermem export` of a conversation named twice writes it once. It wrote each name as
often as it was given (`tiermem export a b a`), and `tiermem import` reads lines of one
id as one conversation in file order: the export imported as a conversation holding
every message twice, not the one exported (a bug hunt, 2026-12-06)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import tm
from convo_fixtures import support_lines, write_jsonl

from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


# (id, the conversations named on the command line)
NAMED: list[tuple[str, list[str]]] = [
    ("twice", ["a", "a"]),  # the same id back to back
    ("around_another", ["a", "b", "a"]),  # the repeat after another conversation
]


@pytest.mark.parametrize("names", [n for _, n in NAMED], ids=[i for i, _ in NAMED])
def test_a_conversation_named_twice_is_exported_once(tmp_path: Path, embedder: FastEmbedder,
                                                    names: list[str]) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", support_lines("a") + support_lines("b"))
    assert tm(tmp_path, embedder, "", "import", str(src)).exit_code == 0
    one = tm(tmp_path, embedder, "", "export", "a")
    r = tm(tmp_path, embedder, "", "export", *names)
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x for x in lines if x["conversation_id"] == "a"] == [json.loads(x) for x in one.stdout.splitlines()]
    # the first time each is named sets the order
    assert list(dict.fromkeys(x["conversation_id"] for x in lines)) == list(dict.fromkeys(names))
