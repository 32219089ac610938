"""`tiermem export`: conversations out as JSONL in the format `tiermem import` reads, so
export then import gives the same histories, and a re-import appends nothing. There was
no export command before (a usage error)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import sdk_corpus as corpus
from click.testing import CliRunner
from convo_fixtures import support_lines, write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


# Every stored shape append accepts, one conversation each, round-tripped through export and
# import (tiers.formats: every chat variant the real openai SDK's objects serialize to, every
# Responses item kind, the control rows, explicit nulls, and the envelope beside a body)
def _shapes() -> dict[str, list[dict[str, Any]]]:
    user = {"role": "user", "content": "Which fare is cheaper?"}
    shapes: dict[str, list[dict[str, Any]]] = {f"chat/{name}": [body] for name, body in corpus.chat_corpus()}
    shapes["chat/conversation"] = corpus.chat_conversation()
    shapes["responses/conversation"] = corpus.responses_conversation()
    for item in corpus.responses_conversation():
        shapes.setdefault(f"responses/{item.get('type', 'easy_message')}", [item])
    shapes.update({
        # the first message model's explicit nulls (test_formats: still appended)
        "chat/explicit_nulls": [{"role": "user", "content": "hi", "name": None, "tool_calls": None,
                                 "tool_call_id": None}],
        # a reasoning item as the provider gives it: no summary written, nulls of a model_dump()
        "responses/reasoning_bare": [user, {"type": "reasoning", "id": "rs_1", "summary": []}],
        "responses/reasoning_dump": [user, {"type": "reasoning", "id": "rs_2", "summary": [], "content": None,
                                            "encrypted_content": None, "status": None}],
        # the control rows: a retraction names an earlier message, a clear hides all before it
        "control/retract_and_clear": [user, {"role": "assistant", "content": "Tuesday."},
                                      {"type": "tiermem.retract", "position": 1}, {"type": "tiermem.clear"}, user],
        # text JSON lines must carry: line and paragraph separators, a NUL, astral characters
        "chat/awkward_text": [{"role": "user", "content": "a\u2028b\u2029c\x85d\r\ne\x00f \U0001f600"}],
    })
    return shapes


SHAPES = _shapes()
# the envelope beside each body, cycled over a conversation's rows: none, a session, metadata
# (nested, unicode), both
ENVELOPES: list[dict[str, Any]] = [
    {},
    {"session_id": "s1"},
    {"metadata": {"source": "crm", "tags": ["a", "ü"], "n": 1.5, "nested": {"k": None}}},
    {"session_id": "s2", "metadata": {"k": "v"}},
]


@pytest.mark.parametrize("rows", SHAPES.values(), ids=SHAPES.keys())
def test_every_stored_shape_round_trips_byte_identical(tmp_path: Path, embedder: FastEmbedder,
                                                      rows: list[dict[str, Any]]) -> None:
    first, second = tmp_path / "d1", tmp_path / "d2"
    with Memory(Config(data_dir=first), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("c", [{**body, **ENVELOPES[i % len(ENVELOPES)]} for i, body in enumerate(rows)])
    out, again = tmp_path / "out.jsonl", tmp_path / "again.jsonl"
    tm(embedder, first, "export", "-o", str(out))
    tm(embedder, second, "import", str(out))
    tm(embedder, second, "export", "-o", str(again))
    assert histories(second, embedder) == histories(first, embedder)
    assert again.read_bytes() == out.read_bytes()  # the export of the copy is the export of the original


# The same property over random conversations: rows drawn from every shape above, random
# text in a plain message, random envelopes (JSON metadata of every type, sessions, times).
# Deterministic by default (`derandomize`), as the other property tests; TIERMEM_FUZZ_EXAMPLES
# explores that many new conversations a run
DEFAULT_EXAMPLES = 10
EXPLORE = os.environ.get("TIERMEM_FUZZ_EXAMPLES")
EXAMPLES = int(EXPLORE) if EXPLORE else DEFAULT_EXAMPLES
MAX_ROWS = 8  # rows of one drawn conversation
JSON_LEAVES = 8  # the most leaves of one drawn metadata value
MAX_TIME_S = 4e9  # created_at drawn up to here (Unix seconds, year 2096)
# bodies that stand alone (a retraction names a position, drawn apart below)
LONE = [body for rows in SHAPES.values() for body in rows if body.get("type") != "tiermem.retract"]
json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=JSON_LEAVES)
body = st.sampled_from(LONE) | st.builds(lambda t: {"role": "user", "content": t}, st.text(max_size=60))
envelope = st.fixed_dictionaries({}, optional={
    "session_id": st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True),
    "metadata": st.dictionaries(st.text(max_size=8), json_value, max_size=3),
    "created_at": st.floats(0, MAX_TIME_S, allow_nan=False)})


@st.composite
def conversation(draw: st.DrawFn) -> list[dict[str, Any]]:
    rows = [{**draw(body), **draw(envelope)} for _ in range(draw(st.integers(1, MAX_ROWS)))]
    if len(rows) > 1 and draw(st.booleans()):  # a retraction of an earlier row, at a drawn place
        at = draw(st.integers(1, len(rows)))
        rows.insert(at, {"type": "tiermem.retract", "position": draw(st.integers(0, at - 1))})
    return rows


@settings(max_examples=EXAMPLES, derandomize=not EXPLORE, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(conversation())
def test_random_conversations_round_trip_byte_identical(tmp_path_factory: Any, embedder: FastEmbedder,
                                                        rows: list[dict[str, Any]]) -> None:
    tmp = tmp_path_factory.mktemp("rt")
    first, second = tmp / "d1", tmp / "d2"
    with Memory(Config(data_dir=first), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("c", rows)  # every drawn row is one append accepts
    out, again = tmp / "out.jsonl", tmp / "again.jsonl"
    tm(embedder, first, "export", "-o", str(out))
    tm(embedder, second, "import", str(out))
    tm(embedder, second, "export", "-o", str(again))
    assert histories(second, embedder) == histories(first, embedder)
    assert again.read_bytes() == out.read_bytes()
