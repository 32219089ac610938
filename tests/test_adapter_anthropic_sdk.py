"""The real `anthropic` SDK sends what `to_anthropic` builds, to a scripted Messages API
server on 127.0.0.1 (no network): the request bodies it records are `system` and
`messages` as built, and a two-turn tool loop with a thinking block works (the reply
appended with `from_anthropic`, the tool result appended, the next context sent with the
thinking block and its signature back before the `tool_use`).

Fails on the code before: there was no Anthropic adapter, and `append` refuses the SDK's
reply (a `tool_use` block)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from tiermem import Memory  # noqa: E402
from tiermem.adapters.anthropic import from_anthropic, to_anthropic  # noqa: E402

THINKING = {"type": "thinking", "thinking": "Call the weather tool.", "signature": "EqQBCgIYAhIMsig"}
USAGE = {"input_tokens": 40, "output_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
REPLIES: list[dict[str, Any]] = [
    {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
     "stop_sequence": None, "usage": USAGE,
     "content": [THINKING, {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Tokyo"}}]},
    {"id": "msg_02", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "end_turn",
     "stop_sequence": None, "usage": USAGE, "content": [{"type": "text", "text": "Sunny and 21C in Tokyo."}]},
]


@pytest.fixture
def server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A Messages API that answers the scripted replies in turn and records each body."""
    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append(body)
            out = json.dumps(REPLIES[len(bodies) - 1]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:  # quiet
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", bodies
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_tool_loop_through_the_sdk(cold_memory: Memory, server: tuple[str, list[dict[str, Any]]]) -> None:
    url, bodies = server
    client = anthropic.Anthropic(base_url=url, api_key="test", max_retries=0)
    tools = [{"name": "weather", "description": "The weather in a city.",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    cold_memory.append_many("trip", from_anthropic({"role": "user", "content": "Weather in Tokyo?"}))
    sent = []
    for _turn in range(2):
        req = to_anthropic(cold_memory.context("trip", "Weather in Tokyo?", 4000, system="Be brief."), cold_memory)
        sent.append(req)
        reply = client.messages.create(model="claude-test", max_tokens=512, tools=tools,
                                       **req.kwargs())
        cold_memory.append_many("trip", from_anthropic(reply))  # the SDK's object itself
        for block in reply.content:
            if block.type == "tool_use":
                cold_memory.append_many("trip", from_anthropic({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": block.id, "content": "sunny, 21C"}]}))
    assert reply.content[0].type == "text" and reply.content[0].text == "Sunny and 21C in Tokyo."
    # what the SDK sent is what to_anthropic built
    assert len(bodies) == 2
    for body, req in zip(bodies, sent, strict=True):
        assert body["system"] == req.system and body["messages"] == req.messages
        assert body["model"] == "claude-test" and body["max_tokens"] == 512
    # the second request carries the loop: the thinking block, verbatim, before the tool_use
    assert [m["role"] for m in bodies[1]["messages"]] == ["user", "assistant", "user"]
    call = bodies[1]["messages"][1]["content"]
    assert [{k: v for k, v in b.items() if k != "cache_control"} for b in call] == REPLIES[0]["content"]
    assert bodies[1]["messages"][2]["content"][0] | {"cache_control": None} == {
        "type": "tool_result", "tool_use_id": "toolu_01", "content": "sunny, 21C", "cache_control": None}
    # the replies are stored as OpenAI messages, their fields in metadata
    stored = cold_memory.history("trip")
    assert [m.body["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1].metadata is not None and stored[1].metadata["anthropic_reply"]["id"] == "msg_01"
