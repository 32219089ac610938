"""`tiermem import` of an older export holding an assistant message whose tool calls repeat
an id (`[c1, c1]`: append refuses it since d95a9e0, a row stored before is read as stored
and an export before 91b49be wrote it) says what to do about the line. The error named the
field and the rule only, and `--skip-bad` skipped the line without saying that its
results then stay without their call. Kept refused, not renamed: rows are stored as given
(a re-import into the store the file came from must find the stored row present), and
which result answers which call of one id is only the file's order. Real SQLite; the
lines as that export wrote them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from cold_helpers import rewrite_stored
from convo_fixtures import write_jsonl

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

CONV = "c"
BUDGET = 4000  # tokens: room for every message, so a context is all that it sends
ASK = {"role": "user", "content": "Compare both fares."}
THANKS = {"role": "user", "content": "Thanks."}
FIX = "the tool_call_id of the result that answers it"


def call(cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "fare", "arguments": "{}"}}


def calls(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [call(i) for i in ids]}


def result(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


# (id, the messages of the old export, the field named, the id it repeats, the second result)
OLD_EXPORTS: list[tuple[str, list[dict[str, Any]], str, str]] = [
    # the reported form: two calls of one id, answered in order
    ("pair", [ASK, calls("c1", "c1"), result("c1", "120 EUR"), result("c1", "95 EUR"), THANKS],
     "tool_calls[1].id", "'c1' is the id of tool_calls[0] too"),
    # the repeat after another call: the third call named, the first it repeats
    ("after_another", [ASK, calls("c1", "c2", "c1"), result("c1", "120 EUR"), result("c2", "80 EUR"),
                       result("c1", "95 EUR"), THANKS],
     "tool_calls[2].id", "'c1' is the id of tool_calls[0] too"),
]


def lines(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"conversation_id": CONV, "message": m} for m in messages]


def sent(data: Path, embedder: FastEmbedder) -> list[dict[str, Any]]:
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        return mem.context(CONV, "fares?", BUDGET).messages


@pytest.mark.parametrize(("messages", "field", "rule"), [o[1:] for o in OLD_EXPORTS], ids=[o[0] for o in OLD_EXPORTS])
def test_the_line_is_refused_saying_what_to_do(tmp_path: Path, embedder: FastEmbedder,
                                               messages: list[dict[str, Any]], field: str, rule: str) -> None:
    f = write_jsonl(tmp_path / "old.jsonl", lines(messages))
    r = tm(tmp_path, embedder, "", "import", str(f))
    assert r.exit_code == 1, r.output
    assert f"line 2: {field}: {rule}" in r.stderr, r.stderr
    index = field.split("[")[1].split("]")[0]
    assert f"give tool_calls[{index}] an id no other call of the message has and put it in {FIX}" in r.stderr
    assert "(the second result naming 'c1' after this message)" in r.stderr, r.stderr
    assert "skipping the line leaves its results without their call (a context sends their text among " \
           "retrieved turns, not as tool results)" in r.stderr, r.stderr
    assert r.stderr.rstrip().endswith("fix them or pass --skip-bad to skip them"), r.stderr
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        assert mem.conversations("default") == []  # nothing written


def test_a_conversation_object_names_the_message(tmp_path: Path, embedder: FastEmbedder) -> None:
    _name, messages, field, rule = OLD_EXPORTS[0]
    f = write_jsonl(tmp_path / "old.jsonl", [{"conversation_id": CONV, "messages": messages}])
    r = tm(tmp_path, embedder, "", "import", str(f))
    assert r.exit_code == 1, r.output
    assert f"line 1: messages[1].{field}: {rule}" in r.stderr and FIX in r.stderr, r.stderr


def test_skip_bad_keeps_the_results_as_text_only(tmp_path: Path, embedder: FastEmbedder) -> None:
    # what the message says of skipping holds: no call, no tool result, the results' text retrieved
    _name, messages, _field, _rule = OLD_EXPORTS[0]
    f = write_jsonl(tmp_path / "old.jsonl", lines(messages))
    r = tm(tmp_path, embedder, "", "import", str(f), "--skip-bad", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["appended"] == 4 and [b["line"] for b in out["bad_lines"]] == [2]
    assert FIX in out["bad_lines"][0]["problem"]
    context = sent(tmp_path / "data", embedder)
    assert not any(m.get("tool_calls") or m["role"] == "tool" for m in context), context
    assert [context[0], context[-1]] == [ASK, THANKS] and "95 EUR" in json.dumps(context)


def test_the_line_fixed_as_said_imports_whole(tmp_path: Path, embedder: FastEmbedder) -> None:
    # the later call renamed, and the second result naming c1 after it
    fixed = [ASK, calls("c1", "c1_2"), result("c1", "120 EUR"), result("c1_2", "95 EUR"), THANKS]
    r = tm(tmp_path, embedder, "", "import", str(write_jsonl(tmp_path / "fixed.jsonl", lines(fixed))))
    assert r.exit_code == 0, r.output
    context = sent(tmp_path / "data", embedder)
    assert [c["id"] for m in context for c in m.get("tool_calls", [])] == ["c1", "c1_2"]
    assert [(m["tool_call_id"], m["content"]) for m in context if m["role"] == "tool"] == [
        ("c1", "120 EUR"), ("c1_2", "95 EUR")]


def test_an_export_of_a_store_today_names_the_row_without_the_remedy(tmp_path: Path,
                                                                      embedder: FastEmbedder) -> None:
    # the remedy is for a file's author; the export names what import would refuse (91b49be)
    _name, messages, field, rule = OLD_EXPORTS[0]
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        mem.append_many(CONV, [ASK, calls("c1", "c2"), result("c1", "120 EUR"), result("c2", "95 EUR"), THANKS])
        key = mem.cold.key_of("default", CONV)
        assert key is not None
    rewrite_stored(Config(data_dir=tmp_path / "data").db_path, key, [(1, "body", json.dumps(messages[1]))])
    r = tm(tmp_path, embedder, "", "export")
    assert r.exit_code == 1 and f"(position 1: {field}: {rule}" in r.stderr and FIX not in r.stderr, r.stderr
