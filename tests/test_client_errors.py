"""The service's refusals reach a client caller as the library's exceptions: a
conversation outside the token's prefix is `ConversationNotFound` exactly as `Memory`
raises it for a missing one; a namespace route outside it, or a bad token,
`ServiceAuthError`; a 422 `ValidationError` naming the field as the service named it,
with nothing written; what `Memory` refuses at its edge is refused before anything is
sent. Real HTTP to `tiermem serve`'s app on a real SQLite file, scoped tokens.

Fails on the code before: there was no `tiermem.client`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from client_helpers import CONV, MAX_CONTENT_BYTES, NS, TRIP, served
from ports import free_port
from service_helpers import TOKEN_ACME, TOKEN_ALICE, TOKEN_GLOBEX

from tiermem import Memory
from tiermem.client import NAMESPACE_HEADER as CLIENT_NAMESPACE_HEADER
from tiermem.client import Client
from tiermem.errors import (
    ConversationNotFound,
    LimitExceeded,
    ServiceAuthError,
    ServiceError,
    ValidationError,
)
from tiermem.service import NAMESPACE_HEADER
from tiermem.tiers.embed_onnx import FastEmbedder

TOO_LONG = "x" * (MAX_CONTENT_BYTES + 1)  # one byte over the server's limit, which the client does not know
LONG_SESSION = "s" * 129  # over BatchIn.session_id's 128 characters


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("client-errors") / "data", embedder) as got:
        yield got


def test_the_client_and_the_service_name_the_same_header() -> None:
    assert CLIENT_NAMESPACE_HEADER == NAMESPACE_HEADER


# (token, namespace the client asks for, the namespace the error names) -- the conversation
# is acme's; none of these may see it
OUTSIDE = [
    (TOKEN_GLOBEX, NS, NS),  # another tenant's token naming acme
    (TOKEN_GLOBEX, None, None),  # ... in its own prefix, where there is no such conversation
    (TOKEN_ALICE, NS, NS),  # a user's token naming her tenant's namespace (its parent)
]


@pytest.mark.parametrize(("token", "namespace", "named"), OUTSIDE)
def test_a_conversation_outside_the_tokens_prefix_is_not_found_as_memory_says(
        url_mem: tuple[str, Memory], token: str, namespace: str | None, named: str | None) -> None:
    with Client(url_mem[0], token=token, namespace=namespace) as client:
        calls: list[Callable[[str], Any]] = [client.history, client.active, lambda c: client.context(c, "card?"),
                                             lambda c: client.search(c, "card number"), client.delete_conversation]
        if namespace is not None:  # in the token's own prefix an append creates the conversation there
            calls.append(lambda c: client.append(c, {"role": "user", "content": "mine now"}))
        for read in calls:
            with pytest.raises(ConversationNotFound) as got:
                read(CONV)
            assert str(got.value) == str(ConversationNotFound(CONV, named))
            assert isinstance(got.value, KeyError) and got.value.conversation_id == CONV
    # nothing was read, written or erased
    assert [m.body for m in url_mem[1].history(CONV, namespace=NS)] == TRIP


def test_a_namespace_route_outside_the_prefix_and_a_bad_token_are_auth_errors(url_mem: tuple[str, Memory]) -> None:
    with Client(url_mem[0], token=TOKEN_GLOBEX, namespace=NS) as client:
        for call in (client.conversations, client.stats, lambda: client.search(None, "card")):
            with pytest.raises(ServiceAuthError) as got:
                call()
            assert got.value.status == 403 and "outside this token's scope" in str(got.value)
            assert isinstance(got.value, PermissionError)
    for token in ("tok-nobody-0123456789abcdef", None):  # an unknown token, and none at all
        with Client(url_mem[0], token=token) as client, pytest.raises(ServiceAuthError) as got:
            client.history(CONV)
        assert got.value.status == 401
    assert url_mem[1].conversations(NS) == [CONV]  # the listing still answers its own token


# (what is sent, the field the service names, the exception class) -- each over a limit
# only the server knows, or a rule only the server applies; none writes anything
SERVER_REFUSALS: list[tuple[Callable[[Client], Any], str, type[ValidationError]]] = [
    # the server's max_content_bytes: Memory's LimitExceeded, its numbers read back from the words
    (lambda c: c.append(CONV, {"role": "user", "content": TOO_LONG}), "content", LimitExceeded),
    # ... in a batch, naming the message by its index; the first one is not written either
    (lambda c: c.append_many(CONV, [{"role": "user", "content": "ok"}, {"role": "user", "content": TOO_LONG}]),
     "messages[1].content", LimitExceeded),
    # an Anthropic block the adapter does not know, named as sent
    (lambda c: c.append_many(CONV, [{"role": "user", "content": [{"type": "hologram"}]}], format="anthropic"),
     "messages[0].content[0].type", ValidationError),
    # FastAPI's own check of the body (BatchIn.session_id's length)
    (lambda c: c.append_many(CONV, [{"role": "user", "content": "ok"}], session_id=LONG_SESSION),
     "session_id", ValidationError),
]


@pytest.mark.parametrize(("call", "field", "kind"), SERVER_REFUSALS)
def test_a_422_is_a_validation_error_naming_the_field_and_writes_nothing(
        url_mem: tuple[str, Memory], call: Callable[[Client], Any], field: str, kind: type[Exception]) -> None:
    with Client(url_mem[0], token=TOKEN_ACME, namespace=NS) as client:
        before = client.history(CONV)
        with pytest.raises(kind) as got:
            call(client)
        assert got.value.field == field, str(got.value)  # type: ignore[attr-defined]
        # a limit keeps its numbers, as the library raises it; any other refusal is no limit
        assert isinstance(got.value, LimitExceeded) == (kind is LimitExceeded)
        assert client.history(CONV) == before


# (the call, the field Memory names) -- refused before anything is sent, as Memory refuses it
EDGE_REFUSALS: list[tuple[Callable[[Client], Any], str]] = [
    (lambda c: c.append("", {"role": "user", "content": "hi"}), "conversation_id"),  # empty id
    (lambda c: c.history("../etc"), "conversation_id"),  # not an id
    (lambda c: c.history(CONV, namespace="acme//alice"), "namespace"),  # not a namespace
    (lambda c: c.append(CONV, {"role": "wizard", "content": "hi"}), "role"),  # not a message
    (lambda c: c.append(CONV, "hello"), "message"),  # not an object
    (lambda c: c.append_many(CONV, []), "messages"),  # an empty batch
    (lambda c: c.append_many(CONV, [{"role": "user", "content": "a"}, {"role": "user"}]),
     "messages[1].content"),  # the second message lacks its content
    (lambda c: c.context(CONV, "q", 0), "budget"),  # no room at all
    (lambda c: c.context(CONV, "q", thinking="all"), "thinking"),  # type: ignore[call-overload]  # Anthropic-only, OpenAI format
    (lambda c: c.pin(CONV, -1), "position"),
    (lambda c: c.pin(CONV, 0, priority=101), "priority"),
    (lambda c: c.history(CONV, limit=0), "limit"),
    (lambda c: c.search(CONV, "q", 0), "k"),
    (lambda c: c.prune(-1), "older_than"),
    (lambda c: c.delete_namespace(None), "namespace"),  # type: ignore[arg-type]  # erasure names it
    (lambda c: c.search(CONV, "Lisbon \ud800"), "query"),  # a lone surrogate (before: httpx's UnicodeEncodeError)
    (lambda c: c.context(CONV, "Lisbon \udfff"), "query"),  # ... in a context's query
    (lambda c: c.context(CONV, "q", system="be \ud800 brief"), "system"),  # ... in its system prompt
    (lambda c: c.checkpoint(CONV, "Lisbon\x00trip", 0), "summary"),  # NUL (before: sent, refused by the server)
    (lambda c: c.checkpoint(CONV, "   ", 0), "summary"),  # blank
]


@pytest.mark.parametrize(("call", "field"), EDGE_REFUSALS)
def test_what_memory_refuses_at_its_edge_is_refused_before_sending(call: Callable[[Client], Any], field: str) -> None:
    # nothing listens there: a request sent would fail with a connection error
    with Client(f"http://127.0.0.1:{free_port()}", token=TOKEN_ACME) as client, \
            pytest.raises(ValidationError) as got:
        call(client)
    assert got.value.field == field, str(got.value)


# (the client's call, Memory's same call) -- the two refuse with the same words (one check
# for both: tiers.models.check_*), Memory's being the ones its tests match
SAME_WORDS: list[tuple[Callable[[Client], Any], Callable[[Memory], Any]]] = [
    (lambda c: c.context(CONV, "q", 0), lambda m: m.context(CONV, "q", 0, namespace=NS)),  # before: no " tokens"
    (lambda c: c.search(CONV, "\ud800"), lambda m: m.search(CONV, "\ud800", namespace=NS)),
    (lambda c: c.checkpoint(CONV, "a\x00b", 0), lambda m: m.checkpoint(CONV, "a\x00b", 0, namespace=NS)),
    (lambda c: c.checkpoint(CONV, "", 0), lambda m: m.checkpoint(CONV, "", 0, namespace=NS)),
    (lambda c: c.checkpoint(CONV, 7, 0), lambda m: m.checkpoint(CONV, 7, 0, namespace=NS)),  # not a string
    (lambda c: c.pin(CONV, 0, priority=101), lambda m: m.pin(CONV, 0, priority=101, namespace=NS)),
    (lambda c: c.history(CONV, after=-2), lambda m: m.history(CONV, after=-2, namespace=NS)),
    (lambda c: c.history(CONV, limit=True), lambda m: m.history(CONV, limit=True, namespace=NS)),  # a bool
    (lambda c: c.search(CONV, "q", 201), lambda m: m.search(CONV, "q", 201, namespace=NS)),
    (lambda c: c.conversations_page(NS, limit=0), lambda m: m.conversations_page(NS, limit=0)),
    (lambda c: c.fork(CONV, 1.5), lambda m: m.fork(CONV, 1.5, namespace=NS)),  # not an integer
]


@pytest.mark.parametrize(("call", "memory_call"), SAME_WORDS)
def test_the_client_refuses_with_memorys_words(url_mem: tuple[str, Memory], call: Callable[[Client], Any],
                                               memory_call: Callable[[Memory], Any]) -> None:
    with pytest.raises(ValidationError) as want:
        memory_call(url_mem[1])
    with Client(f"http://127.0.0.1:{free_port()}", token=TOKEN_ACME) as client, \
            pytest.raises(ValidationError) as got:
        call(client)
    assert str(got.value) == str(want.value)


# (a call naming a conversation) -- behind a base URL the service does not serve, FastAPI's
# own 404 {"detail": "Not Found"} is no conversation's (before: ConversationNotFound)
ON_UNKNOWN_PATH: list[Callable[[Client], Any]] = [
    lambda c: c.history(CONV),  # a GET
    lambda c: c.append(CONV, {"role": "user", "content": "hi"}),  # a write
    lambda c: c.context(CONV, "card?"),  # a POST read
    lambda c: c.search(CONV, "card number"),  # a route that names the conversation in its body
]


@pytest.mark.parametrize("call", ON_UNKNOWN_PATH)
def test_a_404_that_is_not_the_services_is_no_missing_conversation(
        url_mem: tuple[str, Memory], call: Callable[[Client], Any]) -> None:
    with Client(url_mem[0] + "/not-tiermem", token=TOKEN_ACME, namespace=NS) as client, \
            pytest.raises(ServiceError) as got:
        call(client)
    assert got.value.status == 404 and "Not Found" in str(got.value)
    assert not isinstance(got.value, ConversationNotFound)
    assert [m.body for m in url_mem[1].history(CONV, namespace=NS)] == TRIP  # nothing written


def test_another_error_answer_names_its_status_and_body(url_mem: tuple[str, Memory]) -> None:
    # a base URL with a path the service does not serve: its 404 is no conversation's
    with Client(url_mem[0] + "/not-tiermem", token=TOKEN_ACME) as client, pytest.raises(ServiceError) as got:
        client.stats()
    assert got.value.status == 404 and "Not Found" in str(got.value)
    assert not isinstance(got.value, ConversationNotFound | ServiceAuthError)
