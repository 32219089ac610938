"""An add too long for one append (written in chunks) checks every message before it writes
any: a message the store refuses, in any chunk, leaves nothing written and is named by its
index in the whole add (README: bad input gets a clear error and writes nothing).

The adapters split an add one append does not take (past the library's 10,000 messages, or
over a `tiermem.client.Client` past its server's `max_body_bytes`) into chunks: an Agents
`TiermemSession.add_items`, a LangChain `add_messages` (`_common.append_chunked`), the
LangGraph hooks' sync (its own chunk loop). Over a store in this process the chunks after
the first were checked only by their own append, once the chunks before were written: a
message too large in the last chunk left the other 10,000 stored, and was named by its index
in its chunk (`messages[0]`); the LangGraph sync did so over a `Client` too.

Real parts: a Memory in this process and a real served app over HTTP (real SQLite each, the
same Config), the Client's requests recorded by its own httpx event hook; a real
`TiermemHooks` for the sync.

Fails on the code before: 7 of 10 (the 5 in-process cases named `messages[0]`, the 10,000
messages before stored; the 2 syncs over a Client a plain ValidationError, `messages[0]`,
the LimitExceeded's class lost). The Agents and LangChain adds over a Client were checked
before any was sent already (610eaa3): those 3 pass before too."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("agents")
pytest.importorskip("langgraph")
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from service_helpers import TOKEN_ACME, served_and_local, stored_rows

from tiermem import Memory
from tiermem.adapters._common import MemoryLike
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.adapters.openai_agents import TiermemSession
from tiermem.client import Client
from tiermem.memory import MAX_BATCH_MESSAGES
from tiermem.tiers.errors import LimitExceeded, ValidationError

NS = "acme"
MAX_CONTENT_BYTES = 4096  # both stores'
MAX_BODY_BYTES = 8192  # the server's: a few hundred short messages need several chunks
PAST_CONTENT = MAX_CONTENT_BYTES + 1  # chars (ASCII: bytes) of a text the store refuses
# messages in an add that needs chunks: in process past the library's batch limit; over a
# Client past the server's max_body_bytes (about 40 bytes each on the wire: ~5 chunks)
LONG = {"memory": MAX_BATCH_MESSAGES + 1, "client": 1_000}
STORED_BEFORE = 3  # the LangGraph state's messages a first sync stored

# an add of `n` messages whose last one is refused: (mem, conversation, n) -> None
Add = Callable[[MemoryLike, str, int], Any]


def _items(n: int, last: dict[str, Any]) -> list[dict[str, Any]]:
    return [*({"role": "user", "content": f"m{i}"} for i in range(n - 1)), last]


def _messages(n: int, last: BaseMessage, start: int = 0) -> list[BaseMessage]:
    return [*((HumanMessage(f"h{i}", id=f"h{i}") if i % 2 == 0 else AIMessage(f"a{i}", id=f"a{i}"))
              for i in range(start, start + n - 1)), last]


def _agents(last: dict[str, Any]) -> Add:
    return lambda mem, conv, n: asyncio.run(TiermemSession(mem, conv).add_items(_items(n, last)))


def _langchain(mem: MemoryLike, conv: str, n: int) -> None:
    TiermemChatMessageHistory(mem, conv).add_messages(_messages(n, HumanMessage("x" * PAST_CONTENT)))


def _sync(mem: MemoryLike, conv: str, n: int) -> None:
    TiermemHooks(mem, conv).sync(_messages(n, HumanMessage("x" * PAST_CONTENT, id="big")))


def _sync_after_stored(mem: MemoryLike, conv: str, n: int) -> None:
    """A state whose first messages a sync stored: its new ones named by their index in it."""
    hooks = TiermemHooks(mem, conv)
    first = _messages(STORED_BEFORE, AIMessage("a-first", id="a-first"), start=n)
    hooks.sync(first)
    hooks.sync([*first, *_messages(n, HumanMessage("x" * PAST_CONTENT, id="big"))])


# (case id, the add, the rows a step before it stored, the refusal's class, its field by n)
CASES: list[tuple[str, Add, int, type, Callable[[int], str]]] = [
    # an Agents item too large, the last of the add: in the last chunk
    ("agents content past the limit", _agents({"role": "user", "content": "x" * PAST_CONTENT}), 0,
     LimitExceeded, lambda n: f"messages[{n - 1}].content"),
    # an Agents item with a field its type has not (parse_message's own refusal)
    ("agents unknown field", _agents({"role": "user", "content": "hi", "name_of_caller": "x"}), 0,
     ValidationError, lambda n: f"messages[{n - 1}].name_of_caller"),
    # a LangChain message too large in the last chunk of add_messages
    ("langchain content past the limit", _langchain, 0,
     LimitExceeded, lambda n: f"messages[{n - 1}].content"),
    # the LangGraph hooks' first sync of a long state: the sync's own chunk loop
    ("langgraph first sync", _sync, 0, LimitExceeded, lambda n: f"messages[{n - 1}].content"),
    # a later sync: named by the message's index in the state, not in the sync's batch
    ("langgraph sync after stored", _sync_after_stored, STORED_BEFORE,
     LimitExceeded, lambda n: f"messages[{STORED_BEFORE + n - 1}].content"),
]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Memory]]:
    """The served store's URL, and a store in this process with the same Config."""
    with served_and_local(tmp_path_factory.mktemp("chunked-add-checked"), max_content_bytes=MAX_CONTENT_BYTES,
                          max_body_bytes=MAX_BODY_BYTES) as both:
        yield both


@pytest.mark.parametrize("store", ["memory", "client"])
@pytest.mark.parametrize(("label", "add", "before", "kind", "field"), CASES, ids=[c[0] for c in CASES])
def test_refused_before_any_chunk_is_written(stores: tuple[str, Memory], tmp_path: Path, store: str,
                                             label: str, add: Add, before: int, kind: type,
                                             field: Callable[[int], str]) -> None:
    url, local = stores
    conv, n = f"c-{tmp_path.name}", LONG[store]
    posts: list[str] = []  # the batch requests the client sent

    def sent(r: httpx.Request) -> None:
        if r.method == "POST":
            posts.append(r.url.path)

    http = httpx.Client(event_hooks={"request": [sent]})
    with http, Client(url, token=TOKEN_ACME, namespace=NS, http_client=http) as client:
        mem: MemoryLike = local.namespaced(NS) if store == "memory" else client
        with pytest.raises(ValidationError) as refused:
            add(mem, conv, n)
        assert type(refused.value) is kind, repr(refused.value)
        assert refused.value.field == field(n), str(refused.value)
        assert str(refused.value) == f"{field(n)}: {refused.value.problem}"
        if kind is LimitExceeded:  # its value and limit kept through the renaming
            assert (refused.value.value, refused.value.limit) == (PAST_CONTENT, MAX_CONTENT_BYTES)
        assert stored_rows(mem, conv) == before  # nothing of the refused add written
        if store == "client":  # only the step before it (a first sync) sent a batch
            assert len(posts) == (1 if before else 0), posts
