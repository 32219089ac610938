"""`tiermem --debug` writes no password of `llm_base_url` (`http://user:PW@host/v1`, a
secret-bearing setting: URL_FIELDS) to its log.

Before, the summarizer requested the URL with its userinfo, httpx turned that into basic
auth and logged the request's URL at INFO ("HTTP Request: POST http://user:PW@host/v1/
chat/completions"), which the --debug root logger at DEBUG wrote to stderr. Now the
summarizer sends the userinfo as `auth=` (the same basic auth) to a URL without it, and
the CLI holds httpx and httpcore at WARNING under --debug (`cli.WIRE_LOGGERS`).

The CLI runs as a real process against a real local HTTP endpoint (llm_endpoint).
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from llm_endpoint import LLMEndpoint, completion, serving

from tiermem import Config, Memory
from tiermem.consolidation.summarize import split_userinfo
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
TURNS = 8  # past MAX_TURNS_BEHIND: the views are over budget and ask the summarizer
MAX_TURNS_BEHIND = 2
RUN_LIMIT_S = 120  # a CLI run that has not ended by then is a failure, not a hang
CONV = "c1"
USER = "cnryuser"


@pytest.fixture
def endpoint() -> Iterator[LLMEndpoint]:
    yield from serving(lambda _req: completion("Fact one [#0]"))


@pytest.fixture
def data(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Path]:
    d = tmp_path / "data"
    with Memory(Config(data_dir=d), hot=False, background_indexing=False, embedder=embedder) as mem:
        mem.append_many(CONV, [{"role": "user", "content": f"Fact {i}: the code word {i} is banana{i}."}
                               for i in range(TURNS)])
    yield d
    EmbeddedRedis(d).stop()  # the CLI's hot tier, when it started one


@pytest.mark.parametrize(("written", "password"), [
    ("CNRYLLMURLPW", "CNRYLLMURLPW"),  # plain
    ("CNRY%40pw%3Ax", "CNRY@pw:x"),  # percent-encoded '@' and ':', sent decoded (as httpx did)
])
def test_debug_consolidate_logs_no_password(data: Path, endpoint: LLMEndpoint, written: str, password: str) -> None:
    url = endpoint.url.replace("http://", f"http://{USER}:{written}@")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    env.update(TIERMEM_DATA_DIR=str(data), TIERMEM_SUMMARIZER="llm", TIERMEM_LLM_BASE_URL=url,
               TIERMEM_LLM_MODEL="m", TIERMEM_LLM_API_KEY_ENV="", TIERMEM_WARM_MAX_TURNS_BEHIND=str(MAX_TURNS_BEHIND))
    run = subprocess.run([TIERMEM, "--debug", "consolidate"], env=env, capture_output=True, text=True,
                         timeout=RUN_LIMIT_S, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert endpoint.requests, "the summarizer asked the endpoint nothing: the test saw no request to log"
    log = run.stdout + run.stderr
    for secret in (written, password):
        assert secret not in log
    # the same basic auth as the URL's userinfo meant, to the path without it
    basic = "Basic " + base64.b64encode(f"{USER}:{password}".encode()).decode()
    assert {r.headers.get("Authorization") for r in endpoint.requests} == {basic}
    assert {r.path for r in endpoint.requests} == {"/v1/chat/completions"}


@pytest.mark.parametrize(("url", "bare", "auth"), [
    ("http://h:1/v1", "http://h:1/v1", None),  # no userinfo: unchanged
    ("http://u:p@h:1/v1", "http://h:1/v1", ("u", "p")),  # user and password
    ("https://u@h/v1", "https://h/v1", ("u", "")),  # a user alone: basic auth with an empty password
    ("http://u:p%2Fq%40r@[::1]:8/v1", "http://[::1]:8/v1", ("u", "p/q@r")),  # percent-encoded; IPv6 host
    ("http://@h/v1", "http://h/v1", None),  # an empty userinfo sent no Authorization: none still
])
def test_split_userinfo(url: str, bare: str, auth: tuple[str, str] | None) -> None:
    assert split_userinfo(url) == (bare, auth)
