"""One integer limit on every way in: an integer of up to `MAX_JSON_INT_DIGITS` (1,000)
digits anywhere in what a message stores (a part, an Anthropic tool_use's input, a hosted
tool item's payload, the metadata) is stored by the library and by the served Client
alike, and read back exactly; one of more digits is refused by both, a ValidationError
naming the place down to the integer and the limit, nothing written. A row the library
stored can be copied back through the Client.

Fails on the code before: the library stored integers up to Python's 4,300-digit limit
(past it, an error quoting Python's advice), while the HTTP body guard refused any of more
than 40 digits naming only `body`: a uint256 amount (78 digits) stored in process was
refused over HTTP, and a row the library stored read fine over HTTP but could not be
appended again through the Client.

A real uvicorn serving the real app in this process over real SQLite; the library calls
go to the same Memory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hash_embedder import HashEmbedder
from service_helpers import TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters.anthropic import from_anthropic
from tiermem.client import Client
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.models import MAX_JSON_INT_DIGITS

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
U256 = 2**256 - 1  # an ERC-20 "max allowance": 78 digits
AT_LIMIT = 10**MAX_JSON_INT_DIGITS - 1  # MAX_JSON_INT_DIGITS nines
PAST_LIMIT = -(10**MAX_JSON_INT_DIGITS)  # one digit more (the sign is no digit)
PAST_PYTHON = 10**4400  # past Python's own 4,300-digit limit for str(int)
LIMIT_WORDS = f"more than the limit of {MAX_JSON_INT_DIGITS:,} (MAX_JSON_INT_DIGITS)"


def _anthropic(v: int) -> dict[str, Any]:
    return {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "approve", "input": {"spender": "0xabc", "amount": v}}]}


def _hosted_item(v: int) -> dict[str, Any]:
    # a hosted-tool item of the Agents SDK, stored whole: its `extra` is caller data
    return {"type": "mcp_call", "id": "mcp_1", "server_label": "chain", "name": "approve", "arguments": "{}",
            "output": None, "error": None, "approval_request_id": None, "extra": {"amount": v}}


def _part(v: int) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": "approve max", "n": v}]}


PLAIN = {"role": "user", "content": "approve max"}

# A way a message holding `v` is appended: (via the library's namespaced Memory, via the
# Client), each appending to the conversation given; and the place the refusal names
# (how the refused field ends: the Client's batch names `messages[0]` before it).
Way = tuple[Callable[[Any, str, int], Any], Callable[[Client, str, int], Any], str]
WAYS: dict[str, Way] = {
    # a key of a content part: the library stored any int, HTTP refused past 40 digits
    "part": (lambda m, c, v: m.append(c, _part(v)), lambda cl, c, v: cl.append(c, _part(v)), "content[0].n"),
    # the metadata
    "metadata": (lambda m, c, v: m.append(c, PLAIN, metadata={"amount": v}),
                 lambda cl, c, v: cl.append(c, PLAIN, metadata={"amount": v}), "metadata.amount"),
    # an Anthropic tool_use's input, which becomes the arguments' JSON text when stored
    "anthropic-input": (lambda m, c, v: m.append_many(c, from_anthropic(_anthropic(v))),
                        lambda cl, c, v: cl.append_many(c, [_anthropic(v)], format="anthropic"),
                        "content[0].input.amount"),
    # an Agents SDK hosted-tool item, through TiermemSession over either
    "agents-item": (lambda m, c, v: _add_items(m, c, v), lambda cl, c, v: _add_items(cl, c, v), "extra.amount"),
}
# each value: (the integer, its digits, whether it is taken)
VALUES: dict[str, tuple[int, int, bool]] = {
    "uint256": (U256, 78, True),  # refused over HTTP before (78 > 40 digits)
    "at-limit": (AT_LIMIT, MAX_JSON_INT_DIGITS, True),  # the most digits taken
    "past-limit": (PAST_LIMIT, MAX_JSON_INT_DIGITS + 1, False),  # stored by the library before
    # refused by the library before, naming Python's limit; over the Client's Agents
    # session a bare ValueError (json.dumps sizing the batch)
    "past-python": (PAST_PYTHON, 4401, False),
}


def _add_items(memory: Any, conv: str, v: int) -> None:
    pytest.importorskip("agents")
    from tiermem.adapters.openai_agents import TiermemSession

    asyncio.run(TiermemSession(memory, conv).add_items([_hosted_item(v)]))


def _holds(body: Any, v: int) -> bool:
    """Whether `v` is somewhere in `body` (a stored row's body or metadata), or its digits
    are in a string there (a tool_use's input is stored as JSON text)."""
    if isinstance(body, dict):
        return any(_holds(x, v) for x in body.values())
    if isinstance(body, list):
        return any(_holds(x, v) for x in body)
    if isinstance(body, str):
        return str(v) in body
    return type(body) is int and body == v


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Memory, Client]]:
    data = tmp_path_factory.mktemp("ints") / "data"
    cfg = Config(data_dir=data, auth_tokens={TOKEN_ACME: NS})
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url, Client(url, token=TOKEN_ACME, namespace=NS) as client:
        yield mem, client


@pytest.mark.parametrize("value_name", list(VALUES))
@pytest.mark.parametrize("way_name", list(WAYS))
def test_library_and_client_take_and_refuse_the_same_integers(served: tuple[Memory, Client], way_name: str,
                                                             value_name: str) -> None:
    mem, client = served
    lib = mem.namespaced(NS)
    via_lib, via_client, place = WAYS[way_name]
    v, digits, taken = VALUES[value_name]
    for side, append, target in (("library", via_lib, lib), ("client", via_client, client)):
        conv = f"{way_name}-{value_name}-{side}"
        if taken:
            append(target, conv, v)
            (row,) = lib.history(conv)  # stored once, the integer exactly
            assert _holds(row.body, v) or _holds(row.metadata, v), (side, row)
            (over_http,) = client.history(conv)  # and read back over HTTP exactly
            assert _holds(over_http.body, v) or _holds(over_http.metadata, v), (side, over_http)
        else:
            with pytest.raises(ValidationError) as caught:
                append(target, conv, v)
            err = caught.value
            assert err.field.endswith(place), (side, err.field)  # the place down to the integer
            assert f"is an integer of {digits:,} digits, {LIMIT_WORDS}" in err.problem, (side, err)
            assert conv not in lib.conversations(), side  # nothing written


# what the library stores, copied back through the Client as a migration or a LangGraph
# edit does: (the message, its metadata)
COPIES: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [
    # a uint256 in the metadata: answered over HTTP, refused when sent back before
    ("copy-uint256-metadata", PLAIN, {"amount_wei": U256}),
    # the most digits taken, in a part
    ("copy-at-limit-part", _part(AT_LIMIT), None),
    # both, negative
    ("copy-negative-both", _part(-U256), {"n": -AT_LIMIT}),
]


@pytest.mark.parametrize(("conv", "message", "metadata"), COPIES, ids=[c[0] for c in COPIES])
def test_a_row_the_library_stored_is_copied_back_through_the_client(
        served: tuple[Memory, Client], conv: str, message: dict[str, Any], metadata: dict[str, Any] | None) -> None:
    mem, client = served
    mem.namespaced(NS).append(conv, message, metadata=metadata)
    (row,) = client.history(conv)
    client.append(conv + "-copy", row.body, metadata=row.metadata)
    (copied,) = client.history(conv + "-copy")
    assert copied.body == message and copied.metadata == metadata
