"""The client's conditional appends, over real HTTP (the real app on a real SQLite file;
a real TCP proxy, `flaky_proxy`, for a server that does not say it takes them and for a
lost answer).

- `append`, `append_many` and `append_outcome` (and `AsyncClient`'s) take
  `expect_position` and `expect_incarnation`; a match writes, `append_outcome` answers the
  incarnation to chain; the service's 409 is raised as the library raises it
  (`PositionMismatch`: the positions expected and found, the incarnation sent) and
  nothing is written.
- Conditions are checked before sending as the library checks them (nothing sent).
- A server that does not say `conditional_appends` (its /v1/limits without the flag, or
  without the route): refused before the append is sent, naming the server's lack.
- `retries`: a conditional append whose answer was lost is sent again under one key and
  answered the first outcome, stored once (not a 409 for its own rows).

Fails on the code before: the clients took no conditions (TypeError) and had no
`append_outcome`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from client_helpers import NS, served
from flaky_proxy import CLOSE, flaky_proxy
from service_helpers import TOKEN_ACME

from tiermem import Memory
from tiermem.client import INCARNATION_PATTERN, REPLAYED_HEADER, AsyncClient, Client
from tiermem.errors import PositionMismatch, ValidationError
from tiermem.service.schemas import INCARNATION_PATTERN as SERVICE_INCARNATION_PATTERN
from tiermem.service.schemas import REPLAYED_HEADER as SERVICE_REPLAYED_HEADER
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import MAX_POSITION

MSG = {"role": "user", "content": "Book the 9:40 to Lisbon, please."}
OTHER = {"role": "assistant", "content": "Booked the 9:40."}
UNKNOWN_INCARNATION = "0" * 32
NO_WAIT_S = 0.0  # max_retry_wait_s: retries at once
RETRIES = 2
# what an older server's /v1/limits does not say
HIDDEN = ("conditional_appends",)


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("client-cond") / "data", embedder) as got:
        yield got


@pytest.fixture(scope="module")
def old_url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("client-cond-old") / "data", embedder, drop_paths=["/v1/limits"]) as got:
        yield got[0]


def _client(url: str, **kw: Any) -> Client:
    return Client(url, token=TOKEN_ACME, namespace=NS, max_retry_wait_s=NO_WAIT_S, **kw)


def _count(mem: Memory, conv: str) -> int:
    return len(mem.history(conv, namespace=NS)) if conv in mem.conversations(NS) else 0


def test_the_constants_are_the_services() -> None:
    assert INCARNATION_PATTERN.pattern == SERVICE_INCARNATION_PATTERN
    assert REPLAYED_HEADER == SERVICE_REPLAYED_HEADER


# each way to append: (id, the call, how many messages it sends)
SENDS: list[tuple[str, Callable[..., Any], int]] = [
    ("append", lambda c, conv, **kw: c.append(conv, MSG, **kw), 1),
    ("append_many", lambda c, conv, **kw: c.append_many(conv, [MSG, OTHER], **kw), 2),
    ("append_outcome", lambda c, conv, **kw: c.append_outcome(conv, [MSG, OTHER], **kw), 2),
]


@pytest.mark.parametrize(("name", "send", "n"), SENDS, ids=[s[0] for s in SENDS])
def test_a_match_writes_and_a_mismatch_raises_position_mismatch(
        url_mem: tuple[str, Memory], name: str, send: Callable[..., Any], n: int) -> None:
    url, mem = url_mem
    conv = f"cond-{name}"
    with _client(url) as client:
        first = client.append_outcome(conv, [MSG], expect_position=0)
        assert first.positions == [0] and not first.replayed
        assert first.incarnation is not None and INCARNATION_PATTERN.fullmatch(first.incarnation)
        send(client, conv, expect_position=1, expect_incarnation=first.incarnation)
        assert _count(mem, conv) == 1 + n
        with pytest.raises(PositionMismatch) as behind:
            send(client, conv, expect_position=1)
        assert (behind.value.conversation_id, behind.value.expected, behind.value.found) == (conv, 1, 1 + n)
        assert behind.value.expected_incarnation is None and behind.value.field == "expect_position"
        with pytest.raises(PositionMismatch) as gone:
            send(client, conv, expect_position=1 + n, expect_incarnation=UNKNOWN_INCARNATION)
        assert (gone.value.expected, gone.value.found, gone.value.expected_incarnation) == \
            (1 + n, None, UNKNOWN_INCARNATION)
        # a token it never had: not called erased, both incarnations named
        assert gone.value.found_incarnation == first.incarnation
        assert (f"expected to be incarnation '{UNKNOWN_INCARNATION}', going on at position {1 + n}, but its "
                f"incarnation is '{first.incarnation}'; nothing was written") in str(gone.value)
    assert _count(mem, conv) == 1 + n  # nothing written by the refused ones


def test_an_erased_and_recreated_conversation_is_another_incarnation(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    with _client(url) as client:
        old = client.append_outcome("reborn", [MSG], expect_position=0).incarnation
        client.delete_conversation("reborn")
        new = client.append_outcome("reborn", [MSG], expect_position=0).incarnation
        assert new != old
        with pytest.raises(PositionMismatch) as got:
            client.append("reborn", OTHER, expect_position=1, expect_incarnation=old)
        assert got.value.found is None
        assert client.append("reborn", OTHER, expect_position=1, expect_incarnation=new) == 1
    assert _count(mem, "reborn") == 2


# (id, the conditions, the field refused)
BAD: list[tuple[str, dict[str, Any], str]] = [
    ("negative position", {"expect_position": -1}, "expect_position"),
    ("position past the last", {"expect_position": MAX_POSITION + 1}, "expect_position"),
    ("position a string", {"expect_position": "3"}, "expect_position"),
    ("incarnation without position", {"expect_incarnation": UNKNOWN_INCARNATION}, "expect_incarnation"),
    ("incarnation a store key", {"expect_position": 0, "expect_incarnation": "trip-1"}, "expect_incarnation"),
    ("incarnation not a string", {"expect_position": 0, "expect_incarnation": 7}, "expect_incarnation"),
]


@pytest.mark.parametrize(("case", "conditions", "field"), BAD, ids=[b[0] for b in BAD])
def test_bad_conditions_are_refused_before_sending(url_mem: tuple[str, Memory], case: str,
                                                   conditions: dict[str, Any], field: str) -> None:
    url, _mem = url_mem
    sent: list[httpx.Request] = []
    with httpx.Client(event_hooks={"request": [sent.append]}) as http, _client(url, http_client=http) as client:
        for _name, send, _n in SENDS:
            with pytest.raises(ValidationError) as got:
                send(client, "bad", **conditions)
            assert got.value.field == field
    assert sent == []


@pytest.mark.parametrize("older", ["limits without the flag", "no /v1/limits"])
def test_a_server_that_does_not_say_it_gets_no_conditional_append(
        url_mem: tuple[str, Memory], old_url: str, older: str) -> None:
    url, _mem = url_mem
    upstream, lack = (url, "does not say conditional_appends") if older == "limits without the flag" \
        else (old_url, "serves no /v1/limits")
    with flaky_proxy(upstream, CLOSE, times=0, hide=HIDDEN) as proxy, _client(proxy.url) as client:
        for _name, send, _n in SENDS:
            with pytest.raises(ValidationError) as got:
                send(client, "old", expect_position=0)
            assert got.value.field == "expect_position" and lack in got.value.problem
            assert "nothing was sent" in got.value.problem
        assert proxy.appends == []  # not one append reached the server
        # an unconditional append still goes
        assert client.append("old", MSG) == 0
    assert proxy.appends == [None]


def test_a_lost_answer_is_retried_under_one_key_and_answers_the_first_outcome(url_mem: tuple[str, Memory]) -> None:
    """The first attempt committed: sent again with its condition as it was, the replay
    under the key answers the first outcome (not a 409 for its own rows)."""
    url, mem = url_mem
    with _client(url) as direct:
        token = direct.append_outcome("lost", [MSG], expect_position=0).incarnation
    with flaky_proxy(url, CLOSE) as proxy, _client(proxy.url, retries=RETRIES) as client:
        out = client.append_outcome("lost", [OTHER], expect_position=1, expect_incarnation=token)
    assert out.positions == [1] and out.replayed and out.incarnation == token
    assert len(proxy.appends) == 2 and proxy.appends[0] == proxy.appends[1] is not None
    assert _count(mem, "lost") == 2


def test_without_retries_a_lost_answer_is_raised(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    with flaky_proxy(url, CLOSE) as proxy, _client(proxy.url) as client, pytest.raises(httpx.RemoteProtocolError):
        client.append("lost-once", MSG, expect_position=0)
    assert proxy.appends == [None] and _count(mem, "lost-once") == 1


def test_the_async_client_too(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem

    async def run() -> tuple[list[int], Any, type[Exception] | None]:
        async with AsyncClient(url, token=TOKEN_ACME, namespace=NS) as client:
            out = await client.append_outcome("async", [MSG, OTHER], expect_position=0)
            one = await client.append("async", MSG, expect_position=2, expect_incarnation=out.incarnation)
            many = await client.append_many("async", [MSG], expect_position=3)
            try:
                await client.append("async", MSG, expect_position=0)
            except PositionMismatch as exc:
                return [*out.positions, one, *many], exc.found, None
            return [], None, None

    assert asyncio.run(run()) == ([0, 1, 2, 3], 4, None)
    assert _count(mem, "async") == 4
