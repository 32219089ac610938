"""The appends' `Idempotency-Key` header over real HTTP (the real app on a real SQLite
file): the same request sent again under its key answers 201 with the first body and
`Idempotent-Replayed: true`, and the conversation holds one copy; the key reused for a
different request is a 422 naming the header (`type` `idempotency_key_reused`) that
writes nothing; a malformed key is a 422 naming the header and the limit, writing
nothing; a repeated header is a 400; OpenAPI documents the header, the 422 and the
replay header; `GET /v1/limits` says the server honours keys.

Fails on the code before: the header was ignored (a replay stored a second copy and
answered another position, no replay header; a reused or malformed key was stored as if
absent), the header was undocumented and /v1/limits did not say it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from client_helpers import NS, served
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, bearer, raw_request

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.service.schemas import IDEMPOTENCY_HEADER, REPLAYED_HEADER
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import MAX_IDEMPOTENCY_KEY_CHARS

MSG = {"role": "user", "content": "Book the 9:40 to Lisbon, please."}
OTHER = {"role": "user", "content": "Book the 11:15 instead."}
BATCH = {"messages": [MSG, {"role": "assistant", "content": "Booked the 9:40."}]}
ANTHROPIC_BATCH = {"format": "anthropic", "messages": [
    {"role": "user", "content": [{"type": "text", "text": "Seat 14A?"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "14A is yours."}]}]}


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("service-idem") / "data", embedder) as got:
        yield got


def _post(url: str, conv: str, suffix: str, body: Any, key: str | None) -> httpx.Response:
    headers = {**bearer(TOKEN_ACME, NS), **({IDEMPOTENCY_HEADER: key} if key is not None else {})}
    return httpx.post(f"{url}/v1/conversations/{conv}{suffix}", json=body, headers=headers)


def _stored(mem: Memory, conv: str) -> list[dict[str, Any]]:
    return [m.body for m in mem.history(conv, namespace=NS)] if conv in mem.conversations(NS) else []


@pytest.mark.parametrize(("suffix", "body"), [
    ("/messages", MSG),  # one message: its body is the message
    ("/messages:batch", BATCH),  # a batch: every position again
    ("/messages:batch", ANTHROPIC_BATCH),  # Anthropic messages, converted the same way both times
])
def test_a_replay_answers_the_first_answer_and_stores_one_copy(url_mem: tuple[str, Memory], suffix: str,
                                                               body: dict[str, Any]) -> None:
    url, mem = url_mem
    conv = f"replay-{len(suffix)}-{len(body)}"
    _post(url, conv, "/messages", {"role": "user", "content": "before"}, None)  # positions start past 0
    first = _post(url, conv, suffix, body, "req-7f3a")
    stored = _stored(mem, conv)
    again = _post(url, conv, suffix, body, "req-7f3a")
    assert first.status_code == again.status_code == 201, (first.text, again.text)
    assert again.json() == first.json()  # the first answer, positions included
    assert REPLAYED_HEADER.lower() not in first.headers and again.headers[REPLAYED_HEADER] == "true"
    assert _stored(mem, conv) == stored  # one copy
    # without a key the same request is a new one, as it always was
    assert _post(url, conv, suffix, body, None).json() != first.json()


def test_a_key_reused_for_another_request_is_a_422_naming_the_header(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    first = _post(url, "reused", "/messages", MSG, "req-1")
    stored = _stored(mem, "reused")
    for suffix, body in (("/messages", OTHER), ("/messages:batch", {"messages": [OTHER]})):
        r = _post(url, "reused", suffix, body, "req-1")
        assert r.status_code == 422, r.text
        [item] = r.json()["detail"]
        assert item["loc"] == ["header", IDEMPOTENCY_HEADER] and item["type"] == "idempotency_key_reused"
        position = first.json()["position"]
        assert "different request" in item["msg"] and f"{position}..{position}" in item["msg"]
    assert _stored(mem, "reused") == stored  # nothing written


@pytest.mark.parametrize(("key", "says"), [
    ("", "must not be empty"),  # sent but empty: not the same as no key
    ("k" * (MAX_IDEMPOTENCY_KEY_CHARS + 1), f"exceeds the limit of {MAX_IDEMPOTENCY_KEY_CHARS} characters"),  # one past
    ("two words", "visible ASCII"),  # a space inside (a header keeps it)
    ("caf\u00e9-1", "visible ASCII"),  # outside ASCII (sent as latin-1 bytes)
    ("tab\there", "visible ASCII"),  # a control character inside
])
def test_a_malformed_key_is_a_422_naming_the_header_and_writes_nothing(url_mem: tuple[str, Memory], key: str,
                                                                       says: str) -> None:
    url, mem = url_mem
    for suffix, body in (("/messages", MSG), ("/messages:batch", BATCH), ("/messages:batch", ANTHROPIC_BATCH)):
        status, _headers, doc = raw_request(url, "POST", f"/v1/conversations/malformed{suffix}", [
            *bearer(TOKEN_ACME, NS).items(), ("Content-Type", "application/json"), (IDEMPOTENCY_HEADER, key)],
            httpx.Request("POST", "/", json=body).content)
        assert status == 422, doc
        [item] = doc["detail"]
        assert item["loc"] == ["header", IDEMPOTENCY_HEADER] and says in item["msg"], item
    assert _stored(mem, "malformed") == []


def test_a_key_at_the_limit_is_taken(url_mem: tuple[str, Memory]) -> None:
    url, _mem = url_mem
    key = "~" * MAX_IDEMPOTENCY_KEY_CHARS  # the last visible ASCII character, as long as allowed
    first, again = (_post(url, "at-limit", "/messages", MSG, key) for _ in range(2))
    assert first.status_code == again.status_code == 201 and again.json() == first.json()


def test_the_header_sent_twice_is_a_400(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    status, _headers, doc = raw_request(url, "POST", "/v1/conversations/twice/messages", [
        *bearer(TOKEN_ACME, NS).items(), ("Content-Type", "application/json"),
        (IDEMPOTENCY_HEADER, "a"), (IDEMPOTENCY_HEADER, "b")], httpx.Request("POST", "/", json=MSG).content)
    assert status == 400 and IDEMPOTENCY_HEADER.lower() in doc["detail"], doc
    assert _stored(mem, "twice") == []


def test_limits_say_the_server_honours_keys(url_mem: tuple[str, Memory]) -> None:
    url, _mem = url_mem
    got = httpx.get(url + "/v1/limits", headers=bearer(TOKEN_ACME)).json()
    assert got["idempotency_keys"] is True and got["max_idempotency_key_chars"] == MAX_IDEMPOTENCY_KEY_CHARS


@pytest.mark.parametrize("path", [
    "/v1/conversations/{conversation_id}/messages",  # one message
    "/v1/conversations/{conversation_id}/messages:batch",  # a batch
])
def test_openapi_documents_the_header_its_422_and_the_replay(path: str) -> None:
    op = create_app(Config(auth_tokens=SCOPED_TOKENS), start_scheduler=False).openapi()["paths"][path]["post"]
    [param] = [p for p in op["parameters"] if p["name"] == IDEMPOTENCY_HEADER]
    assert param["in"] == "header" and not param.get("required", False)
    assert param["schema"]["maxLength"] == MAX_IDEMPOTENCY_KEY_CHARS and str(MAX_IDEMPOTENCY_KEY_CHARS) in \
        param["description"]
    assert IDEMPOTENCY_HEADER in op["responses"]["422"]["description"]
    assert "idempotency_key_reused" in op["responses"]["422"]["description"]
    assert REPLAYED_HEADER in op["responses"]["201"]["headers"]
