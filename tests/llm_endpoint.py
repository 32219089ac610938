"""A real OpenAI-compatible chat-completions server on 127.0.0.1 that misbehaves on
demand, for the tests of the LLM summarizer's failure handling (no test uses the
network).

`reply` answers every request: a function of the request (`Request`) returning a
`Reply`. The server records each request it got (`requests`).

For the tests that run the `tiermem` CLI against it: `over_budget_data` (a data dir whose
views ask the summarizer) and `cli_env` (the CLI's environment for that data dir and
endpoint)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def prompt(self) -> str:
        """The user message of the summary request (the numbered turns)."""
        return str(self.body["messages"][-1]["content"])


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b""
    # send the body this many bytes at a time, sleeping `trickle_s` between pieces
    # (a server that keeps a connection alive without ever finishing its answer)
    trickle_bytes: int = 0
    trickle_s: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()  # sent besides Content-Type and Content-Length


def completion(content: Any) -> Reply:
    """A well-formed answer whose one choice holds `content`."""
    return Reply(body=json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode())


@dataclass
class LLMEndpoint:
    reply: Callable[[Request], Reply] = field(default=lambda _r: completion("fact [#0]"))
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", "0"))
                req = Request(self.path, dict(self.headers), json.loads(self.rfile.read(n) or b"{}"))
                endpoint.requests.append(req)
                r = endpoint.reply(req)
                try:
                    self.send_response(r.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(r.body)))
                    for name, value in r.headers:
                        self.send_header(name, value)
                    self.end_headers()
                    step = r.trickle_bytes or len(r.body) or 1
                    for i in range(0, len(r.body), step):
                        self.wfile.write(r.body[i:i + step])
                        self.wfile.flush()
                        if r.trickle_s:
                            time.sleep(r.trickle_s)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serving(reply: Callable[[Request], Reply] | None = None) -> Iterator[LLMEndpoint]:
    """For a fixture: an endpoint, closed afterwards."""
    endpoint = LLMEndpoint(reply) if reply is not None else LLMEndpoint()
    try:
        yield endpoint
    finally:
        endpoint.close()


HOLD_S = 30.0  # the most FirstHeld holds the first request (its tests release it far sooner)


class FirstHeld:
    """A reply (`serving(FirstHeld(...))`) that holds the first request until `gate` is
    set (`asked` says it came), then answers it and every later one `content`; `again`
    is set by any later request."""

    def __init__(self, content: str) -> None:
        self.content = content
        self.asked = threading.Event()
        self.gate = threading.Event()
        self.again = threading.Event()

    def __call__(self, req: Request) -> Reply:
        if not self.asked.is_set():
            self.asked.set()
            self.gate.wait(HOLD_S)
        else:
            self.again.set()
        return completion(self.content)


def over_budget_data(d: Path, embedder: FastEmbedder, conversation: str, turns: int) -> Iterator[Path]:
    """For a fixture: a data dir `d` with one conversation of `turns` turns, past the
    views' budget (a caller's small warm_max_turns_behind); the CLI's Redis stopped after."""
    with Memory(Config(data_dir=d), hot=False, background_indexing=False, embedder=embedder) as mem:
        mem.append_many(conversation, [{"role": "user", "content": f"Fact {i}: the code word {i} is banana{i}."}
                                       for i in range(turns)])
    yield d
    EmbeddedRedis(d).stop()  # the CLI's hot tier, when it started one


def cli_env(data: Path, endpoint: LLMEndpoint, timeout_s: float, max_turns_behind: int) -> dict[str, str]:
    """The `tiermem` CLI's environment: no TIERMEM_* setting of the runner, the data dir,
    the LLM summarizer on `endpoint` (model "m", no API key)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    env.update(TIERMEM_DATA_DIR=str(data), TIERMEM_SUMMARIZER="llm", TIERMEM_LLM_BASE_URL=endpoint.url,
               TIERMEM_LLM_MODEL="m", TIERMEM_LLM_API_KEY_ENV="", TIERMEM_LLM_TIMEOUT_S=str(timeout_s),
               TIERMEM_WARM_MAX_TURNS_BEHIND=str(max_turns_behind))
    return env
