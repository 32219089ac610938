"""The HTTP request models take numbers and booleans as their JSON types alone (strict):
a JSON `true`/`false` or a string of digits sent for a number, or a number or string for a
boolean, is a 422 naming the field and the type expected, and nothing is written (every
table of the real SQLite file compared before and after). An integer field takes no
fraction; a float field still takes a JSON integer. Two refusals name the field the caller
sent: a single append's message field named `conversation_id` is located in the body (not
at the path's id), and a prune age past the library's bound names `older_than_seconds`
(not the library's argument, `older_than`).

Fails on the code before: pydantic's lax mode read `true` as 1, `false` as 0 and `"5"` as 5
(`{"older_than_seconds": true}` erased every conversation idle for a second; `up_to: false`
made a fork; `expect_position: true` appended at position 1), or the library refused the
number it was handed under its own message; the single append's field was located at
`["path", "conversation_id"]`, the prune age at `["body", "older_than"]`."""

from __future__ import annotations

import copy
import inspect
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from client_helpers import CONV, NS, QUERY, TRIP, served
from pydantic import BaseModel
from service_helpers import TOKEN_ACME, bearer

from tiermem import Memory
from tiermem.memory import MAX_AGE_S
from tiermem.service import schemas
from tiermem.tiers.embed_onnx import FastEmbedder

CONV_URL = f"/v1/conversations/{CONV}"
MESSAGE = {"role": "user", "content": "And a table for two in Alfama on the 15th."}
BAD_REQUEST = 422

# the kinds of field, and pydantic's strict refusal of each: (type, msg)
INTEGER, NUMBER, BOOLEAN = "integer", "number", "boolean"
REFUSAL = {
    INTEGER: ("int_type", "Input should be a valid integer"),
    NUMBER: ("float_type", "Input should be a valid number"),
    BOOLEAN: ("bool_type", "Input should be a valid boolean"),
}

# (route, the rest of a valid body, the field's location in the body, its kind)
FIELDS: list[tuple[str, dict[str, Any], tuple[str | int, ...], str]] = [
    # lax: `true` read as 1 s, and every conversation idle for a second erased
    ("/v1/prune", {}, ("older_than_seconds",), NUMBER),
    # lax: `false` read as 0, a fork made of position 0
    (f"{CONV_URL}/fork", {}, ("up_to",), INTEGER),
    # lax: `true` pinned position 1
    (f"{CONV_URL}/pins", {"priority": 5}, ("position",), INTEGER),
    # lax: `"5"` pinned at priority 5
    (f"{CONV_URL}/pins", {"position": 0}, ("priority",), INTEGER),
    # lax: `true` folded positions 0..1 under the summary
    (f"{CONV_URL}/checkpoints", {"summary": "Lisbon trip, TAP, no red-eyes."}, ("position",), INTEGER),
    # lax: `true` read as a budget of 1 token, refused by the planner under its own message
    (f"{CONV_URL}/context", {"query": QUERY}, ("budget",), INTEGER),
    # lax: `"2"` read as two cache marks
    (f"{CONV_URL}/context", {"format": "anthropic"}, ("max_breakpoints",), INTEGER),
    # lax: `1`/`"true"` read as true, `0` as false
    (f"{CONV_URL}/context", {"query": QUERY}, ("namespace_recall",), BOOLEAN),
    # lax: as namespace_recall
    (f"{CONV_URL}/context", {"query": QUERY}, ("truncate_latest",), BOOLEAN),
    # lax: `true` answered one hit
    ("/v1/search", {"q": QUERY}, ("k",), INTEGER),
    # lax: `true` appended on condition of position 1
    (f"{CONV_URL}/messages", dict(MESSAGE), ("expect_position",), INTEGER),
    # lax: `true` stored the message at 1970-01-01 00:00:01
    (f"{CONV_URL}/messages", dict(MESSAGE), ("created_at",), NUMBER),
    # lax: as the single append's
    (f"{CONV_URL}/messages:batch", {"messages": [dict(MESSAGE)]}, ("expect_position",), INTEGER),
    # lax: a batch message's envelope, as the single append's
    (f"{CONV_URL}/messages:batch", {"messages": [dict(MESSAGE)]}, ("messages", 0, "created_at"), NUMBER),
]

# (the value sent, the kinds of field it is refused for)
VALUES: list[tuple[Any, tuple[str, ...]]] = [
    (True, (INTEGER, NUMBER)),  # a JSON boolean is no number (the library's check_int refuses it too)
    (False, (INTEGER, NUMBER)),  # ... false neither: lax read it as 0
    ("5", (INTEGER, NUMBER)),  # a string of digits is text, however it reads
    (5.5, (INTEGER,)),  # a fraction is no integer
    (5.0, (INTEGER,)),  # an integral float neither, as the library's check_int has it
    (1, (BOOLEAN,)),  # a number is no boolean: lax read 1 as true
    (0, (BOOLEAN,)),  # ... and 0 as false
    ("true", (BOOLEAN,)),  # text is no boolean: lax read "true" (and "yes", "on") as true
]

CASES = [
    pytest.param(route, base, loc, kind, value, id=f"{route.rsplit('/', 1)[-1]}.{'.'.join(map(str, loc))}={value!r}")
    for route, base, loc, kind in FIELDS for value, kinds in VALUES if kind in kinds
]


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("service-strict") / "data", embedder) as got:
        yield got


def _with(body: dict[str, Any], loc: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """A copy of `body` with `value` at `loc`."""
    out = copy.deepcopy(body)
    at: Any = out
    for part in loc[:-1]:
        at = at[part]
    at[loc[-1]] = value
    return out


def _post(url: str, route: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}{route}", json=body, headers=bearer(TOKEN_ACME, NS))


def _store(db_path: Path) -> dict[str, list[str]]:
    """Every row of every ordinary table of the store (virtual ones are read through their
    shadow tables), to compare before and after a refusal: nothing written means equal."""
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                            "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'")]
        return {n: sorted(map(repr, conn.execute(f'SELECT * FROM "{n}"'))) for n in names}


@pytest.mark.parametrize(("route", "base", "loc", "kind", "value"), CASES)
def test_a_number_or_boolean_of_another_json_type_is_refused(url_mem: tuple[str, Memory], route: str,
                                                             base: dict[str, Any], loc: tuple[str | int, ...],
                                                             kind: str, value: Any) -> None:
    url, mem = url_mem
    before, conversations = _store(mem.config.db_path), mem.conversations(NS)
    r = _post(url, route, _with(base, loc, value))
    assert r.status_code == BAD_REQUEST, r.text
    type_, msg = REFUSAL[kind]
    assert r.json()["detail"] == [{"loc": ["body", *loc], "msg": msg, "type": type_}]
    assert _store(mem.config.db_path) == before
    assert mem.conversations(NS) == conversations
    assert len(before["messages"]) >= len(TRIP)  # the comparison reads the store the app writes


# (route, body, status): each a number of its JSON type, an integer for a float field included
ACCEPTED: list[tuple[str, dict[str, Any], int]] = [
    # an integer for a float field, the bound itself: taken (and nothing is that old)
    ("/v1/prune", {"older_than_seconds": int(MAX_AGE_S)}, 200),
    ("/v1/prune", {"older_than_seconds": MAX_AGE_S - 0.5}, 200),  # a fraction of a second
    (f"{CONV_URL}/pins", {"position": 0, "priority": 5}, 200),  # integers
    (f"{CONV_URL}/context", {"query": QUERY, "budget": 600, "namespace_recall": False,
                             "truncate_latest": True}, 200),  # an integer and booleans
    (f"{CONV_URL}/context", {"format": "anthropic", "max_breakpoints": 2}, 200),  # an integer of the Anthropic form
    ("/v1/search", {"q": QUERY, "k": 3}, 200),  # an integer
    ("/v1/conversations/strict-single/messages", {**MESSAGE, "created_at": 1000, "expect_position": 0},
     201),  # an integer time, and a condition
    ("/v1/conversations/strict-batch/messages:batch", {"messages": [{**MESSAGE, "created_at": 1000.5}],
                                                       "expect_position": 0}, 201),  # a float time
    (f"{CONV_URL}/fork", {"up_to": 1}, 201),  # an integer
    (f"{CONV_URL}/checkpoints", {"summary": "Lisbon, TAP, daytime.", "position": 1}, 201),  # an integer
]


@pytest.mark.parametrize(("route", "body", "status"), ACCEPTED)
def test_numbers_and_booleans_of_their_own_type_are_taken(url_mem: tuple[str, Memory], route: str,
                                                          body: dict[str, Any], status: int) -> None:
    url, _mem = url_mem
    r = _post(url, route, body)
    assert r.status_code == status, r.text


def test_an_integer_time_is_stored_as_sent(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    r = _post(url, "/v1/conversations/strict-time/messages", {**MESSAGE, "created_at": 1000})
    assert r.status_code == 201, r.text
    assert [m.created_at for m in mem.history("strict-time", namespace=NS)] == [1000.0]


def test_a_message_field_named_like_the_path_id_is_located_in_the_body(url_mem: tuple[str, Memory]) -> None:
    """The single append's body is the message: its field `conversation_id` is the body's,
    not the path's id (the batch names it `messages[0].conversation_id`)."""
    url, mem = url_mem
    before = _store(mem.config.db_path)
    r = _post(url, f"{CONV_URL}/messages", {**MESSAGE, "conversation_id": "elsewhere"})
    assert r.status_code == BAD_REQUEST, r.text
    (item,) = r.json()["detail"]
    assert item["loc"] == ["body", "conversation_id"]
    assert item["msg"].startswith("is not a field of a user message")
    batch = _post(url, f"{CONV_URL}/messages:batch", {"messages": [{**MESSAGE, "conversation_id": "elsewhere"}]})
    assert batch.json()["detail"][0]["loc"] == ["body", "messages", 0, "conversation_id"]
    assert _store(mem.config.db_path) == before
    # the path's own id is still located at the path
    bad_id = _post(url, "/v1/conversations/-bad/messages", MESSAGE)
    assert bad_id.status_code == BAD_REQUEST, bad_id.text
    assert bad_id.json()["detail"][0]["loc"] == ["path", "conversation_id"]


def test_a_prune_age_past_the_bound_names_the_field_sent(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    before = _store(mem.config.db_path)
    r = _post(url, "/v1/prune", {"older_than_seconds": 1e300})
    assert r.status_code == BAD_REQUEST, r.text
    (item,) = r.json()["detail"]
    assert item["loc"] == ["body", "older_than_seconds"]
    assert f"{MAX_AGE_S:.0f}" in item["msg"]
    assert _store(mem.config.db_path) == before


# every request model of the service, by name: a new one must be added here (and be strict)
REQUEST_MODELS = {"MessageIn", "ConditionalMessageIn", "BatchIn", "ContextIn", "ForkIn", "PinIn", "CheckpointIn",
                  "PruneIn", "SearchIn"}


def test_every_request_model_is_strict() -> None:
    models = {name for name, cls in inspect.getmembers(schemas, inspect.isclass)
              if issubclass(cls, BaseModel) and name.endswith("In") and cls.__module__ == schemas.__name__}
    assert models == REQUEST_MODELS
    assert {name for name in models if getattr(schemas, name).model_config.get("strict") is not True} == set()
