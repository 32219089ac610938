"""The service's body guard quotes at most MAX_SHOWN_CHARS of any caller key or header.

The guard (`tiermem.service.guard`) refuses a body nested too deep, or holding a key
with a lone surrogate, before the message is read, with the keys down to the problem as
the 422's `loc`: each key went in whole (a 100,000-character key gave a 100,168-byte
answer; a key at every level, each whole), and a refused Content-Type was cut by the
guard's own bound (80) beside `tiers.errors.MAX_SHOWN_CHARS`. Every key of a location is
now itself when it is a plain name and else quoted and cut (`tiers.errors.shown_key`),
and the Content-Type goes through `shown`: the one bound. On the single append, the
batch and the MCP endpoint (whose JSON-RPC error carries the location twice: in its
message and its data). Real SQLite, the real service (TestClient).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.adapters.mcp_http import MCP_PATH
from tiermem.config import MAX_BODY_BYTES_LIMIT
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import MAX_SHOWN_CHARS
from tiermem.tiers.models import MAX_JSON_DEPTH

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

CONV = "c"
HUGE_CHARS = 100_000
HUGE = "x" * HUGE_CHARS
CUT = "..."  # what `shown` puts after a cut quote
NEVER_SHOWN = "x" * (MAX_SHOWN_CHARS + 1)  # no answer holds this much of a key
JSON = {"content-type": "application/json"}
MESSAGE_LEVELS = 2  # the levels of the message and its metadata above a bad value


def _deep(levels: int) -> Any:
    v: Any = []
    for _ in range(levels):
        v = [v]
    return v


def _keyed(key: str, levels: int) -> Any:
    """`levels` objects, one in another, each under `key`."""
    v: Any = 1
    for _ in range(levels):
        v = {key: v}
    return v


def _json(value: Any) -> bytes:
    # ensure_ascii: a lone surrogate is sent as its \\u escape, as a JSON client would
    return json.dumps(value).encode()


# each case: the message with one bad key, as a function of that key (a one-character key
# gives the shortest answer, HUGE the longest), and how many keys of the location it
# builds are that key
CASES: dict[str, tuple[Callable[[str], dict[str, Any]], int]] = {
    # metadata nested past the limit under the key: the location runs down through it
    "deep under the key": (lambda k: {"role": "user", "content": "hi", "metadata": {k: _deep(MAX_JSON_DEPTH)}}, 1),
    # the key at every level of metadata nested past the limit: every one in the location
    "the key at every level": (lambda k: {"role": "user", "content": "hi",
                                          "metadata": _keyed(k, MAX_JSON_DEPTH)}, MAX_JSON_DEPTH - MESSAGE_LEVELS + 1),
    # a key with a lone UTF-16 surrogate: the location ends at it
    "lone surrogate key": (lambda k: {"role": "user", "content": "hi", "metadata": {"\ud800" + k: 1}}, 1),
}

# each way in: (path, the body wrapping a message, how many times an answer holds the location)
WAYS: dict[str, tuple[str, Callable[[dict[str, Any]], Any], int]] = {
    "append": (f"/v1/conversations/{CONV}/messages", lambda m: m, 1),
    "batch": (f"/v1/conversations/{CONV}/messages:batch", lambda m: {"messages": [m]}, 1),
    # the JSON-RPC error's message and its data
    "mcp": (MCP_PATH, lambda m: {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "append", "arguments": {"conversation_id": CONV, "message": m}}}, 2),
}


@pytest.fixture
def client(tmp_path: Path, embedder: FastEmbedder) -> Iterator[tuple[TestClient, Memory]]:
    # the largest body a service takes: the case with a HUGE key at every level fits
    cfg = Config(data_dir=tmp_path / "data", max_body_bytes=MAX_BODY_BYTES_LIMIT)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        app = create_app(cfg, mem, auth=False, start_scheduler=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            yield c, mem


def _post(client: TestClient, path: str, body: bytes, headers: dict[str, str]) -> str:
    r = client.post(path, content=body, headers={**headers, "accept": "application/json, text/event-stream"})
    assert r.status_code in (415, 422), r.text
    return r.text


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("case", CASES)
def test_the_longest_refusal_quotes_each_key_within_the_bound(client: tuple[TestClient, Memory],
                                                              case: str, way: str) -> None:
    c, mem = client
    build, keys = CASES[case]
    path, wrap, echoes = WAYS[way]
    shortest = _post(c, path, _json(wrap(build("-"))), JSON)
    longest = _post(c, path, _json(wrap(build(HUGE))), JSON)
    assert NEVER_SHOWN not in longest
    assert len(longest) <= len(shortest) + keys * echoes * (MAX_SHOWN_CHARS + len(CUT)), longest[:1000]
    assert mem.conversations("default") == []  # nothing written


@pytest.mark.parametrize("way", WAYS)
def test_a_refused_content_type_is_quoted_within_the_bound(client: tuple[TestClient, Memory], way: str) -> None:
    c, mem = client
    path, wrap, echoes = WAYS[way]
    body = _json(wrap({"role": "user", "content": "hi"}))
    shortest = _post(c, path, body, {"content-type": "text/x"})
    longest = _post(c, path, body, {"content-type": "text/" + HUGE})
    assert NEVER_SHOWN not in longest
    assert len(longest) <= len(shortest) + echoes * (MAX_SHOWN_CHARS + len(CUT)), longest[:1000]
    assert mem.conversations("default") == []


@pytest.mark.parametrize(("key", "shown"), [
    # a plain name is the location's part itself
    ("extra", "extra"),
    # one of the bound's length too
    ("k" * MAX_SHOWN_CHARS, "k" * MAX_SHOWN_CHARS),
    # past it: quoted, cut
    ("k" * (MAX_SHOWN_CHARS + 1), repr("k" * (MAX_SHOWN_CHARS + 1))[:MAX_SHOWN_CHARS] + CUT),
    # a dot would split a dotted location (the MCP error's message): quoted
    ("a.b", "'a.b'"),
    # a lone surrogate: quoted, escaped (it was escaped, unquoted)
    ("k\udfff", "'k\\udfff'"),
], ids=["plain", "at the bound", "past the bound", "dotted", "lone surrogate"])
def test_a_key_is_the_location_part_only_when_plain(client: tuple[TestClient, Memory], key: str, shown: str) -> None:
    c, _mem = client
    msg = {"role": "user", "content": "hi", "metadata": {key: _deep(MAX_JSON_DEPTH)}}
    answer = json.loads(_post(c, WAYS["append"][0], _json(msg), JSON))
    (item,) = answer["detail"]
    assert item["loc"][:3] == ["body", "metadata", shown]
