"""A call's time zone over every way in: `POST .../context` takes `"timezone"` (documented
in the OpenAPI schema; a bad zone is a 422 naming it, nothing written), the Python client
passes it (`Client.context` / `AsyncClient.context`), and so does the MCP `context` tool.
Each answers what `Memory.context(timezone=)` answers: the Los Angeles user's headings and
"yesterday" are Los Angeles', the Tokyo user's Tokyo's, on one served Memory (config UTC).
Real HTTP to `tiermem serve`'s app on a real SQLite file; the real `mcp` package.

Fails on the code before: the route refused `timezone` (an unknown field), the client and
the tool took no such argument."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from client_helpers import NS, served
from service_helpers import TOKEN_ACME, bearer
from test_timezone_per_call import DAYS, LA, QUESTION, TOKYO, TURNS, WITHIN_YESTERDAY

from tiermem import Memory
from tiermem.client import AsyncClient, Client
from tiermem.planner.plan import Context
from tiermem.service.schemas import finite
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ValidationError

CONV = "days"
BUDGET = 180  # tokens: a tail of one turn, the earlier ones retrieved under their days' headings
CONTEXT = f"/v1/conversations/{CONV}/context"


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("timezone-wire") / "data", embedder) as (url, mem):
        mem.append_many(CONV, [{"role": r, "content": t, "created_at": ts} for ts, r, t in TURNS],
                        session_id="week", namespace=NS)
        yield url, mem


@pytest.fixture
def http(url_mem: tuple[str, Memory]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url_mem[0], timeout=60, headers=bearer(TOKEN_ACME, NS)) as c:
        yield c


def _library(mem: Memory, zone: str) -> Context:
    # a what-if plan (record=False) leaves the epoch as the call under test finds it
    return mem.context(CONV, QUESTION, BUDGET, namespace=NS, timezone=zone, record=False)


def _users_days(messages: list[dict[str, Any]], reasons: list[str], zone: str) -> None:
    """The answer is `zone`'s: its heading of the dentist's day, and 'yesterday' credited in full."""
    heading = DAYS[zone][2]
    assert any(heading in str(m["content"]) for m in messages), messages
    assert any(WITHIN_YESTERDAY in r for r in reasons)


def _wire(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return json.loads(json.dumps(finite(messages)))  # type: ignore[no-any-return]


@pytest.mark.parametrize("zone", [
    LA,  # the Los Angeles user: 03 Dec -08:00, yesterday is Thursday there
    TOKYO,  # the Tokyo user on the same server: 03 Dec +09:00, yesterday is Friday there
])
def test_the_route_takes_the_users_zone(url_mem: tuple[str, Memory], http: httpx.Client, zone: str) -> None:
    want = _library(url_mem[1], zone)
    r = http.post(CONTEXT, json={"query": QUESTION, "budget": BUDGET, "timezone": zone})
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["messages"] == _wire(want.messages)
    _users_days(got["messages"], [it["reason"] for it in got["plan"]["items"]], zone)


# (the body's timezone) -- each a 422 naming `timezone`, nothing written
BAD_ZONES: list[Any] = [
    "Mars/Olympus_Mons",  # no such zone (refused by Memory.context)
    "",  # empty
    "../../etc/passwd",  # a path, not a key
    "A" * 65,  # past MAX_ZONE_NAME_CHARS (refused by the schema)
    42,  # not a string
    ["UTC"],  # a list
]


@pytest.mark.parametrize("zone", BAD_ZONES)
def test_the_route_refuses_a_bad_zone(url_mem: tuple[str, Memory], http: httpx.Client, zone: Any) -> None:
    before = http.get(f"/v1/conversations/{CONV}/history").json()["messages"]
    r = http.post(CONTEXT, json={"query": QUESTION, "budget": BUDGET, "timezone": zone})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "timezone"]
    assert http.get(f"/v1/conversations/{CONV}/history").json()["messages"] == before


def test_the_openapi_schema_documents_the_zone(http: httpx.Client) -> None:
    spec = http.get("/openapi.json").json()
    field = spec["components"]["schemas"]["ContextIn"]["properties"]["timezone"]
    assert "IANA" in field["description"] and "epoch" in field["description"]
    assert {"type": "string", "maxLength": 64} in field["anyOf"]


@pytest.mark.parametrize("zone", [
    LA,  # the Los Angeles user
    TOKYO,  # the Tokyo user
])
def test_the_clients_pass_the_zone(url_mem: tuple[str, Memory], zone: str) -> None:
    url, mem = url_mem
    want = _library(mem, zone)
    with Client(url, token=TOKEN_ACME, namespace=NS) as client:
        got = client.context(CONV, QUESTION, BUDGET, timezone=zone)
    assert got.messages == _wire(want.messages)
    _users_days(got.messages, [it.reason for it in got.plan.items], zone)

    async def run() -> Context:
        async with AsyncClient(url, token=TOKEN_ACME, namespace=NS) as client:
            return await client.context(CONV, QUESTION, BUDGET, timezone=zone)

    want = _library(mem, zone)
    assert asyncio.run(run()).messages == _wire(want.messages)


@pytest.mark.parametrize("zone", BAD_ZONES)
def test_the_client_refuses_a_bad_zone(url_mem: tuple[str, Memory], zone: Any) -> None:
    with Client(url_mem[0], token=TOKEN_ACME, namespace=NS) as client, pytest.raises(ValidationError) as e:
        client.context(CONV, QUESTION, BUDGET, timezone=zone)
    assert e.value.field == "timezone"


@pytest.mark.parametrize(("zone", "ok"), [
    (LA, True),  # the Los Angeles user's days
    (TOKYO, True),  # the Tokyo user's
    ("Mars/Olympus_Mons", False),  # no such zone: a tool error naming the argument
])
def test_the_mcp_tool_takes_the_zone(url_mem: tuple[str, Memory], zone: str, ok: bool) -> None:
    pytest.importorskip("mcp")
    from mcp import Client as McpClient

    from tiermem.adapters.mcp_server import build_server

    mem = url_mem[1]
    view = mem.namespaced(NS)

    async def run() -> Any:
        async with McpClient(build_server(view)) as client:
            return await client.call_tool("context", {"conversation_id": CONV, "query": QUESTION, "budget": BUDGET,
                                                      "timezone": zone})

    want = _library(mem, zone) if ok else None
    r = asyncio.run(run())
    if want is None:
        assert r.is_error and "timezone" in str(r.content)
        return
    assert not r.is_error, r.content
    got = r.structured_content
    assert got["messages"] == _wire(want.messages)
    _users_days(got["messages"], [it["reason"] for it in got["plan"]["items"]], zone)


