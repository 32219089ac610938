"""`TiermemSession.get_items` returns what the SDK's own `SQLiteSession` returns for the
same items: output items as the SDK stores them keep their explicit nulls, a role-only
message with Responses parts comes back as it went in, and `session_settings.limit`
applies when `get_items` is called without a limit (as the Runner does when the limit is
set on the session). The nulls were dropped (contexts' wire form) and the setting was
ignored."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents")
import sdk_corpus as corpus
from agents import SQLiteSession
from agents.memory import SessionSettings
from openai.types.responses import Response

from tiermem import Memory
from tiermem.adapters.openai_agents import TiermemSession


def _api_output() -> list[dict[str, Any]]:
    """Output items as the Responses API sends them (explicit nulls), stored the SDK's way."""
    resp = Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-5", "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": [], "status": "completed", "output": [
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": None, "status": None},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}",
             "status": "completed"},
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [
                {"type": "output_text", "text": "hi", "annotations": [], "logprobs": None}]}]})
    return [o.model_dump(exclude_unset=True) for o in resp.output]


CASES = {
    "api_output_with_nulls": [{"role": "user", "content": "q"}, *_api_output(),
                              {"type": "function_call_output", "call_id": "call_1", "output": "x"}],
    "role_only_responses_parts": [
        {"role": "user", "content": [{"type": "input_text", "text": "see"},
                                     {"type": "input_image", "image_url": corpus.PNG, "detail": "high"}]},
        {"role": "assistant", "content": [{"type": "output_text", "text": "A map.", "annotations": []}]}],
    "corpus": corpus.responses_conversation(),
}


@pytest.mark.parametrize("name", list(CASES))
def test_get_items_equals_sqlite_sessions(cold_memory: Memory, name: str) -> None:
    ours, ref = TiermemSession(cold_memory, name), SQLiteSession(name)
    asyncio.run(ours.add_items(CASES[name]))
    asyncio.run(ref.add_items(CASES[name]))
    for limit in (None, 0, 1, 3, -1, 10**6):
        assert asyncio.run(ours.get_items(limit)) == asyncio.run(ref.get_items(limit)), limit
    assert asyncio.run(ours.pop_item()) == asyncio.run(ref.pop_item())
    assert asyncio.run(ours.get_items()) == asyncio.run(ref.get_items())


@pytest.mark.parametrize("settings", [SessionSettings(limit=2), {"limit": 2}], ids=["dataclass", "dict"])
def test_session_settings_limit_applies_without_a_limit(cold_memory: Memory, settings: Any) -> None:
    ours = TiermemSession(cold_memory, "lim", session_settings=settings)
    ref = SQLiteSession("lim", session_settings=settings)
    items = [{"role": "user", "content": f"m{i}"} for i in range(5)]
    asyncio.run(ours.add_items(items))
    asyncio.run(ref.add_items(items))
    assert asyncio.run(ours.get_items()) == asyncio.run(ref.get_items()) == items[-2:]
    for limit in (0, 4, -1):  # an explicit limit wins
        assert asyncio.run(ours.get_items(limit)) == asyncio.run(ref.get_items(limit))
    assert ours.session_settings == ref.session_settings
