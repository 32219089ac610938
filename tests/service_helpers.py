"""Shared machinery of the service tests that need the app in this process.

- `serve_in_thread`: the real app (`create_app`) served by uvicorn on loopback from a
  thread, so that tests speak real HTTP to it and can still reach its Memory;
  `serve_app` the same for an app a test built itself.
- `serve_process`: the real `tiermem serve` as a subprocess, its output in a log file,
  waited for until `/healthz` answers and terminated after; `serve_open` the same with
  `--no-auth`, no hot tier and no scheduler, the runner's TIERMEM_ settings left out.
- `raw_request`: one HTTP/1.1 request written byte for byte on a socket, for what
  clients (httpx included) normalise away: repeated headers, odd Content-Types.
- `served_and_local`: a store served in a thread and one in this process with the same
  Config, for tests that hold a `Client`'s answer against the library's; `stored_rows`
  the rows of a conversation in either (0 where there is none).
- `frozen`: make a directory tree really unwritable, also for root (for whom mode bits
  mean nothing): `chattr +i` as root, `chmod a-w` otherwise; the test is skipped, with
  the reason, where neither can work.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi.responses import JSONResponse
from hash_embedder import HashEmbedder
from ports import free_port

from tiermem import Config, Memory
from tiermem.adapters._common import MemoryLike
from tiermem.service import create_app
from tiermem.tiers.errors import ConversationNotFound

START_TIMEOUT_S = 60.0
READ_TIMEOUT_S = 30.0
TOKEN_ACME = "tok-acme-0123456789abcdef"
TOKEN_ALICE = "tok-acme-alice-0123456789abcdef"
TOKEN_GLOBEX = "tok-globex-0123456789abcdef"
TOKEN_METRICS = "tok-metrics-0123456789abcdef"
# a tenant, one of its users with her own token, and a second tenant
SCOPED_TOKENS = {TOKEN_ACME: "acme", TOKEN_ALICE: "acme/alice", TOKEN_GLOBEX: "globex"}


def bearer(token: str, namespace: str | None = None) -> dict[str, str]:
    h = {"Authorization": f"Bearer {token}"}
    if namespace is not None:
        h["X-Tiermem-Namespace"] = namespace
    return h



@contextmanager
def serve_in_thread(config: Config, memory: Memory, *, drop_paths: Iterable[str] = (),
                    **create_kw: Any) -> Iterator[str]:
    """Serve `memory` over real HTTP on loopback; yields the base URL. `drop_paths`: routes
    the app serves without (an older server that had not got them yet)."""
    app = create_app(config, memory, start_scheduler=False, **create_kw)
    dropped = frozenset(drop_paths)

    async def served_app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in dropped:
            # what FastAPI answers for a path it does not serve
            await JSONResponse({"detail": "Not Found"}, status_code=404)(scope, receive, send)
            return
        await app(scope, receive, send)

    with serve_app(served_app if dropped else app) as url:
        yield url


@dataclass
class Served:
    """A Memory served over real HTTP (`served_store`): its URL, the Memory, its SQLite file."""

    url: str
    memory: Memory
    db: Path


@contextmanager
def served_store(config: Config, embedder: Any = None) -> Iterator[Served]:
    """`config`'s store opened in this process (the hash embedder unless given, no hot
    tier, no background indexing) and served over real HTTP (`serve_in_thread`)."""
    with Memory(config, embedder=embedder or HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(config, mem) as url:
        yield Served(url, mem, config.db_path)


@contextmanager
def served_and_local(root: Path, **settings: Any) -> Iterator[tuple[str, Memory]]:
    """A store served over real HTTP (`serve_in_thread`, tokens `SCOPED_TOKENS`) and one in
    this process with the same Config `settings`, each on its own SQLite under `root`, the
    hash embedder, no hot tier, no background indexing; yields (the served URL, the local
    Memory)."""
    kw: dict[str, Any] = {"auth_tokens": SCOPED_TOKENS, **settings}
    served = Config(data_dir=root / "served", **kw)
    with Memory(served, embedder=HashEmbedder(), hot=False, background_indexing=False) as smem, \
            serve_in_thread(served, smem) as url, \
            Memory(Config(data_dir=root / "local", **kw), embedder=HashEmbedder(), hot=False,
                   background_indexing=False) as local:
        yield url, local


def stored_rows(mem: MemoryLike, conv: str) -> int:
    """The rows `conv` holds in `mem` (a Memory's namespace or a Client): 0 where it has none."""
    try:
        return len(mem.history(conv))
    except ConversationNotFound:
        return 0


@contextmanager
def serve_app(app: Any, *, lifespan: str = "on") -> Iterator[str]:
    """Serve the ASGI `app` by uvicorn on loopback from a thread; yields the base URL once
    uvicorn has started, stops it after. `lifespan="off"` runs it as `uvicorn --lifespan
    off` does (the app's startup never runs)."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan=lifespan))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextmanager
def serve_process(data_dir: Path, port: int, log: Path, *args: str, env: dict[str, str],
                  cwd: Path | None = None) -> Iterator[str]:
    """`tiermem --data-dir DATA_DIR serve --port PORT ARGS...` with `env`, stdout and stderr
    in `log`; yields its URL once `/healthz` answers (200 or 503), terminates it after.
    `cwd`: where it runs (`python -m` imports the package found there first: an older
    release's tree, with PYTHONPATH naming it too)."""
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tiermem.cli", "--data-dir", str(data_dir), "serve",
                                 "--port", str(port), *args], stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=cwd)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                if httpx.get(url + "/healthz").status_code in (200, 503):
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=START_TIMEOUT_S)


# a Redis URL nothing listens on: the served child runs without a hot tier
NO_HOT_TIER_URL = "redis://127.0.0.1:1/0"


@contextmanager
def serve_open(root: Path) -> Iterator[str]:
    """A real `tiermem serve --no-auth` child with its data in `root/data` and its output in
    `root/serve.log`; yields its URL. The runner's TIERMEM_ settings stay out; no hot tier
    and no scheduler (what the callers test is the HTTP path, not those)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    env.update({"TIERMEM_REDIS_URL": NO_HOT_TIER_URL, "TIERMEM_SCHEDULER_ENABLED": "false"})
    with serve_process(root / "data", free_port(), root / "serve.log", "--no-auth", env=env) as served:
        yield served


def raw_request(url: str, method: str, path: str, headers: list[tuple[str, str]], body: bytes = b"") -> tuple[int, dict[str, str], Any]:
    """Send exactly these header lines (repeats included) and `body`; return the status,
    the response headers (lower-case) and the JSON body."""
    host, port = url.removeprefix("http://").split(":")
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers]
    if not any(k.lower() == "content-length" for k, _ in headers):
        lines.append(f"Content-Length: {len(body)}")
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    with socket.create_connection((host, int(port)), timeout=READ_TIMEOUT_S) as s:
        s.sendall(data)
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    raw = b"".join(chunks)
    head, _, payload = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    resp_headers = {}
    for line in header_lines:
        k, _, v = line.partition(":")
        resp_headers[k.strip().lower()] = v.strip()
    try:
        doc: Any = json.loads(payload) if payload else None
    except ValueError:
        doc = payload.decode(errors="replace")
    return int(status_line.split()[1]), resp_headers, doc


def _tree(root: Path) -> list[Path]:
    out = [root]
    for dirpath, dirnames, filenames in os.walk(root):
        out += [Path(dirpath) / n for n in dirnames + filenames]
    # sockets and other special files cannot carry the flag (and need none)
    return [p for p in out if stat.S_ISDIR(p.lstat().st_mode) or stat.S_ISREG(p.lstat().st_mode)]


def _chattr(flag: str, paths: list[Path]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True, check=False)


@contextmanager
def frozen(root: Path, *, open_files_too: bool = False) -> Iterator[str]:
    """`root` and everything in it unwritable for this process until the block ends;
    yields how ("chattr" or "chmod"). `open_files_too`: also descriptors opened before
    (a live SQLite connection), which only the immutable flag stops."""
    paths = _tree(root)
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("running as root without chattr: cannot make a directory read-only for root")
        done = _chattr("+i", paths)
        if done.returncode != 0:
            _chattr("-i", paths)
            pytest.skip(f"chattr +i refused (no CAP_LINUX_IMMUTABLE or a file system without it): "
                        f"{done.stderr.decode(errors='replace').strip()}")
        try:
            yield "chattr"
        finally:
            _chattr("-i", _tree(root))
        return
    if open_files_too:
        pytest.skip("not root: only chattr +i (root) makes writes on already open files fail")
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in paths}
    for p in sorted(paths, key=lambda q: -len(q.parts)):  # files before their directories
        os.chmod(p, modes[p] & ~0o222)
    try:
        yield "chmod"
    finally:
        for p in sorted(paths, key=lambda q: len(q.parts)):
            os.chmod(p, modes[p])
