"""`tiermem export`: conversations out as JSONL in the format `tiermem import` reads, so
export then import gives the same histories, and a re-import appends nothing. There was
no export command before (a usage error)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from convo_fixtures import support_lines, write_jsonl

from tiermem.cli import CliState, cli
from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


def tm(embedder: FastEmbedder, data: Path, *args: str) -> Any:
    r = CliRunner().invoke(cli, ["--data-dir", str(data), *args], obj=CliState(embedder=embedder),
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


def histories(data: Path, embedder: FastEmbedder) -> dict[str, list[tuple[Any, ...]]]:
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        return {c: [(m.body, m.session_id, m.metadata, m.created_at) for m in mem.history(c, namespace="default")]
                for c in mem.conversations("default")}


def test_export_then_import_gives_the_same_histories(tmp_path: Path, embedder: FastEmbedder) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", support_lines("a") + support_lines("b"))
    first, second = tmp_path / "d1", tmp_path / "d2"
    tm(embedder, first, "import", str(src))
    out = tmp_path / "out.jsonl"
    tm(embedder, first, "export", "-o", str(out))
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert {x["conversation_id"] for x in lines} == {"a", "b"}
    assert any(x["message"].get("tool_calls") for x in lines)  # the tool call survives as it was stored
    tm(embedder, second, "import", str(out))
    want = histories(first, embedder)
    assert histories(second, embedder) == want and sum(len(v) for v in want.values()) == len(lines)
    again = json.loads(tm(embedder, first, "import", str(out), "--json").stdout)
    assert (again["appended"], again["already_present"]) == (0, len(lines))  # idempotent by content


def test_export_one_conversation_to_stdout(tmp_path: Path, embedder: FastEmbedder) -> None:
    data = tmp_path / "d"
    tm(embedder, data, "import", str(write_jsonl(tmp_path / "in.jsonl", support_lines("a") + support_lines("b"))))
    r = tm(embedder, data, "export", "b")
    assert {json.loads(x)["conversation_id"] for x in r.stdout.splitlines()} == {"b"}
    bad = CliRunner().invoke(cli, ["--data-dir", str(data), "export", "nope"], obj=CliState(embedder=embedder))
    assert bad.exit_code == 1 and "nope" in bad.stderr
