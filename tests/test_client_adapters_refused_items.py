"""An item the store refuses, sent through an adapter over a `tiermem.client.Client`
(an Agents `TiermemSession.add_items`, a LangChain `add_messages`), is refused as over a
`Memory` in this process: the same exception class and message, naming the item by its
index in the call and the field inside it, and nothing written, nothing sent.

It was not, where the adapter sizes the batch for the server's `max_body_bytes`
(`_common.append_chunks`, 5367fde):
- a value JSON cannot carry (NaN, an infinity, an object) raised the sizing's bare
  ValueError / TypeError (`json.dumps(allow_nan=False)`), naming nothing;
- an item with a lone surrogate whose request alone passes the body limit raised httpx's
  bare UnicodeEncodeError (it is refused for its content size in process);
- an item refused by the append's own check (a field its type has not, content past the
  server's `max_content_bytes`) in a chunk after the first was found only once the chunks
  before were written (the turn half stored), and named by its index in its chunk.

Real HTTP to the real app on a real SQLite file, the same Config for the served store and
the one in process; each request the client sends recorded by its httpx event hook.

Fails on the code before (7 of 7): 3 bare ValueError, 1 TypeError, 1 UnicodeEncodeError,
2 written in part (1 row) and named `messages[0]`."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain_core")
from langchain_core.messages import AIMessage, HumanMessage
from service_helpers import TOKEN_ACME, served_and_local

from tiermem import Memory
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.adapters.openai_agents import TiermemSession
from tiermem.client import Client
from tiermem.tiers.errors import ConversationNotFound, LimitExceeded, ValidationError

NS = "acme"
MAX_CONTENT_BYTES = 65_536  # both stores'
MAX_BODY_BYTES = 2 * MAX_CONTENT_BYTES  # the server's: 3 items of LARGE chars pass it, 2 do not
LARGE = 50_000  # chars of a large item's text
PAST_CONTENT = MAX_CONTENT_BYTES + 4_000  # chars of a text past max_content_bytes, within max_body_bytes
PAST_BODY = MAX_BODY_BYTES + 10  # chars of a text whose request alone passes max_body_bytes


class _NoJSON:
    """An object JSON has no form for (a tool's own result object)."""


def _output(value: Any) -> list[dict[str, Any]]:
    """A turn whose tool output part holds `value` under `score`."""
    return [{"role": "user", "content": "rank them"},
            {"type": "function_call", "call_id": "call_1", "name": "rank", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1",
             "output": [{"type": "input_text", "text": "ranked", "score": value}]}]


def _big(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"{i}" + "x" * LARGE} for i in range(n)]


def _items(items: list[dict[str, Any]]) -> Callable[[Any, str], Any]:
    return lambda mem, conv: asyncio.run(TiermemSession(mem, conv).add_items(items))


def _lc(messages: list[Any]) -> Callable[[Any, str], Any]:
    return lambda mem, conv: TiermemChatMessageHistory(mem, conv).add_messages(messages)


CASES: list[tuple[str, Callable[[Any, str], Any], type, str]] = [
    # NaN in a tool output: one batch (the size measured against any server's least limit)
    ("nan", _items(_output(math.nan)), ValidationError, "messages[2].output[0].score"),
    # an infinity in an item's metadata
    ("inf metadata", _items([{"role": "user", "content": "hi", "metadata": {"p": -math.inf}}]),
     ValidationError, "messages[0].metadata"),
    # an object JSON has no form for (the sizing's TypeError)
    ("object", _items(_output(_NoJSON())), ValidationError, "messages[2].output[0].score"),
    # NaN in the last item of a turn past max_body_bytes (sized against the server's limit)
    ("nan past the body limit", _items([*_big(2), {**_big(1)[0], "metadata": {"p": math.nan}}]),
     ValidationError, "messages[2].metadata"),
    # a lone surrogate in a message whose request alone passes max_body_bytes: its content
    # size is what the store refuses (httpx's encoding of it raised UnicodeEncodeError).
    # LangChain's: the Agents session stores a lone surrogate as U+FFFD
    # (tests/test_agents_lone_surrogate.py), and its request is then too large for the server
    ("surrogate past the body limit", _lc([HumanMessage("y" * PAST_BODY + "\ud800")]),
     LimitExceeded, "messages[0].content"),
    # a field a user message has not, in the second chunk of a turn past max_body_bytes
    ("unknown field in a later chunk", _items([*_big(2), {**_big(1)[0], "name_of_caller": "x"}]),
     ValidationError, "messages[2].name_of_caller"),
    # LangChain: content past max_content_bytes (within max_body_bytes) in a later chunk
    ("lc content past the limit in a later chunk",
     _lc([HumanMessage("a" * LARGE), AIMessage("b" * LARGE), HumanMessage("c" * PAST_CONTENT)]),
     LimitExceeded, "messages[2].content"),
]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Memory]]:
    """The served store's URL, and a store in this process with the same Config."""
    with served_and_local(tmp_path_factory.mktemp("refused-items"), max_content_bytes=MAX_CONTENT_BYTES,
                          max_body_bytes=MAX_BODY_BYTES) as both:
        yield both


def _raised(call: Callable[[Any, str], Any], mem: Any, conv: str) -> Exception:
    try:
        call(mem, conv)
    except Exception as exc:  # what it raises is the subject
        return exc
    raise AssertionError("nothing raised")


@pytest.mark.parametrize(("label", "call", "kind", "field"), CASES, ids=[c[0] for c in CASES])
def test_refused_as_in_process_nothing_sent(stores: tuple[str, Memory], tmp_path: Path, label: str,
                                            call: Callable[[Any, str], Any], kind: type, field: str) -> None:
    url, local = stores
    conv = f"c-{tmp_path.name}"
    here = _raised(call, local.namespaced(NS), conv)
    sent: list[str] = []
    http = httpx.Client(event_hooks={"request": [lambda r: sent.append(f"{r.method} {r.url.path}")]})
    with http, Client(url, token=TOKEN_ACME, namespace=NS, http_client=http) as client:
        there = _raised(call, client, conv)
        with pytest.raises(ConversationNotFound):  # nothing written
            client.history(conv)
    assert type(here) is kind and isinstance(here, ValidationError), repr(here)
    assert here.field == field, str(here)
    assert type(there) is type(here) and str(there) == str(here), f"{there!r} != {here!r}"
    assert not [s for s in sent if s.startswith("POST")], sent  # refused before anything was sent
    with pytest.raises(ConversationNotFound):
        local.history(conv, namespace=NS)
