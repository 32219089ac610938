"""`TiermemSession.add_items` over a `tiermem.client.Client` of a turn larger than one
request the server takes (its `max_body_bytes`, 2 MiB by default): an agent reads three
800 KB files in parallel and the SDK adds the three calls, their three outputs and the
reply at once, about 2.4 MB.

It was one batch: the server refused it (413, `ServiceError`) and the turn was lost, the
session holding only the user's message, while over a Memory in this process all eight
items were stored. It now goes as a LangChain `add_messages` does (`_common.append_chunks`,
sized to the server's `max_body_bytes` read from /v1/limits; `_common.append_chunked`):
in order, each item once, each chunk within the limit, each after the first conditional
on where the previous one left the log; an erasure between two stops the add
(`HistoryErased`, naming `add_items`). A turn one request holds is still one batch (all
or nothing).

Real HTTP to the real app on a real SQLite file at the default body limit; the real
`openai-agents` Runner with its ScriptedModel; the hash embedder (what is measured is the
batch, not the model). The other writer is a second real `Client`, run between two
chunks from an httpx response hook of the session client's own `http_client`.

Fails on the code before (3 of 4 cases): the big turn's run raises `ServiceError(413)`
from the SDK's add_items, the session holding only the user's message; the big direct
add raises it, and so does the erasure case instead of `HistoryErased`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("agents")
from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from hash_embedder import HashEmbedder
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters._common import log_pages
from tiermem.adapters.openai_agents import TiermemSession
from tiermem.client import Client
from tiermem.tiers.errors import HistoryErased

FILE_CHARS = 800_000  # one file's text, as its tool returns it: three pass the 2 MiB body limit
FILES = "abc"
BATCH_PATH = "/messages:batch"
DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024  # a server's default max_body_bytes, checked below


@function_tool
def read_file(name: str) -> str:
    """Read a file."""
    return name * FILE_CHARS


def _model() -> ScriptedModel:
    return ScriptedModel([[function_call("read_file", {"name": n}, call_id=f"call_{n}") for n in FILES],
                          [assistant_message("Read all three.", item_id="msg_1")]])


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("agents-big") / "data", auth_tokens=SCOPED_TOKENS)
    assert cfg.max_body_bytes == DEFAULT_MAX_BODY_BYTES  # the limit every default server has
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as got:
        yield got


def _recording(url: str, on_batch: Callable[[int], None] = lambda _k: None) -> tuple[Client, list[int], list[int]]:
    """A Client whose http_client records each batch request's body bytes and its answer's
    status, and calls `on_batch(k)` once the k-th batch (from 1) is stored."""
    sizes: list[int] = []
    statuses: list[int] = []

    def request(r: httpx.Request) -> None:
        if r.url.path.endswith(BATCH_PATH):
            sizes.append(len(r.content))

    def response(r: httpx.Response) -> None:
        if r.request.url.path.endswith(BATCH_PATH):
            statuses.append(r.status_code)
            if r.is_success:
                on_batch(len(sizes))

    http = httpx.Client(event_hooks={"request": [request], "response": [response]})
    return Client(url, token=TOKEN_ACME, namespace="acme", http_client=http), sizes, statuses


def _turn() -> list[dict[str, Any]]:
    """The items the SDK adds for the big turn, as Responses items."""
    calls = [{"type": "function_call", "call_id": f"call_{n}", "name": "read_file", "arguments": f'{{"name": "{n}"}}'}
             for n in FILES]
    outputs = [{"type": "function_call_output", "call_id": f"call_{n}", "output": n * FILE_CHARS} for n in FILES]
    return [*calls, *outputs, {"role": "assistant", "content": "Read all three."}]


def test_an_agent_turn_past_the_body_limit_is_stored_whole(url: str, tmp_path: Path) -> None:
    conv = f"run-{tmp_path.name}"
    client, sizes, statuses = _recording(url)
    with client:
        session = TiermemSession(client, conv)
        agent = Agent(name="reader", instructions="Read what is asked.", model=_model(), tools=[read_file])
        result = asyncio.run(Runner.run(agent, "read a, b and c", session=session,
                                        run_config=RunConfig(tracing_disabled=True)))
        assert result.final_output == "Read all three."
        items = asyncio.run(session.get_items())
    assert [i.get("type") or i.get("role") for i in items] == [
        "user", "function_call", "function_call", "function_call",
        "function_call_output", "function_call_output", "function_call_output", "message"]
    assert [i["output"] for i in items if i.get("type") == "function_call_output"] == [n * FILE_CHARS for n in FILES]
    # the user's message alone, then the turn in more than one chunk, each within the limit
    assert len(sizes) >= 3 and max(sizes) <= DEFAULT_MAX_BODY_BYTES
    assert set(statuses) == {httpx.codes.CREATED}


def test_a_direct_add_past_the_limit_goes_in_order_each_item_once(url: str, tmp_path: Path) -> None:
    conv = f"add-{tmp_path.name}"
    turn = _turn()
    client, sizes, _statuses = _recording(url)
    with client:
        asyncio.run(TiermemSession(client, conv).add_items(turn))
        assert [r.body for r in log_pages(client, conv)] == turn  # no control row, nothing twice
    assert len(sizes) > 1 and max(sizes) <= DEFAULT_MAX_BODY_BYTES


def test_a_turn_one_request_holds_is_one_batch(url: str, tmp_path: Path) -> None:
    conv = f"small-{tmp_path.name}"
    turn = [{**item, "output": "short"} if "output" in item else item for item in _turn()]
    client, sizes, _statuses = _recording(url)
    with client:
        asyncio.run(TiermemSession(client, conv).add_items(turn))
        assert [r.body for r in log_pages(client, conv)] == turn
    assert len(sizes) == 1  # all or nothing


def test_an_erasure_between_two_chunks_stops_the_add(url: str, tmp_path: Path) -> None:
    """The rest is not written into the conversation begun again: it would hold only the
    turn's tail."""
    conv = f"erased-{tmp_path.name}"
    other = Client(url, token=TOKEN_ACME, namespace="acme")
    fired: list[int] = []

    def between(k: int) -> None:
        if k == 1 and not fired:  # the first chunk is stored, the second not sent yet
            fired.append(len(log_pages(other, conv)))
            other.delete_conversation(conv)

    client, _sizes, statuses = _recording(url, between)
    with client, other:
        with pytest.raises(HistoryErased) as err:
            asyncio.run(TiermemSession(client, conv).add_items(_turn()))
        assert 0 < fired[0] < len(_turn())
        assert (err.value.conversation_id, err.value.position, err.value.written) == (conv, fired[0], fired[0])
        assert "was erased while add_items wrote it in chunks" in str(err.value)
        assert log_pages(client, conv) == []  # nothing begun again
    assert statuses[-1] == httpx.codes.CONFLICT
