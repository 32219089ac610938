"""A function tool listed in an `additional_tools` / `tool_search_output` item is sent as the
`openai` SDK's `FunctionToolParam` takes it, with its JSON schema as written
(`tiers.formats.wire_body`, `_without_nulls`):

- `strict: null` and `parameters: null` are required-and-nullable there: kept (the item
  was refused without them);
- a null inside the tool's schema is data (`"default": null`, `"const": null`): kept
  (dropping it changed what the schema means);
- the tables of required-and-nullable fields cover every one the SDK's request types have
  at any depth (derived from `ResponseInputItemParam` here).

On the code before (2fe5e0c), each item case lost a null and the derived table lacked
`strict` / `parameters`. Real SQLite files, the real `openai` SDK."""

from __future__ import annotations

import collections.abc as cabc
import json
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Required

import pytest
from hash_embedder import HashEmbedder
from openai.types.responses import ResponseInputItemParam
from pydantic import ConfigDict, TypeAdapter
from typing_extensions import get_type_hints, is_typeddict

from tiermem import Config, Memory
from tiermem.tiers.formats import NESTED_REQUIRED_NULL_FIELDS, REQUIRED_NULL_FIELDS

ITEM = TypeAdapter(ResponseInputItemParam, config=ConfigDict(extra="forbid"))

SCHEMA = {"type": "object", "required": ["unit"],
          "properties": {"unit": {"type": ["string", "null"], "default": None}, "x": {"const": None}}}
WEATHER = {"type": "function", "name": "get_weather", "parameters": SCHEMA, "strict": None}
NOARGS = {"type": "function", "name": "noargs", "parameters": None, "strict": True}


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(Config(data_dir=tmp_path / "m"), embedder=HashEmbedder(), hot=False, background_indexing=False)
    yield m
    m.close()


CASES = [
    # a developer's additional tools: strict null with a schema holding nulls, parameters null
    pytest.param({"type": "additional_tools", "role": "developer", "tools": [WEATHER, NOARGS]}, id="additional-tools"),
    # a server-side tool search's output listing a tool with strict null
    pytest.param({"type": "tool_search_output", "call_id": "ts_1", "status": "completed", "execution": "server",
                  "tools": [WEATHER]}, id="tool-search-output"),
    # the same listing with parameters null
    pytest.param({"type": "tool_search_output", "call_id": "ts_2", "status": "completed", "execution": "server",
                  "tools": [NOARGS]}, id="tool-search-output-no-parameters"),
]


@pytest.mark.parametrize("item", CASES)
def test_listed_tools_sent_as_written(mem: Memory, item: dict[str, Any]) -> None:
    mem.append("c", {"role": "user", "content": "hi"})
    if item["type"] == "tool_search_output":  # its call first: an output without one is not sent
        mem.append("c", {"type": "tool_search_call", "call_id": item["call_id"], "execution": "server",
                         "status": "completed", "arguments": {"query": "weather"}})
    mem.append("c", item)
    mem.append("c", {"role": "user", "content": "weather?"})
    sent = [m for m in mem.context("c", "weather?", budget=4000).messages if m.get("type") == item["type"]]
    assert len(sent) == 1
    assert sent[0]["tools"] == item["tools"], json.dumps(sent[0]["tools"])
    ITEM.validate_python(sent[0])  # the SDK's request type takes it


def _members(t: Any) -> Iterator[Any]:
    if typing.get_origin(t) in (typing.Union, types.UnionType, list, cabc.Iterable, cabc.Sequence):
        for a in typing.get_args(t):
            yield from _members(a)
    else:
        yield t


def _required_nullable(td: Any, depth: int, seen: frozenset[Any], out: dict[str, set[str]]) -> None:
    """The Required[Optional[...]] fields of TypedDict `td` and those below it: by depth."""
    if td in seen:
        return
    extras, hints = get_type_hints(td, include_extras=True), get_type_hints(td)
    for name, t in hints.items():
        members = list(_members(t))
        if typing.get_origin(extras[name]) is Required and type(None) in members:
            out["top" if depth == 0 else "nested"].add(name)
        for m in members:
            if is_typeddict(m):
                _required_nullable(m, depth + 1, seen | {td}, out)


def test_tables_cover_the_sdk() -> None:
    # every required-and-nullable field of every item type, top level and nested, is in the tables
    missing = []
    for td in _members(ResponseInputItemParam):
        if not is_typeddict(td) or "type" not in get_type_hints(td):
            continue
        kind = typing.get_args(get_type_hints(td)["type"])[0]
        out: dict[str, set[str]] = {"top": set(), "nested": set()}
        _required_nullable(td, 0, frozenset(), out)
        missing += [f"{kind} top {f}" for f in out["top"] - REQUIRED_NULL_FIELDS.get(kind, frozenset())]
        missing += [f"{kind} nested {f}" for f in out["nested"] - NESTED_REQUIRED_NULL_FIELDS.get(kind, frozenset())]
    assert missing == []
