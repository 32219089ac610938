"""The OpenAPI document refuses exactly the ids the server refuses, wherever a request
names one, and states what `max_id_chars` bounds as the server applies it.

Ids: a search's `conversation_id` (`POST /v1/search`'s body, `GET /v1/search`'s query)
and `GET /v1/conversations`' page cursor `after` were documented as any string while the
server refused every non-id (422); they carry the id's pattern now, as the path's id and
a fork's `new_id` did, and the maxLength of an id looked up (MAX_ID_CHARS_LIMIT: the
server finds a conversation made under a higher max_id_chars). Checked on a table of
ids: the schema admits an id exactly when the server takes it.

`max_id_chars`: `validate_namespace` bounds the whole namespace (its levels and the `/`
between them), while `/v1/limits`' schema said "each namespace level".

Real HTTP to the real app served in this process (hash embedder, real SQLite).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_helpers import TOKEN_ACME, bearer, served_store

from tiermem import Config
from tiermem.config import DEFAULT_MAX_ID_CHARS, MAX_ID_CHARS_LIMIT

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

UNPROCESSABLE = 422


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    root: Path = tmp_path_factory.mktemp("idparams")
    config = Config(data_dir=root / "data", auth_tokens={TOKEN_ACME: "acme"})
    with served_store(config) as s:
        spec = httpx.get(f"{s.url}/openapi.json").json()
        yield s.url, spec


def _admits(schema: dict[str, Any], value: str) -> bool:
    """Whether `schema` (a string-or-null parameter's) admits the string `value`: its
    pattern as JSON Schema reads it (ECMA-262, where `$` is the end of the input alone;
    Python's `$` also matches before a final newline, hence `\\Z`) and its maxLength."""
    pattern = schema["pattern"]
    assert pattern.endswith("$") and pattern.count("$") == 1, pattern  # the swap below is exact
    return re.search(pattern[:-1] + r"\Z", value) is not None and len(value) <= schema["maxLength"]


# (an id, why it is in the table); the schema and the server must agree on each
IDS = [
    ("c1", "a plain id"),
    ("_c", "an underscore may start it"),
    ("a.b:c@d-e_f", "every punctuation an id may hold"),
    ("x" * (DEFAULT_MAX_ID_CHARS + 1), "past max_id_chars: looked up (made under a higher limit)"),
    ("x" * MAX_ID_CHARS_LIMIT, "the longest id any config writes"),
    ("x" * (MAX_ID_CHARS_LIMIT + 1), "one past any config's limit"),
    ("a b", "a space: the reviewer's repro"),
    (".c", "starts with a dot"),
    ("-c", "starts with a dash"),
    ("a/b", "a namespace separator"),
    ("é", "not ASCII"),
    ("c1\n", "a final newline, which a Python `$` would let through"),
    ("", "empty"),
]


def _conv_id_schema(spec: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    (param,) = [p for p in spec["paths"][path]["get"]["parameters"] if p["name"] == name]
    return param["schema"]  # type: ignore[no-any-return]


# (where the id goes, its schema in the document, the request that sends it)
PLACES = {
    "POST /v1/search body": (
        lambda spec: spec["components"]["schemas"]["SearchIn"]["properties"]["conversation_id"],
        lambda url, v: httpx.post(f"{url}/v1/search", json={"q": "x", "conversation_id": v}, headers=bearer(TOKEN_ACME)),
    ),
    "GET /v1/search query": (
        lambda spec: _conv_id_schema(spec, "/v1/search", "conversation_id"),
        lambda url, v: httpx.get(f"{url}/v1/search", params={"q": "x", "conversation_id": v},
                                 headers=bearer(TOKEN_ACME)),
    ),
    "GET /v1/conversations after": (
        lambda spec: _conv_id_schema(spec, "/v1/conversations", "after"),
        lambda url, v: httpx.get(f"{url}/v1/conversations", params={"after": v}, headers=bearer(TOKEN_ACME)),
    ),
}


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize(("value", "why"), IDS, ids=[why for _, why in IDS])
def test_schema_admits_what_the_server_takes(served: tuple[str, dict[str, Any]], place: str, value: str,
                                             why: str) -> None:
    url, spec = served
    schema_of, request = PLACES[place]
    schema = schema_of(spec)
    assert "pattern" in schema and "maxLength" in schema, schema  # before: any string
    r = request(url, value)
    taken = r.status_code != UNPROCESSABLE  # 200, or 404 for a search of no such conversation
    assert r.status_code in (200, 404, UNPROCESSABLE), (r.status_code, r.text)
    assert _admits(schema, value) == taken, (why, r.status_code, r.text, schema)


MAX_ID_CHARS = 16  # a small limit, so a namespace of two short levels passes it


def test_max_id_chars_bounds_the_whole_namespace(tmp_path: Path) -> None:
    config = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: "acme"}, max_id_chars=MAX_ID_CHARS)
    with served_store(config) as s:
        doc = httpx.get(f"{s.url}/openapi.json").json()["components"]["schemas"]["LimitsOut"]
        text = doc["properties"]["max_id_chars"]["description"]
        assert "each namespace level" not in text and "whole namespace" in text, text  # before: each level

        def append(ns: str) -> httpx.Response:
            return httpx.post(f"{s.url}/v1/conversations/c1/messages", json={"role": "user", "content": "hi"},
                              headers=bearer(TOKEN_ACME, ns))

        # "acme/" and 11 more: 16 characters in all, taken
        fits = "acme/" + "u" * (MAX_ID_CHARS - len("acme/"))
        assert append(fits).status_code == 201
        # one more: each level (4 and 12 characters) within the limit, the whole past it
        past = fits + "u"
        r = append(past)
        assert r.status_code == UNPROCESSABLE and str(MAX_ID_CHARS) in r.text, r.text
