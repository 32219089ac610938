"""One nesting limit for every way a message comes in (`tiers.models.MAX_JSON_DEPTH`, the
HTTP guard's too): a message nested deeper is refused naming its field and the limit, and
nothing is written. Before, the library, `tiermem append --json-file` and import took any
depth the JSON parser did, and then that conversation's /history and /context answered
500 on every call (pydantic's serializer gives up past 255 levels, the recursive `finite()`
near 1,000). Rows an older version stored that deep still exist: the service serves them,
the part past `MAX_RENDER_DEPTH` shown as a marker, the stored row unchanged. Real SQLite
files, the real CLI (CliRunner) and the real app (TestClient)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cold_helpers import store_as_an_older_version
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.cli import CliState, cli
from tiermem.service import create_app
from tiermem.service.schemas import DEEP_VALUE_MARKER, MAX_RENDER_DEPTH, finite
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.models import MAX_JSON_DEPTH
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("clean_env")

CONV = "deep"


def nested(levels: int, leaf: Any = "leaf") -> Any:
    """`levels` dicts around `leaf`: the leaf sits `levels` below the value."""
    v = leaf
    for _ in range(levels):
        v = {"a": v}
    return v


def nested_text(levels: int) -> str:
    """The JSON text of `nested(levels)`, built without json.dumps' recursion."""
    return '{"a": ' * levels + '"leaf"' + "}" * levels


# The message is level 1, its fields' values level 2: a value `nested(n)` in a field puts its
# leaf at level n + 1, so n = MAX_JSON_DEPTH - 1 is the deepest accepted.
OVER = MAX_JSON_DEPTH  # one level past the limit
# (the message, the keyword envelope, the field the refusal must name) -- each a way a deep value came in
REFUSED: list[tuple[dict[str, Any], dict[str, Any], str]] = [
    # deep metadata in the message: stored, then history answered 500
    ({"role": "user", "content": "hi", "metadata": nested(OVER)}, {}, "metadata"),
    # the same given as append's keyword
    ({"role": "user", "content": "hi"}, {"metadata": nested(OVER)}, "metadata"),
    # a hosted-tool item's verbatim payload
    ({"type": "web_search_call", "id": "ws_1", "status": "completed", "action": nested(OVER)}, {}, "action"),
    # inside a content part (parts keep unread fields verbatim)
    ({"role": "user", "content": [{"type": "text", "text": "x", "extra": nested(OVER)}]}, {}, "content"),
    # the audit's depths: 400 (PydanticSerializationError) and 800 (RecursionError in finite)
    ({"role": "user", "content": "hi", "metadata": nested(400)}, {}, "metadata"),
    ({"role": "user", "content": "hi", "metadata": {"x": nested(800)}}, {}, "metadata"),
    # deeper than Python's recursion limit: refused by the iterative check, not a RecursionError
    ({"type": "web_search_call", "id": "ws_2", "status": "completed", "action": nested(5000)}, {}, "action"),
]


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as m:
        m.append(CONV, {"role": "user", "content": "already here"})
        yield m


@pytest.mark.parametrize(("message", "envelope", "field"), REFUSED)
def test_a_message_nested_past_the_limit_is_refused(mem: Memory, message: dict[str, Any],
                                                    envelope: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        mem.append(CONV, message, **envelope)
    assert info.value.field == field and str(MAX_JSON_DEPTH) in str(info.value)
    assert len(mem.history(CONV)) == 1  # nothing written


def test_the_limit_itself_is_accepted(mem: Memory) -> None:
    deepest = nested(MAX_JSON_DEPTH - 1)
    mem.append(CONV, {"type": "web_search_call", "id": "ws_ok", "status": "completed", "action": deepest},
               metadata=deepest)
    got = mem.history(CONV)[-1]
    assert got.body["action"] == deepest and got.metadata == deepest


def test_cli_append_json_file_refuses_and_writes_nothing(tmp_path: Path, embedder: FastEmbedder) -> None:
    data = tmp_path / "data"
    f = tmp_path / "deep.json"
    # a batch whose second message is too deep: the first must not be written either
    f.write_text(json.dumps([{"role": "user", "content": "fine"},
                             {"role": "user", "content": "deep", "metadata": nested(400)}]))
    try:
        r = CliRunner().invoke(cli, ["--data-dir", str(data), "append", CONV, "--json-file", str(f)],
                               obj=CliState(embedder=embedder))
        assert r.exit_code == 1, r.output
        assert "metadata" in r.output and str(MAX_JSON_DEPTH) in r.output and "Traceback" not in r.output
        r = CliRunner().invoke(cli, ["--data-dir", str(data), "history", CONV], obj=CliState(embedder=embedder))
        # nothing was created: not the conversation, not even the store (the refusal comes
        # before the store is opened, d4b4809)
        assert r.exit_code != 0 and "no tiermem database" in r.output
    finally:
        EmbeddedRedis(data).stop()  # a no-op unless a command started it


# (the stored body's JSON, the stored metadata's JSON) -- depths an older version stored
STORED_DEEP = [
    # 400 levels: pydantic's serializer failed (500)
    ('{"type": "web_search_call", "id": "ws_1", "status": "completed", "action": ' + nested_text(400) + "}",
     '{"m": 1}'),
    # 800 levels in metadata: the recursive finite() failed (500)
    ('{"role": "assistant", "content": "stored long ago"}', '{"x": ' + nested_text(800) + "}"),
    # both, and just past what is rendered
    ('{"type": "web_search_call", "id": "ws_2", "status": "completed", "action": '
     + nested_text(MAX_RENDER_DEPTH + 1) + "}", nested_text(MAX_RENDER_DEPTH + 1)),
]


@pytest.mark.parametrize(("body_json", "metadata_json"), STORED_DEEP)
def test_a_deep_row_stored_by_an_older_version_is_served(tmp_path: Path, embedder: FastEmbedder,
                                                         body_json: str, metadata_json: str) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        m.append(CONV, {"role": "user", "content": "what did the search find?"})
    store_as_an_older_version(cfg.db_path, CONV, body_json, metadata_json)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        m.rebuild()  # the derived index over the old row too, so that context() plans with it
        with TestClient(create_app(cfg, m, auth=False, start_scheduler=False), base_url="http://127.0.0.1",
                        raise_server_exceptions=False) as c:
            r = c.get(f"/v1/conversations/{CONV}/history")
            assert r.status_code == 200, r.text
            rows = r.json()["messages"]
            assert [row["position"] for row in rows] == [0, 1]
            assert DEEP_VALUE_MARKER in r.text  # the part past MAX_RENDER_DEPTH, marked
            r = c.post(f"/v1/conversations/{CONV}/context", json={"query": "search", "budget": 100_000})
            assert r.status_code == 200, r.text
            r = c.get(f"/v1/conversations/{CONV}/active")
            assert r.status_code == 200, r.text
        # the stored row is unchanged
        assert json.loads(body_json) == m.history(CONV)[1].body


# (the value, the depth it is rendered to, what comes out) -- finite() on its own
FINITE = [
    # non-finite floats become null at any level, tuples lists
    ({"a": [1.0, float("nan"), (float("inf"), 2)]}, 8, {"a": [1.0, None, [None, 2]]}),
    # past max_depth (the value itself is at 0): the marker in place of the value, the levels above kept
    ({"a": {"b": {"c": 1}}}, 1, {"a": {"b": DEEP_VALUE_MARKER}}),
    # key order kept
    ({"z": 1, "a": 2, "m": 3}, 8, {"z": 1, "a": 2, "m": 3}),
    # a scalar is itself
    (5, 0, 5),
]


@pytest.mark.parametrize(("value", "max_depth", "expected"), FINITE)
def test_finite(value: Any, max_depth: int, expected: Any) -> None:
    out = finite(value, max_depth)
    assert out == expected
    if isinstance(expected, dict):
        assert list(out) == list(expected)


def test_finite_does_not_recurse() -> None:
    """A value deeper than Python's recursion limit (json.loads builds ~1,000 levels; a
    library caller any): rendered, not a RecursionError."""
    out = finite(nested(20_000))
    depth = 0
    while isinstance(out, dict):
        out, depth = out["a"], depth + 1
    assert out == DEEP_VALUE_MARKER and depth == MAX_RENDER_DEPTH + 1  # the dicts at levels 0..MAX_RENDER_DEPTH
