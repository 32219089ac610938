"""A `local_shell_call_output` in the `openai` SDK's typed form (`LocalShellCallOutput`:
the call named by `id`, no `call_id`) answers its `local_shell_call`, as one with the
call's `call_id` (the Agents SDK's form) does: `result_id` reads its `id`, which names the
call by its `call_id` or by its item `id` (`tiers.formats.call_item_id`).

On the code before, only `call_id` paired: the typed output had no call to answer, so the
model's call was left out as unanswered and the output went out alone (an orphan, which
the API refuses).

Real SQLite files; the reply parsed by the real `openai` SDK, the typed output checked
against its request type."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hash_embedder import HashEmbedder
from openai.types.responses import Response
from sdk_corpus import valid_responses

from tiermem import Config, Memory

CALL = {"type": "local_shell_call", "id": "lsc_1", "call_id": "call_ls1", "status": "completed",
        "action": {"type": "exec", "command": ["cat", "/etc/hostname"], "env": {}}}
OUTPUTS = [
    # the SDK's typed param, naming the call by its call_id
    pytest.param({"type": "local_shell_call_output", "id": "call_ls1", "output": "web-1"}, True, id="typed-id-is-call_id"),
    # the SDK's typed param, naming the call by its item id
    pytest.param({"type": "local_shell_call_output", "id": "lsc_1", "output": "web-1"}, True, id="typed-id-is-item-id"),
    # the Agents SDK's form (paired before too)
    pytest.param({"type": "local_shell_call_output", "call_id": "call_ls1", "output": "web-1"}, False,
                 id="agents-call_id"),
]


@pytest.fixture
def mem(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Memory]:
    m = Memory(Config(data_dir=tmp_path / "m", context_format=request.param), embedder=HashEmbedder(), hot=False,
               background_indexing=False)
    yield m
    m.close()


@pytest.mark.parametrize("mem", ["as_stored", "responses"], indirect=True)
@pytest.mark.parametrize(("output", "typed"), OUTPUTS)
def test_the_output_answers_its_call(mem: Memory, output: dict[str, Any], typed: bool) -> None:
    reply = Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 1, "model": "codex-mini-latest", "status": "completed",
        "output": [CALL], "parallel_tool_calls": True, "tool_choice": "auto", "tools": []})
    mem.append("s", {"role": "user", "content": "hostname?"})
    mem.append_many("s", reply.output)
    mem.append("s", output)
    mem.append("s", {"role": "user", "content": "and the kernel?"})
    ctx = mem.context("s", "and the kernel?", budget=4000)
    assert [s.get("type") or s.get("role") for s in ctx.messages] == [
        "user", "local_shell_call", "local_shell_call_output", "user"]
    assert not ctx.plan.left_out
    if typed:  # the SDK's request type takes the whole context
        valid_responses(ctx.messages)
