"""What a failed LLM refresh leaves behind. An endpoint's error body may echo the
prompt (the conversation's turns) and the Authorization header, and an unusable answer
paraphrases the turns: none of it may reach the log (logs hold no content: an erasure
cannot reach them) and the API key may be stored nowhere. The view's stored refresh
error (`summary_errors`) keeps the excerpt for the operator, without the key, and is
erased with the conversation."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from llm_endpoint import LLMEndpoint, Reply, Request, completion, serving

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

KEY_ENV = "TM_TEST_LLM_KEY"
KEY = "sk-live-5ecret-0f-the-operator"
SECRET_TEXT = "my locker code is 4417"


def echo_401(r: Request) -> Reply:
    return Reply(401, json.dumps({"error": {"message": f"Incorrect API key provided: {r.headers['Authorization']}"}
                                  }).encode())


def echo_400(r: Request) -> Reply:
    return Reply(400, json.dumps({"error": {"message": "context too long", "messages": r.prompt}}).encode())


def echo_answer(r: Request) -> Reply:
    return completion(f"The user said: {r.prompt} (no refs; {r.headers['Authorization']})")


@pytest.fixture
def endpoint() -> Iterator[LLMEndpoint]:
    yield from serving()


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder, endpoint: LLMEndpoint, monkeypatch: pytest.MonkeyPatch
        ) -> Iterator[Memory]:
    monkeypatch.setenv(KEY_ENV, KEY)
    cfg = Config(data_dir=tmp_path / "data", summarizer="llm", llm_base_url=endpoint.url, llm_model="m",
                 llm_api_key_env=KEY_ENV, llm_timeout_s=5.0)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


@pytest.mark.parametrize(("reply", "status"), [
    (echo_401, "HTTP 401"),  # a wrong key, echoed back whole by the endpoint
    (echo_400, "HTTP 400"),  # a refused request that quotes the prompt
    (echo_answer, "no line with valid turn refs"),  # an answer that repeats the turns, without refs
])
def test_a_failed_refresh_logs_no_content_and_stores_no_key(
        mem: Memory, endpoint: LLMEndpoint, caplog: pytest.LogCaptureFixture, reply: Callable[[Request], Reply], status: str) -> None:
    endpoint.reply = reply
    mem.append("c", {"role": "user", "content": f"Remember this: {SECRET_TEXT}."})
    mem.append("c", {"role": "assistant", "content": "Noted."})
    with caplog.at_level(logging.DEBUG, logger="tiermem"):
        mem.consolidate("c")
    assert endpoint.requests and SECRET_TEXT in endpoint.requests[0].prompt
    assert mem.warm.latest("c", "rolling") is None  # nothing half written
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert status in logged  # the failure is logged, as an operation
    assert SECRET_TEXT not in logged and KEY not in logged
    stored = mem.warm.errors("c", "rolling")
    assert stored and status in stored[0][0]
    assert KEY not in stored[0][0]
    if reply is not echo_401:
        assert SECRET_TEXT in stored[0][0]  # the excerpt, for the operator, in the conversation's rows
    mem.delete_conversation("c")
    assert mem.warm.errors("c", "rolling") == []
