"""A JSON body sent without a Content-Type is taken for JSON on every body route.

The service's docs said such a body is accepted ("FastAPI parses JSON from a body
without one"), but FastAPI 0.165 parses only a body that names JSON: every body route
answered a valid message 422 "Input should be a valid dictionary or object". The guard
now takes a missing Content-Type for `application/json`, so the body is checked, parsed
and answered exactly as the same body with the header; bytes that are no JSON get the
422 a bad JSON body gets. Every request is written byte for byte on a socket
(`raw_request`: no client adds a type) to a real uvicorn serving the real app.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from service_helpers import TOKEN_ACME, bearer, raw_request, serve_in_thread

from tiermem import Config, Memory
from tiermem.service import NAMESPACE_HEADER
from tiermem.tiers.embed_onnx import FastEmbedder

AUTH = ("Authorization", f"Bearer {TOKEN_ACME}")
JSON = ("Content-Type", "application/json")
# each way of sending acts in its own namespace (below the token's), so that neither sees
# the other's conversations (the context route recalls from the whole namespace); the two
# answers compare equal once the namespace is replaced (`same_shape`)
WITH_TYPE, WITHOUT_TYPE = "acme/typed", "acme/untyped"
SEED = [{"role": "user", "content": "My budget for the Lisbon trip is 2000 EUR."},
        {"role": "assistant", "content": "Noted: 2000 EUR for Lisbon."}]
# fields whose value depends on the clock or a random draw, not on the request
VOLATILE = frozenset({"created_at", "timings_ms", "stage_ms", "incarnation"})


# case -> (path, body) for a conversation id; every body route of the service
ROUTES: dict[str, Callable[[str], tuple[str, dict[str, Any]]]] = {
    # one message: the body is the message itself
    "append": lambda c: (f"/v1/conversations/{c}/messages", {"role": "user", "content": "and 300 for food"}),
    # a batch: {"messages": [...]}
    "batch": lambda c: (f"/v1/conversations/{c}/messages:batch",
                        {"messages": [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]}),
    # the planner's answer for a query
    "context": lambda c: (f"/v1/conversations/{c}/context", {"query": "what is my budget?", "budget": 500}),
    # search with the query in the body, confined to the case's conversation
    "search": lambda c: ("/v1/search", {"q": "budget", "conversation_id": c, "k": 3}),
    # pin a turn
    "pin": lambda c: (f"/v1/conversations/{c}/pins", {"position": 0, "priority": 80}),
    # a checkpoint standing in for position 0
    "checkpoint": lambda c: (f"/v1/conversations/{c}/checkpoints", {"summary": "budget 2000 EUR", "position": 0}),
    # a fork under a named id
    "fork": lambda c: (f"/v1/conversations/{c}/fork", {"up_to": 0, "new_id": f"{c}-fork"}),
    # a namespace-level body route; an age nothing reaches, so it deletes nothing
    "prune": lambda c: ("/v1/prune", {"older_than_seconds": 10 ** 9}),
}

# bytes no JSON parser takes: each must get the 422 a bad JSON body gets, with or without the type
NOT_JSON = [
    b'{"role": "user", "content": "cut off',  # truncated JSON
    b"role=user&content=hi",  # a form body, as `curl -d` builds it
    b"hello",  # plain text
    b'{"role": "user", "content": "x", "n": NaN}',  # not strict JSON
]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("no_ctype") / "data", auth_tokens={TOKEN_ACME: "acme"})
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, serve_in_thread(cfg, mem) as u:
        yield u


def seed(url: str, namespace: str, conversation_id: str) -> None:
    r = httpx.post(f"{url}/v1/conversations/{conversation_id}/messages:batch", json={"messages": SEED},
                   headers=bearer(TOKEN_ACME, namespace))
    assert r.status_code == 201, r.text


def history(url: str, namespace: str, conversation_id: str) -> list[dict[str, Any]] | None:
    r = httpx.get(f"{url}/v1/conversations/{conversation_id}/history", headers=bearer(TOKEN_ACME, namespace))
    assert r.status_code in (200, 404), r.text
    return None if r.status_code == 404 else [m["message"] for m in r.json()["messages"]]


def same_shape(doc: Any, tag: str) -> Any:
    """`doc` with the namespace `tag` replaced in every string and the volatile fields dropped."""
    if isinstance(doc, dict):
        return {k: same_shape(v, tag) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [same_shape(v, tag) for v in doc]
    if isinstance(doc, str):
        return doc.replace(tag, "NS")
    return doc


@pytest.mark.parametrize("case", list(ROUTES))
def test_valid_json_without_content_type_is_answered_as_json(url: str, case: str) -> None:
    answers = {}
    for tag, typed in ((WITH_TYPE, [JSON]), (WITHOUT_TYPE, [])):
        seed(url, tag, case)
        path, body = ROUTES[case](case)
        status, _, doc = raw_request(url, "POST", path, [AUTH, (NAMESPACE_HEADER, tag), *typed],
                                     json.dumps(body).encode())
        answers[tag] = (status, same_shape(doc, tag), same_shape(history(url, tag, case), tag))
    typed, untyped = answers[WITH_TYPE], answers[WITHOUT_TYPE]
    assert typed[0] in (200, 201), typed  # the route took the body with the header
    # before the fix: 422 "Input should be a valid dictionary or object" without it
    assert untyped[0] == typed[0], untyped
    assert untyped[1] == typed[1]  # the same answer
    assert untyped[2] == typed[2]  # and the same effect on the conversation


@pytest.mark.parametrize("case", list(ROUTES))
@pytest.mark.parametrize("raw", NOT_JSON, ids=["truncated", "form", "text", "nan"])
def test_non_json_without_content_type_gets_the_bad_json_refusal(url: str, case: str, raw: bytes) -> None:
    refusals = {}
    for tag, typed in ((WITH_TYPE, [JSON]), (WITHOUT_TYPE, [])):
        c = f"bad-{case}"
        path, _ = ROUTES[case](c)
        status, _, doc = raw_request(url, "POST", path, [AUTH, (NAMESPACE_HEADER, tag), *typed], raw)
        refusals[tag] = (status, same_shape(doc, tag))
        assert history(url, tag, c) is None  # nothing was stored
    assert refusals[WITH_TYPE][0] == 422, refusals
    assert refusals[WITHOUT_TYPE] == refusals[WITH_TYPE]
    detail = refusals[WITHOUT_TYPE][1]["detail"]
    assert detail[0]["loc"][0] == "body" and "JSON" in detail[0]["msg"], detail
