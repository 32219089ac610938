"""Storage that cannot be written (issue 13, item 8): writes answer 503 with Retry-After,
never 500; reads go on; `/healthz` says the cold tier is read-only; the CLI's read
commands work on a read-only data dir.

Read-only for real, as root: mode bits do not stop root, so `frozen` sets the immutable
flag (`chattr +i`), under which the kernel refuses every write, also through the
descriptors SQLite opened before (a live server's WAL), with EPERM, as a read-only
remount does with EROFS. Before the fix that was answered 500 (SQLite's "disk I/O
error", then "cannot rollback - no transaction is active"), `/healthz` said `cold: ok`,
and `tiermem history` / `stop-redis` failed on the read-only dir.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result
from service_helpers import TOKEN_ACME, TOKEN_METRICS, bearer, frozen, serve_in_thread

from tiermem import Config, Memory
from tiermem.cli import CliState
from tiermem.cli import cli as cli_group
from tiermem.service import STORAGE_RETRY_AFTER_S
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
CONV = "ro-1"
CLI_TIMEOUT_S = 180


def config(data: Path) -> Config:
    return Config(data_dir=data, auth_tokens={TOKEN_ACME: "acme"}, metrics_tokens=[TOKEN_METRICS])


def post(http: httpx.Client, path: str, body: object) -> httpx.Response:
    return http.post(path, json=body, headers=bearer(TOKEN_ACME))


# (route, body) -- every kind of write
WRITES: list[tuple[str, object]] = [
    (f"/v1/conversations/{CONV}/messages", {"role": "user", "content": "while read-only"}),
    (f"/v1/conversations/{CONV}/messages:batch", {"messages": [{"role": "user", "content": "b"}] * 3}),
    ("/v1/conversations/ro-new/messages", {"role": "user", "content": "a new conversation"}),
    (f"/v1/conversations/{CONV}/checkpoints", {"summary": "fold", "position": 1}),
    (f"/v1/conversations/{CONV}/pins", {"position": 0}),
    (f"/v1/conversations/{CONV}/fork", {"up_to": 1, "new_id": "ro-fork"}),
]


def assert_refused(r: httpx.Response) -> None:
    assert r.status_code == 503, (r.status_code, r.text)
    assert r.headers["retry-after"] == str(STORAGE_RETRY_AFTER_S)
    assert "read-only" in r.json()["detail"] or "failing" in r.json()["detail"]


def history(http: httpx.Client, conv: str = CONV) -> list[str]:
    r = http.get(f"/v1/conversations/{conv}/history", headers=bearer(TOKEN_ACME))
    assert r.status_code == 200, r.text
    return [m["message"]["content"] for m in r.json()["messages"]]


def test_a_live_server_whose_storage_turns_read_only(tmp_path: Path, embedder: FastEmbedder) -> None:
    data = tmp_path / "data"
    cfg = config(data)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url, httpx.Client(base_url=url, timeout=60) as http:
        for i in range(3):
            assert post(http, f"/v1/conversations/{CONV}/messages", {"role": "user", "content": f"m{i}"}).status_code == 201
        assert http.get("/healthz").json()["tiers"]["cold"] == "ok"
        with frozen(data, open_files_too=True):
            for path, body in WRITES:
                assert_refused(post(http, path, body))
            # reads go on from the same connection
            assert history(http) == ["m0", "m1", "m2"]
            r = post(http, f"/v1/conversations/{CONV}/context", {"query": "m1", "budget": 300})
            assert r.status_code == 200, r.text
            health = http.get("/healthz")
            assert health.status_code == 200 and health.json()["status"] == "degraded"
            assert {k: health.json()["tiers"][k] for k in ("cold", "hot")} == {"cold": "read-only", "hot": "disabled"}
            metrics = http.get("/metrics", headers=bearer(TOKEN_METRICS)).text
            assert "tiermem_http_unhandled_errors_total 0.0" in metrics
        # writable again: the next append lands at the next position, nothing half-written
        r = post(http, f"/v1/conversations/{CONV}/messages", {"role": "user", "content": "after"})
        assert r.status_code == 201, r.text
        assert r.json()["position"] == 3
        assert history(http) == ["m0", "m1", "m2", "after"]
        assert http.get("/v1/conversations/ro-new/history", headers=bearer(TOKEN_ACME)).status_code == 404
        assert http.get("/healthz").json()["tiers"]["cold"] == "ok"


def test_a_server_started_on_a_read_only_data_dir(tmp_path: Path, embedder: FastEmbedder) -> None:
    data = tmp_path / "data"
    cfg = config(data)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append(CONV, {"role": "user", "content": "m0"}, namespace="acme")
        mem.append(CONV, {"role": "assistant", "content": "m1"}, namespace="acme")
    with frozen(data), Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
                serve_in_thread(cfg, mem) as url, httpx.Client(base_url=url, timeout=60) as http:
        assert history(http) == ["m0", "m1"]
        r = http.get("/v1/search", params={"q": "m0"}, headers=bearer(TOKEN_ACME))
        assert r.status_code == 200, r.text
        assert [h["text"] for h in r.json()["hits"]] == ["m0"]  # found by bm25: no embedding can be stored
        r = post(http, f"/v1/conversations/{CONV}/context", {"query": "m0", "budget": 300})
        assert r.status_code == 200, r.text
        for path, body in WRITES:
            assert_refused(post(http, path, body))
        assert http.get("/healthz").json()["tiers"]["cold"] == "read-only"


def cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The console script in a child process: what a user runs, its exit status and stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    return subprocess.run([TIERMEM, "--data-dir", str(data), "--namespace", "acme", *args], capture_output=True,
                          text=True, timeout=CLI_TIMEOUT_S, env=env, check=False)


def cli_here(data: Path, embedder: FastEmbedder, *args: str) -> Result:
    """The same command in this process, on the session's embedder: the read commands'
    answers on the frozen dir (each child spawn costs ~2 s of imports and model load)."""
    return CliRunner().invoke(cli_group, ["--data-dir", str(data), "--namespace", "acme", *args],
                              obj=CliState(embedder=embedder))


@pytest.fixture
def populated(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Path]:
    """A data dir with a conversation and a running embedded Redis (its socket inside)."""
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), embedder=embedder, background_indexing=False) as mem:
        mem.append(CONV, {"role": "user", "content": "the vault code is 7-4-1"}, namespace="acme")
        mem.append(CONV, {"role": "assistant", "content": "noted"}, namespace="acme")
        assert mem.hot is not None and mem.hot.embedded is not None
        assert mem.hot.embedded.socket_path.parent == data / "redis"  # inside the frozen tree
    try:
        yield data
    finally:
        EmbeddedRedis(data).stop()


def digest(data: Path) -> dict[str, str]:
    return {str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(data.rglob("*")) if p.is_file()}


@pytest.mark.usefixtures("clean_env")
def test_cli_read_commands_on_a_read_only_data_dir(populated: Path, embedder: FastEmbedder) -> None:
    data = populated
    before = digest(data)
    with frozen(data) as how:
        # the read commands in this process (their answers are the point), the refused
        # write through the console script (its stderr and exit status are)
        h = cli_here(data, embedder, "history", CONV, "--json")
        assert h.exit_code == 0, (how, h.output, h.exception)
        assert [m["message"]["content"] for m in json.loads(h.stdout)] == ["the vault code is 7-4-1", "noted"]
        h = cli_here(data, embedder, "stats", "--json")  # the embedded Redis still runs: it answers
        assert h.exit_code == 0, (h.output, h.exception)
        assert json.loads(h.stdout)["cold"]["messages"] == 2
        h = cli_here(data, embedder, "stop-redis")
        assert h.exit_code == 0, (h.output, h.exception)
        assert "stopped" in h.stdout
        assert not EmbeddedRedis(data).is_running()
        # no Redis and none can start here: stats says so and answers from the cold log
        h = cli_here(data, embedder, "stats", "--json")
        assert h.exit_code == 0, (h.output, h.exception)
        assert "hot tier unavailable" in h.stderr
        assert json.loads(h.stdout)["cold"]["messages"] == 2
        h = cli_here(data, embedder, "search", "vault", "--json")
        assert h.exit_code == 0, (h.output, h.exception)
        # a write is refused with one clear line, not a traceback
        r = cli(data, "append", CONV, "--role", "user", "--content", "refused")
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.splitlines()[-1].startswith("error: storage is read-only"), r.stderr
    # nothing in the data dir changed but what the stopped Redis left (its pidfile, log)
    after = digest(data)
    assert {k: v for k, v in after.items() if not k.startswith("redis/")} == \
        {k: v for k, v in before.items() if not k.startswith("redis/")}
