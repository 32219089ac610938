"""`Client.context(format="anthropic")` answers where the plan's breakpoints are in the
request it holds (`AnthropicContext.breakpoints`), as `to_anthropic` gives them in
process: a message of `messages` (or "system") and a block of it, every one whether
marked or not, so a caller with `max_breakpoints=0` marks the right blocks. A server
that does not answer them (an older one) gives none.

Fails on the code before: `AnthropicContext.breakpoints` were the plan's, which index
the OpenAI form (the system messages that Anthropic's request moves into `system`, the
same-role messages it merges): past the end of `messages`, or on a message the request
did not mark."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from client_helpers import BUDGET, CONV, NS, QUERY, served
from service_helpers import TOKEN_ACME

from tiermem import Memory
from tiermem.adapters.anthropic import to_anthropic
from tiermem.client import AnthropicContext, Client
from tiermem.tiers.embed_onnx import FastEmbedder

SYSTEM = "You are a travel agent."


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("client-anthropic-bp") / "data", embedder) as got:
        yield got


# (max_breakpoints) -- the adapter's marks, fewer, or none (the caller places its own)
MARKS = [None, 2, 0]


@pytest.mark.parametrize("max_breakpoints", MARKS)
def test_the_clients_breakpoints_are_the_requests(url_mem: tuple[str, Memory], max_breakpoints: int | None) -> None:
    url, mem = url_mem
    ctx = mem.context(CONV, QUERY, BUDGET, system=SYSTEM, namespace=NS, record=False)  # the state left as found
    want = to_anthropic(ctx, mem.namespaced(NS), **({} if max_breakpoints is None else
                                                    {"max_breakpoints": max_breakpoints}))
    with Client(url, token=TOKEN_ACME, namespace=NS) as client:
        got = client.context(CONV, QUERY, BUDGET, system=SYSTEM, format="anthropic", max_breakpoints=max_breakpoints)
    assert isinstance(got, AnthropicContext)
    assert (got.system, got.messages) == (want.system, want.messages)
    assert got.breakpoints == want.breakpoints and got.breakpoints
    for bp in got.breakpoints:  # each names a block of the request
        blocks = got.system if bp.message == "system" else got.messages[int(bp.message)]["content"]
        assert 0 <= bp.block < len(blocks)
    assert any(bp.message == "system" for bp in got.breakpoints)  # the system prompt's, in `system`
