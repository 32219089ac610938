"""Property: `POST messages:batch` with `format: "anthropic"` never answers a 5xx, and a
422 writes nothing. Bodies are the near-valid Anthropic messages of
`anthropic_strategies` (one field dropped, retyped, hostile or oversized), sent through
the real app in process (Starlette's TestClient) onto a real SQLite file. Examples
bounded (TIERMEM_FUZZ_EXAMPLES for more)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from anthropic_strategies import EXAMPLES, near_valid_message
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_adapter_anthropic_fuzz_in import REGRESSIONS

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

TOKEN = "fuzz-anthropic-0123456789abcdef"
NS = "fuzz"
CONV = "conv-1"
# fewer than the adapter's properties: each accepted batch is embedded and written
SERVICE_EXAMPLES = max(1, EXAMPLES // 3)
WRITE_RECURSION_LIMIT = 10_000  # above anthropic_strategies.NESTING_DEPTH


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[TestClient, Memory]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("anthropic-fuzz") / "data", auth_tokens={TOKEN: NS},
                 http_allowed_hosts=["testserver"])
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append(CONV, {"role": "user", "content": "hello"}, namespace=NS)
        app = create_app(cfg, mem, start_scheduler=False)
        with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}, raise_server_exceptions=False) as c:
            yield c, mem


def _post(c: TestClient, body: Any) -> Any:
    # the body as bytes: json= would refuse (or alter) what this test sends on purpose, and
    # the huge ints and deep nesting are valid JSON text that Python's limits refuse to write
    digits, depth = sys.get_int_max_str_digits(), sys.getrecursionlimit()
    sys.set_int_max_str_digits(0)
    sys.setrecursionlimit(WRITE_RECURSION_LIMIT)
    try:
        raw = json.dumps(body, ensure_ascii=True, allow_nan=True).encode()
    finally:
        sys.set_int_max_str_digits(digits)
        sys.setrecursionlimit(depth)
    return c.post(f"/v1/conversations/{CONV}/messages:batch", content=raw,
                  headers={"Content-Type": "application/json"})


def _holds(client: tuple[TestClient, Memory], messages: list[Any]) -> None:
    c, mem = client
    before = len(mem.history(CONV, namespace=NS))
    r = _post(c, {"format": "anthropic", "messages": messages})
    assert r.status_code < 500, r.text
    if r.status_code != 201:
        assert len(mem.history(CONV, namespace=NS)) == before, f"a {r.status_code} wrote: {r.text}"


@settings(max_examples=SERVICE_EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(st.lists(near_valid_message(), min_size=1, max_size=3))
def test_no_anthropic_batch_gets_a_5xx(client: tuple[TestClient, Memory], messages: list[Any]) -> None:
    _holds(client, messages)


# what the adapter's properties found (test_adapter_anthropic_fuzz_in.REGRESSIONS), sent
# as a batch: each a 422 naming the message as sent, nothing written
@pytest.mark.parametrize(("message", "field"), [(m, f) for _n, m, f in REGRESSIONS],
                         ids=[n for n, _m, _f in REGRESSIONS])
def test_found_refused_naming_the_message(client: tuple[TestClient, Memory], message: Any, field: str) -> None:
    c, mem = client
    before = len(mem.history(CONV, namespace=NS))
    r = _post(c, {"format": "anthropic", "messages": [{"role": "user", "content": "ok"}, message]})
    assert r.status_code == 422, r.text
    loc = r.json()["detail"][0]["loc"]
    assert loc == ["body"] or loc[:3] == ["body", "messages", 1], r.text  # the guard's, or the message's
    assert len(mem.history(CONV, namespace=NS)) == before
