"""A typed `local_shell_call_output` (the `openai` SDK's `LocalShellCallOutput`: the call
named by `id`) that arrives after a context showed its `local_shell_call` pending (the
agent mid-loop) continues that context's round, as one naming the call's `call_id`
does: the epoch is extended with it (`render.open_call_items`: the open calls' item ids,
which `tool_units` reads as their call ids).

Fails on the code before: `render.open_calls` records call ids only, so an output
naming the call by its item id read as an orphan and vanished from the extension (left
out with no reason given), the call shown unanswered.

Real SQLite files; the context checked against the `openai` SDK's request types."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hash_embedder import HashEmbedder

from tiermem import Config, Memory

CALL = {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_ls", "status": "completed",
        "action": {"type": "exec", "command": ["ls"], "env": {}}}
ASK = {"role": "user", "content": "list the files"}
OUTPUTS = [
    # the SDK's typed param naming the call by its item id (vanished before)
    pytest.param({"type": "local_shell_call_output", "id": "lsh_1", "output": "README.md"}, id="by-item-id"),
    # naming it by its call_id (extended before too)
    pytest.param({"type": "local_shell_call_output", "id": "call_ls", "output": "README.md"}, id="by-call-id"),
]


@pytest.fixture
def mem(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Memory]:
    m = Memory(Config(data_dir=tmp_path / "m", context_format=request.param), embedder=HashEmbedder(), hot=False,
               background_indexing=False)
    yield m
    m.close()


@pytest.mark.parametrize("mem", ["as_stored", "responses"], indirect=True)
@pytest.mark.parametrize("output", OUTPUTS)
def test_the_output_extends_the_pending_round(mem: Memory, output: dict[str, Any]) -> None:
    mem.append("t", ASK)
    mem.append("t", CALL)
    first = mem.context("t", ASK["content"], budget=4000)
    assert [s.get("type") or s.get("role") for s in first.messages] == ["user", "local_shell_call"]
    mem.append("t", output)
    again = mem.context("t", ASK["content"], budget=4000)
    assert [s.get("type") or s.get("role") for s in again.messages] == [
        "user", "local_shell_call", "local_shell_call_output"]
    assert "README.md" in again.messages[-1]["output"]
    assert not again.plan.cache.new_epoch  # the round continues: the prefix as sent before
    assert again.messages[:2] == first.messages
    assert not again.plan.left_out
