"""A whole Responses `Response` (what the openai SDK's `client.responses.create(...)`
returns), appended where a message goes, is refused saying what to append: its output
items, `append_many(conversation_id, response.output)` (each item is a message). Before,
the object, its `model_dump()` or its JSON over HTTP was refused `role: Field required (a
chat message needs a role, a Responses item a type)`, which named a field the caller never
wrote and not the items inside. Nothing is written; the items themselves still append, the
way the error says, by the library, `Client` and HTTP. The SDK's own classes (the installed
`openai` package, no network), a real Memory (cold log), the real app over real HTTP."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import sdk_corpus as corpus
from hash_embedder import HashEmbedder
from openai.types.responses import Response
from service_helpers import READ_TIMEOUT_S, serve_in_thread

from tiermem import Config, Memory
from tiermem.client import Client
from tiermem.tiers.errors import ValidationError

pytestmark = pytest.mark.usefixtures("clean_env")

# a reply with reasoning, two parallel calls, a web search and the final message: 5 items
RESPONSE: Response = corpus._response(corpus.RESPONSE_OUTPUT + corpus.RESPONSE_FINAL)
WHAT = "whole Responses response"  # what every refusal says the value is
SAYS = "append_many(conversation_id, response.output)"  # ... and what to append instead
OLD_REFUSAL = "Field required"  # the refusal before, naming `role`

# (what the caller passed): each a whole response, however serialized
CASES: list[Callable[[], Any]] = [
    # the SDK object itself
    lambda: RESPONSE,
    # its model_dump(), nulls and all (`metadata` and `created_at` read as the envelope's)
    lambda: RESPONSE.model_dump(),
    # its JSON form, as an HTTP body or a stored JSON file has it
    lambda: RESPONSE.model_dump(mode="json"),
    # nulls left out
    lambda: RESPONSE.model_dump(exclude_none=True),
    # a response with no items yet (status in_progress): still a response, not a message
    lambda: corpus._response([]).model_dump(mode="json"),
]
IDS = ["object", "model_dump", "json", "exclude_none", "no_output"]


def _memory(tmp_path: Path) -> Memory:
    return Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False, background_indexing=False)


def _says_it(err: ValidationError, field: str = "message") -> None:
    assert err.field == field and WHAT in err.problem and SAYS in err.problem, err
    assert OLD_REFUSAL not in str(err)


@pytest.mark.parametrize("given", CASES, ids=IDS)
def test_append_says_to_append_the_output_items(tmp_path: Path, given: Callable[[], Any]) -> None:
    with _memory(tmp_path) as mem:
        with pytest.raises(ValidationError) as got:
            mem.append("trip", given())
        _says_it(got.value)
        # in a batch: the same, named by its place
        with pytest.raises(ValidationError) as got:
            mem.append_many("trip", [{"role": "user", "content": "Tokyo?"}, given()])
        _says_it(got.value, "messages[1].message")
        assert mem.conversations() == []  # nothing written
        # what the error says works: each output item is one message, stored as dumped
        assert mem.append_many("trip", RESPONSE.output) == list(range(len(RESPONSE.output)))
        assert [m.body["type"] for m in mem.history("trip")] == [i.type for i in RESPONSE.output]


@pytest.mark.parametrize("given", [c for c, i in zip(CASES, IDS, strict=True) if i != "object"],
                         ids=[i for i in IDS if i != "object"])  # JSON bodies
def test_the_service_says_it_too(tmp_path: Path, given: Callable[[], Any]) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with _memory(tmp_path) as mem, serve_in_thread(cfg, mem, auth=False) as url:
        body = given()
        r = httpx.post(f"{url}/v1/conversations/trip/messages", json=body, timeout=READ_TIMEOUT_S)
        assert r.status_code == 422, r.text
        assert WHAT in r.text and SAYS in r.text and OLD_REFUSAL not in r.text, r.text
        r = httpx.post(f"{url}/v1/conversations/trip/messages:batch", json={"messages": [body]},
                       timeout=READ_TIMEOUT_S)
        assert r.status_code == 422 and WHAT in r.text and OLD_REFUSAL not in r.text, r.text
        assert mem.conversations() == []  # nothing written
        # what it says works over HTTP: the items, POSTed to the batch route
        items = [i.model_dump(mode="json") for i in RESPONSE.output]
        r = httpx.post(f"{url}/v1/conversations/trip/messages:batch", json={"messages": items},
                       timeout=READ_TIMEOUT_S)
        assert r.status_code in (200, 201), r.text
        assert len(mem.history("trip")) == len(RESPONSE.output)


@pytest.mark.parametrize("given", CASES, ids=IDS)
def test_the_client_says_it_too(tmp_path: Path, given: Callable[[], Any]) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with _memory(tmp_path) as mem, serve_in_thread(cfg, mem, auth=False) as url, Client(url) as client:
        with pytest.raises(ValidationError) as got:
            client.append("trip", given())
        _says_it(got.value)
        with pytest.raises(ValidationError) as got:
            client.append_many("trip", [given()])
        _says_it(got.value, "messages[0].message")
        assert mem.conversations() == []  # nothing written
        assert client.append_many("trip", RESPONSE.output) == list(range(len(RESPONSE.output)))
        assert [m.body["type"] for m in mem.history("trip")] == [i.type for i in RESPONSE.output]
