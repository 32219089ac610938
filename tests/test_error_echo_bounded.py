"""An error quotes at most MAX_SHOWN_CHARS of a refused value, on every way in.

`tiers.formats` quoted a bad `role` or `type` whole, and named an unknown top-level key
as the field whole: a 100,000-character role came back in a 100,111-character error from
the library, in the HTTP 422 body, in the MCP tool error and in `tiermem import`'s
output (a 100,000-character type in a 100,654-character one). Every echo of caller input
in `tiers.formats` and `tiers.models` now goes through the one bound the Anthropic
adapter had (`tiers.errors.shown`, `field_error`): a value is cut to MAX_SHOWN_CHARS, a
container named by its type, and a key that is no plain name is quoted (cut) in the
problem of the object holding it. Each case's longest error, on each way in, is the error
of a one-character value of the same field plus at most the bound. Real SQLite, the real
service (TestClient), the real MCP server and client, the real CLI.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.cli import CliState, cli
from tiermem.errors import ValidationError
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import MAX_SHOWN_CHARS
from tiermem.tiers.models import MAX_JSON_DEPTH, parse_message

pytest.importorskip("mcp")
from mcp import Client

from tiermem.adapters.mcp_server import build_server

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

CONV = "c"
HUGE_CHARS = 100_000
HUGE = "x" * HUGE_CHARS
CUT = "..."  # what `shown` puts after a cut quote
NEVER_SHOWN = "x" * (MAX_SHOWN_CHARS + 1)  # no error holds this much of the value
LIMITS = {"max_content_bytes": 1 << 20, "max_metadata_bytes": 1 << 20}  # the library's own, above any case


def _deep(levels: int) -> Any:
    v: Any = []
    for _ in range(levels):
        v = [v]
    return v


# each case: the message with one bad field, as a function of that field's value (a
# one-character value gives the shortest error of the field, HUGE the longest)
CASES: dict[str, tuple[Callable[[Any], dict[str, Any]], Any]] = {
    # a chat message's role
    "chat role": (lambda v: {"role": v, "content": "hi"}, "x"),
    # a role that is no string: a list of 100,000 items was quoted as its whole repr
    "role list": (lambda v: {"role": v if v == ["x"] else ["x"] * HUGE_CHARS, "content": "hi"}, ["x"]),
    # a Responses item's type (its error lists every known type)
    "item type": (lambda v: {"type": v}, "x"),
    # a Responses message's role
    "responses role": (lambda v: {"type": "message", "role": v, "content": [{"type": "input_text", "text": "hi"}]},
                       "x"),
    # a content part's type
    "part type": (lambda v: {"role": "user", "content": [{"type": v}]}, "x"),
    # a tool call's type
    "tool call type": (lambda v: {"role": "assistant", "content": None, "tool_calls": [
        {"type": v, "id": "a", "function": {"name": "f", "arguments": "{}"}}]}, "x"),
    # a reasoning summary part's type
    "summary part type": (lambda v: {"type": "reasoning", "id": "r", "summary": [{"type": v}]}, "x"),
    # an unknown top-level key: it was the error's field (and the HTTP loc), whole
    "unknown key": (lambda v: {"role": "user", "content": "hi", v: 1}, "-"),
    # an unknown key nested past the depth limit (checked before the fields)
    "deep unknown key": (lambda v: {"role": "user", "content": "hi", v: _deep(MAX_JSON_DEPTH + 1)}, "-"),
}


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as m:
        yield m


def by_library(mem: Memory, _tmp: Path, _emb: FastEmbedder, msg: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        mem.append(CONV, msg)
    return str(info.value)


def by_http(mem: Memory, _tmp: Path, _emb: FastEmbedder, msg: dict[str, Any]) -> str:
    app = create_app(mem.config, mem, auth=False, start_scheduler=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        r = client.post(f"/v1/conversations/{CONV}/messages", json=msg)
    assert r.status_code == 422, r.text
    return r.text


def by_mcp(mem: Memory, _tmp: Path, _emb: FastEmbedder, msg: dict[str, Any]) -> str:
    async def run() -> str:
        async with Client(build_server(mem)) as client:
            r = await client.call_tool("append", {"conversation_id": CONV, "message": msg})
            assert r.is_error
            text: str = r.content[0].text  # type: ignore[union-attr]
            return text
    return asyncio.run(run())


def by_cli(_mem: Memory, tmp: Path, emb: FastEmbedder, msg: dict[str, Any]) -> str:
    f = tmp / "one.jsonl"
    f.write_text(json.dumps({"conversation_id": CONV, "message": msg}) + "\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["--data-dir", str(tmp / "cli"), "import", str(f)], obj=CliState(embedder=emb))
    assert r.exit_code == 1, r.output
    return r.output


# over HTTP, "deep unknown key" is refused by the service's body guard before the message is
# read, with the keys down to the limit as its location, each bounded too (`shown_key`)
WAYS = {"library": by_library, "http": by_http, "mcp": by_mcp, "cli": by_cli}


@pytest.mark.parametrize(("case", "way"), [(c, w) for c in CASES for w in WAYS])
def test_the_longest_error_of_a_field_quotes_at_most_the_bound(mem: Memory, tmp_path: Path, embedder: FastEmbedder,
                                                               case: str, way: str) -> None:
    build, short = CASES[case]
    ask = WAYS[way]
    shortest = ask(mem, tmp_path, embedder, build(short))
    longest = ask(mem, tmp_path, embedder, build(HUGE))
    assert NEVER_SHOWN not in longest
    assert len(longest) <= len(shortest) + MAX_SHOWN_CHARS + len(CUT), longest
    assert mem.conversations("default") == []  # nothing written


def test_the_library_error_of_a_huge_role() -> None:
    # the hunt's case, whole: the quote cut to the bound
    with pytest.raises(ValidationError) as info:
        parse_message({"role": HUGE, "content": "hi"}, **LIMITS)
    quoted = repr(HUGE)[:MAX_SHOWN_CHARS] + CUT
    assert str(info.value) == ("role: Input should be 'system', 'developer', 'user', 'assistant', 'tool', "
                               f"'function' (Chat Completions), got {quoted}")


@pytest.mark.parametrize(("key", "field"), [
    # a plain name stays the field
    ("extra", "extra"),
    # one of the bound's length too
    ("k" * MAX_SHOWN_CHARS, "k" * MAX_SHOWN_CHARS),
    # past it: quoted, the message named
    ("k" * (MAX_SHOWN_CHARS + 1), "message"),
    # a dot would split the HTTP location: quoted
    ("a.b", "message"),
], ids=["plain", "at the bound", "past the bound", "dotted"])
def test_an_unknown_key_is_the_field_only_when_plain(key: str, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_message({"role": "user", "content": "hi", key: 1}, **LIMITS)
    assert info.value.field == field
