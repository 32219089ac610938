"""Schemathesis over the service's OpenAPI schema, in process (ASGI): no input gets a 5xx.

Every operation is fuzzed with positive (schema-valid) and negative (schema-violating)
data, once with generated conversation ids and once with the id of a conversation
that exists (so that valid requests reach the planner, fork, pins and checkpoints,
not only the 404 path). The hot tier is on (an embedded Redis in the test's data dir).
Examples per case are bounded so the module runs in well under a minute; raise
TIERMEM_FUZZ_EXAMPLES for a longer run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from tiermem import Config, Memory
from tiermem.adapters.mcp_http import MCP_PATH
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

TOKEN = "fuzz-token-0123456789abcdef"
NAMESPACE = "fuzz"
EXISTING = "conv-1"
EXAMPLES = int(os.environ.get("TIERMEM_FUZZ_EXAMPLES", "12"))


def _operations() -> list[tuple[str, str, bool, bool]]:
    """(method, path, has inputs to violate, has a conversation id) from the live schema."""
    spec = create_app(Config(auth_tokens={TOKEN: NAMESPACE}), start_scheduler=False).openapi()
    out = []
    for path, item in spec["paths"].items():
        if path == MCP_PATH:
            # served by the mcp package's session manager, which runs in the lifespan of a
            # real server only (schemathesis's ASGI client leaves it): tests/test_mcp_*.py
            continue
        for method, op in item.items():
            has_inputs = bool(op.get("parameters") or op.get("requestBody") or op.get("security"))
            out.append((method.upper(), path, has_inputs, "{conversation_id}" in path))
    return out


OPERATIONS = _operations()


@pytest.fixture(scope="module")
def fuzz_schema(
    tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder
) -> Iterator[Any]:
    data: Path = tmp_path_factory.mktemp("fuzz") / "data"
    # schemathesis's ASGI client names its host "testserver": a loopback service answers
    # only local names and those in http_allowed_hosts (DNS rebinding)
    # the content limit no higher than the small body limit: the service refuses a body limit
    # below it (and with it equal, the 413s are those the body limit alone gave)
    cfg = Config(data_dir=data, redis_url=None, auth_tokens={TOKEN: NAMESPACE}, max_body_bytes=256 * 1024,
                 max_content_bytes=256 * 1024, http_allowed_hosts=["testserver"])
    mem = Memory(cfg, embedder=embedder, hot=True, background_indexing=False)
    try:
        mem.append_many(
            EXISTING,
            [
                {"role": "user", "content": "I'm allergic to tree nuts."},
                {"role": "assistant", "content": "Noted: no tree nuts."},
                {"role": "user", "content": "Book a table for Friday."},
            ],
            namespace=NAMESPACE,
        )
        embedder.embed(["warm-up"])  # the model loads here, not inside a request's timeout
        app = create_app(cfg, mem, start_scheduler=False)
        yield schemathesis.openapi.from_asgi("/openapi.json", app), app
    finally:
        mem.close()
        EmbeddedRedis(data).stop()


def _cases() -> list[Any]:
    params = []
    for method, path, has_inputs, has_conv in OPERATIONS:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if mode is GenerationMode.NEGATIVE and not has_inputs:
                continue  # nothing to violate
            for fixed in (False, True) if has_conv else (False,):
                label = f"{method} {path} {mode.value}{' existing-id' if fixed else ''}"
                params.append(pytest.param(method, path, mode, fixed, id=label))
    return params


@pytest.mark.parametrize(("method", "path", "mode", "fixed_id"), _cases())
def test_no_input_gets_a_5xx(
    fuzz_schema: Any, method: str, path: str, mode: GenerationMode, fixed_id: bool
) -> None:
    schema, app = fuzz_schema
    operation = schema[path][method]
    kwargs: dict[str, Any] = {"generation_mode": mode}
    if fixed_id:
        kwargs["path_parameters"] = {"conversation_id": EXISTING}
    seen: dict[int, int] = {}
    unhandled_before = app.state.runtime.unhandled._value.get()

    @given(case=operation.as_strategy(**kwargs))
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        response = case.call(headers={"Authorization": f"Bearer {TOKEN}"})
        seen[response.status_code] = seen.get(response.status_code, 0) + 1
        assert response.status_code < 500, (
            f"{response.status_code} for {case.as_curl_command()}: {response.text}"
        )

    run()
    assert seen, "no request was made"
    unhandled = app.state.runtime.unhandled._value.get() - unhandled_before
    assert unhandled == 0, f"{unhandled} request(s) reached the catch-all handler"
