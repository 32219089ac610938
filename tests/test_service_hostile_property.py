"""Property: no body, id, query value or namespace header gets a 5xx from the real service,
and a refused request writes nothing.

Hypothesis makes JSON of every type at every field and depth (floats past the doubles,
integers of any size, -0.0, strings with NUL, controls, lone surrogates and characters
past the BMP, duplicate keys) and sends it byte for byte, with NaN/Infinity spelled as
Python's json writes them, to every route that takes a body; and ids, query values and
namespace headers made of the same characters, percent-encoded, to the routes that take
them. Each answer must be below 500; one of 4xx must leave the store's row counts as they
were. uvicorn on loopback over real HTTP, a real SQLite store; derandomized and bounded,
so the module runs in well under 20 s (raise TIERMEM_FUZZ_EXAMPLES for a longer run).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hash_embedder import HashEmbedder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_helpers import bearer, serve_in_thread

from tiermem import Config, Memory

TOKEN = "tok-fuzz-0123456789abcdef"
NAMESPACE = "acme"
EXISTING = "c"
EXAMPLES = int(os.environ.get("TIERMEM_FUZZ_EXAMPLES", "25"))
COUNTED = ("messages", "pins", "checkpoints", "conversations")
HTTP_TIMEOUT_S = 30.0
CONV = f"/v1/conversations/{EXISTING}"
# every route that takes a JSON body, with a body it takes (so generated fields land beside real ones)
BODY_ROUTES: list[tuple[str, dict[str, Any]]] = [
    (f"{CONV}/messages", {"role": "user", "content": "hi"}),
    (f"{CONV}/messages:batch", {"messages": [{"role": "user", "content": "hi"}]}),
    (f"{CONV}/context", {"query": "hi", "budget": 500}),
    (f"{CONV}/fork", {"up_to": 0}),
    (f"{CONV}/pins", {"position": 0}),
    (f"{CONV}/checkpoints", {"summary": "s", "position": 0}),
    ("/v1/search", {"q": "hi"}),
    ("/v1/prune", {"older_than_seconds": 1e12}),
]
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))

# text of every kind a client can send: NUL and controls, lone surrogates, astral characters
hostile_text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=10**20, max_value=10**60)
    | st.floats(allow_nan=True, allow_infinity=True) | st.just(-0.0) | hostile_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=12,
)


def _dumps(value: Any) -> bytes:
    """`value` as a client writes it: NaN and Infinity as Python's json spells them, a
    lone surrogate as its \\u escape (ensure_ascii)."""
    return json.dumps(value).encode()


def _counts(mem: Memory) -> dict[str, int]:
    with mem.cold.reading() as conn:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in COUNTED}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Memory]]:
    data: Path = tmp_path_factory.mktemp("hostile") / "data"
    cfg = Config(data_dir=data, auth_tokens={TOKEN: NAMESPACE})
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        _ensure_existing(mem)
        with serve_in_thread(cfg, mem) as url, httpx.Client(base_url=url, timeout=HTTP_TIMEOUT_S,
                                                            headers=bearer(TOKEN)) as client:
            yield client, mem


def _ensure_existing(mem: Memory) -> None:
    """The conversation the routes act on, again where a generated prune or erasure took it
    (an answer of 2xx): every example reaches the routes past the 404 of a missing one."""
    if EXISTING not in mem.conversations(NAMESPACE):
        mem.append_many(EXISTING, [{"role": "user", "content": "I'm allergic to tree nuts."},
                                   {"role": "assistant", "content": "Noted."}], namespace=NAMESPACE)


def _sent(client: httpx.Client, mem: Memory, method: str, url: str, **kw: Any) -> httpx.Response:
    _ensure_existing(mem)
    before = _counts(mem)
    r = client.request(method, url, **kw)
    assert r.status_code < 500, (method, url[:200], kw, r.status_code, r.text[:300])
    if r.status_code >= 400:
        assert _counts(mem) == before, (method, url[:200], kw, r.status_code, "wrote on a refusal")
    return r


@pytest.mark.parametrize(("path", "base"), BODY_ROUTES, ids=[p for p, _ in BODY_ROUTES])
@SETTINGS
@given(field=hostile_text, value=json_values, which=st.integers(min_value=0, max_value=len(BODY_ROUTES)),
       replace=st.booleans())
def test_a_hostile_field_gets_a_4xx_or_is_taken(served: tuple[httpx.Client, Memory], path: str,
                                               base: dict[str, Any], field: str, value: Any, which: int,
                                               replace: bool) -> None:
    client, mem = served
    # a generated value in place of one of the real fields, or beside them under a generated name
    keys = list(base)
    body = dict(base)
    body[keys[which % len(keys)] if replace else field] = value
    _sent(client, mem, "POST", path, content=_dumps(body), headers={"content-type": "application/json"})


@pytest.mark.parametrize("path", [p for p, _ in BODY_ROUTES])
@SETTINGS
@given(value=json_values)
def test_a_hostile_whole_body_gets_a_4xx_or_is_taken(served: tuple[httpx.Client, Memory], path: str,
                                                    value: Any) -> None:
    client, mem = served
    _sent(client, mem, "POST", path, content=_dumps(value), headers={"content-type": "application/json"})


def _encoded(text: str) -> str:
    """`text` percent-encoded as UTF-8, a lone surrogate as the bytes Python's
    surrogatepass gives it (what a client that does not check sends)."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


@SETTINGS
@given(cid=hostile_text, q=hostile_text, after=hostile_text)
def test_hostile_ids_and_query_values_get_a_4xx_or_an_answer(served: tuple[httpx.Client, Memory], cid: str,
                                                             q: str, after: str) -> None:
    client, mem = served
    conv = f"/v1/conversations/{_encoded(cid)}"
    _sent(client, mem, "GET", f"{conv}/history?after={_encoded(after)}")
    _sent(client, mem, "POST", f"{conv}/messages", json={"role": "user", "content": "x"})
    _sent(client, mem, "POST", f"{conv}/context", json={"query": "x"})
    _sent(client, mem, "DELETE", f"{conv}/pins/{_encoded(after)}")
    _sent(client, mem, "GET", f"/v1/search?q={_encoded(q)}&conversation_id={_encoded(cid)}")
    _sent(client, mem, "GET", f"/v1/conversations?after={_encoded(after)}")


# a namespace header as a client can send it: Latin-1 text (what HTTP carries) without CR/LF
header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=40)


@SETTINGS
@given(ns=header_text | st.builds(lambda t: f"{NAMESPACE}/{t}", header_text))
def test_a_hostile_namespace_header_gets_a_4xx_or_an_answer(served: tuple[httpx.Client, Memory], ns: str) -> None:
    client, mem = served
    h = {"X-Tiermem-Namespace": ns.encode("latin-1")}  # bytes: httpx sends them as they are
    _sent(client, mem, "POST", f"{CONV}/messages", json={"role": "user", "content": "x"}, headers=h)
    _sent(client, mem, "GET", "/v1/stats", headers=h)
    _sent(client, mem, "POST", "/v1/search", json={"q": "x"}, headers=h)
    _sent(client, mem, "DELETE", "/v1/namespace", headers=h)  # the token's own namespace included
