"""`tiermem import --skip-bad` keeps each retraction on the message it names. A skipped
line wrote nothing and the messages after it moved down one, but a later retraction kept
its position, counted in the file: it hid another message, or was refused as naming one
not written yet (a review, 2026-12-06). Now positions are counted in the file (every
line's messages) and a retraction is renumbered to where its message is written; one
that names a skipped message, or one that cannot be told (after a skipped line of no
known conversation), is skipped too, with the reason. Without --skip-bad a retraction
after a bad line is not reported for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

CONV = "c"
BUDGET = 4000  # tokens: room for every message, so a context is what is not retracted
BAD_ROLE = {"role": "usr", "content": "a line import refuses"}


def line(msg: dict[str, Any], conv: str = CONV) -> str:
    return json.dumps({"conversation_id": conv, "message": msg})


def user(text: str) -> str:
    return line({"role": "user", "content": text})


def retract(position: int) -> str:
    return line({"type": "tiermem.retract", "position": position})


# (id, the file's lines, the context's texts after --skip-bad, words of the skipped lines' reasons)
FILES: list[tuple[str, list[str], list[str], list[str]]] = [
    # a bad message before what a retraction names: renumbered, the same message hidden
    ("bad_message_before", [user("u0"), line(BAD_ROLE), user("keep me"), user("retracted"), retract(3),
                            user("u5")], ["u0", "keep me", "u5"], ["line 2: role"]),
    # the retraction names the skipped message: skipped too, nothing else hidden
    ("names_the_skipped", [user("u0"), line(BAD_ROLE), retract(1), user("u3")], ["u0", "u3"],
     ["line 2: role", "line 3: position: names the message at position 1, which line 2 held"]),
    # a skipped conversation object of two messages (one bad)
    ("bad_object_of_two", [user("u0"), json.dumps({"conversation_id": CONV, "messages": [
        {"role": "user", "content": "fine"}, BAD_ROLE]}), user("keep me"), user("retracted"), retract(4)],
     ["u0", "keep me"], ["line 2: messages[1].role"]),
    # a line that is not JSON: whose messages it held is not known, so a retraction naming a
    # later message is skipped; one naming an earlier message stands
    ("not_json_between", [user("u0"), user("retracted"), "{not json", user("u3"), retract(1), retract(3)],
     ["u0", "u3"], ["line 3: not valid JSON", "line 6: position: 3 cannot be told"]),
    # a bad line of another conversation changes nothing here
    ("other_conversation", [user("u0"), line(BAD_ROLE, "other"), user("retracted"), retract(1), user("u3")],
     ["u0", "u3"], ["line 2: role"]),
]


def context_texts(data: Path, embedder: FastEmbedder) -> list[str]:
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        return [m["content"] for m in mem.context(CONV, "which one?", BUDGET).messages if m["role"] == "user"]


@pytest.mark.parametrize(("lines", "want", "reasons"), [f[1:] for f in FILES], ids=[f[0] for f in FILES])
def test_skip_bad_keeps_what_each_retraction_hides(tmp_path: Path, embedder: FastEmbedder, lines: list[str],
                                                   want: list[str], reasons: list[str]) -> None:
    f = tmp_path / "in.jsonl"
    f.write_text("".join(x + "\n" for x in lines))
    r = tm(tmp_path, embedder, "", "import", "--skip-bad", str(f))
    assert r.exit_code == 0, r.output
    skipped = [x for x in r.stderr.splitlines() if x.startswith("skipped ")]
    assert len(skipped) == len(reasons), r.stderr
    for said, words in zip(skipped, reasons, strict=True):
        assert f"{f}:{words.removeprefix('line ')}" in said, said
    assert context_texts(tmp_path / "data", embedder) == want
    again = tm(tmp_path, embedder, "", "import", "--skip-bad", "--json", str(f))
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["appended"] == 0  # found present


def test_without_skip_bad_only_the_bad_line_is_named(tmp_path: Path, embedder: FastEmbedder) -> None:
    f = tmp_path / "in.jsonl"
    f.write_text("".join(x + "\n" for x in [user("u0"), line(BAD_ROLE), user("u2"), retract(2)]))
    r = tm(tmp_path, embedder, "", "import", str(f))
    assert r.exit_code == 1 and "1 bad line(s), nothing imported (line 2: role" in r.stderr, r.output
