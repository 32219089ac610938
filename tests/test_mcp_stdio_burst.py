"""A burst of calls written to a freshly started `tiermem mcp` without waiting for answers
gets every answer right.

The tools run in worker threads (the `mcp` package runs a sync tool with
`anyio.to_thread`), and so does the stdin reader, which checks each line (`line_refusal`).
Both imported the HTTP service's modules lazily, on first use: the tools
`tiermem.service.schemas` (`render`, `_token`, `_expected_key`), the reader
`tiermem.service.guard` for a line the package's parser refuses. Those modules import each
other (the package's `__init__` imports every one, `auth` imports `schemas`), and where two
threads import two of them at once Python's import locks see a deadlock and hand one
thread a partly initialised module: an append answered `ImportError: cannot import name
'NAMESPACE_HEADER' from 'tiermem.service.auth'` and the reader died of a `_DeadlockError`,
which ended the session (exit status 1, no call answered). Now `build_server` and
`serve_stdio` import them in the calling thread before serving.

Real child processes, the lines written byte for byte in one write as a host that does
not wait writes them; each layout in a fresh child (the race is in the first imports).
"""

from __future__ import annotations

import json
import queue
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import pytest

pytest.importorskip("mcp")
from mcp_stdio_helpers import ANSWER_TIMEOUT_S, EXIT_TIMEOUT_S, PROTOCOL_VERSION, child_env

PARSE_ERROR = -32700
CONVERSATIONS = 3  # the burst's appends go round these
UNPARSEABLE = b"this is not json"  # refused by the reader (line_refusal), through the service's guard
APPEND = "append"
READ = "history"  # a read: its rows are rendered by the service's `finite`
EOF = None  # what the answer queue holds once the child closed stdout
IMPORT_THREADS = 8  # threads importing the service's modules at once in the in-process check
# what the stdio reader and the tools import on first use (mcp_server.LAZY_SERVICE_MODULES),
# named here too: the check must not pass because that list went empty
SERVICE_ENTRIES = ["tiermem.service.guard", "tiermem.service.schemas"]


def _lines(stream: IO[bytes], into: queue.Queue[dict[str, Any] | None]) -> None:
    """Every answer line of `stream` parsed into `into`, then EOF (a reader thread: the
    answers come in a burst, more than one per read)."""
    for raw in stream:
        into.put(json.loads(raw))
    into.put(EOF)


def _call(rid: int, tool: str, arguments: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments}}).encode()


def _append(rid: int) -> bytes:
    return _call(rid, APPEND, {"conversation_id": f"c{rid % CONVERSATIONS}",
                               "message": {"role": "user", "content": f"message {rid}"}})


def _read(rid: int) -> bytes:
    return _call(rid, READ, {"conversation_id": f"c{rid % CONVERSATIONS}"})


# (how many calls, appends and reads mixed; where the unparseable line goes: after that many
# calls, None for none). Calls alone were answered right before too: every tool thread
# imported the same module first (schemas), and those wait on one another's import.
LAYOUTS: dict[str, tuple[int, int | None]] = {
    # the refused line last: the reader imports the guard while the first appends import schemas
    "unparseable-after-the-calls": (30, 30),
    # ... early, while the first append's thread is still starting its imports
    "unparseable-after-three-calls": (30, 3),
}


def _burst(calls: int, unparseable_at: int | None) -> tuple[list[bytes], dict[int, str]]:
    """The burst's lines and, by id, which tool each call is (every fifth one a read)."""
    lines = [json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()]
    tools: dict[int, str] = {}
    for n in range(calls):
        if n == unparseable_at:
            lines.append(UNPARSEABLE)
        rid = n + 1
        tools[rid] = READ if rid % 5 == 0 else APPEND
        lines.append(_read(rid) if tools[rid] == READ else _append(rid))
    if unparseable_at == calls:
        lines.append(UNPARSEABLE)
    return lines, tools


def _stored(data_dir: Path) -> list[tuple[str, str]]:
    (db,) = data_dir.rglob("*.db")
    with sqlite3.connect(db) as conn:
        return [(str(r[0]), str(r[1])) for r in conn.execute("SELECT conversation_id, body FROM messages ORDER BY id")]


@pytest.mark.parametrize(("calls", "unparseable_at"), list(LAYOUTS.values()), ids=list(LAYOUTS))
def test_a_burst_to_a_fresh_child_gets_every_answer(tmp_path: Path, calls: int, unparseable_at: int | None) -> None:
    data_dir = tmp_path / "d"
    stderr_path = tmp_path / "stderr.txt"
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from tiermem.cli import main; main()", "--data-dir", str(data_dir),
             "--namespace", "acme", "mcp"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=child_env())
    assert proc.stdin is not None and proc.stdout is not None
    answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, answers), daemon=True).start()
    try:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}).encode() + b"\n")
        proc.stdin.flush()
        init = answers.get(timeout=ANSWER_TIMEOUT_S)
        assert init is not None and "result" in init, init
        lines, tools = _burst(calls, unparseable_at)
        proc.stdin.write(b"".join(line + b"\n" for line in lines))  # one write: no call waits on another
        proc.stdin.flush()
        expected = len(tools) + (unparseable_at is not None)
        got: list[dict[str, Any]] = []
        while len(got) < expected:
            answer = answers.get(timeout=ANSWER_TIMEOUT_S)
            if answer is EOF:
                break
            got.append(answer)
        proc.stdin.close()
        rc = proc.wait(timeout=EXIT_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    errors = stderr_path.read_text(errors="replace")
    # the session lived to the end: every line answered, a clean exit, nothing raised
    assert len(got) == expected and rc == 0, (len(got), expected, rc, errors[-3000:])
    assert "ImportError" not in errors and "Deadlock" not in errors and "Traceback" not in errors, errors[-3000:]
    by_id = {a["id"]: a for a in got if a.get("id") is not None}
    assert sorted(by_id) == sorted(tools), sorted(by_id)
    refusals = [a for a in got if a.get("id") is None]
    assert len(refusals) == (unparseable_at is not None)
    assert all(a["error"]["code"] == PARSE_ERROR for a in refusals), refusals
    positions: dict[str, list[int]] = {}
    for rid, tool in tools.items():
        result = by_id[rid]["result"]
        conv = f"c{rid % CONVERSATIONS}"
        if tool == READ:
            # a read racing the appends of its conversation may find it empty (not found):
            # a tool error naming it, never an exception
            text = json.dumps(result)
            assert result["isError"] is False or "not found" in text, result
            continue
        assert result["isError"] is False, result
        positions.setdefault(conv, []).append(result["structuredContent"]["position"])
    # every append stored once, each at its own position
    for conv, seen in positions.items():
        assert sorted(seen) == list(range(len(seen))), (conv, seen)
    appended = {rid for rid, tool in tools.items() if tool == APPEND}
    stored = _stored(data_dir)
    assert sorted(json.loads(body)["content"] for _, body in stored) == sorted(f"message {rid}" for rid in appended)


CHECK = f"""
import threading
from tiermem.adapters.mcp_server import build_server
build_server(resolve=lambda ctx: None)  # no call is made: no memory needed
entries = {SERVICE_ENTRIES!r}
barrier = threading.Barrier({IMPORT_THREADS})
failed = []
def load(i):
    barrier.wait()
    try:
        __import__(entries[i % len(entries)])
    except BaseException as exc:
        failed.append(type(exc).__name__ + ": " + str(exc))
threads = [threading.Thread(target=load, args=(i,)) for i in range({IMPORT_THREADS})]
for t in threads: t.start()
for t in threads: t.join()
print(failed)
"""


def test_after_build_server_threads_import_the_service_modules_at_once() -> None:
    """Deterministic where the burst is a race: in a fresh process, after `build_server`,
    threads released together import the guard and the schemas (what the reader and the
    tools import) with no error. Before, every run failed: an ImportError in one thread, a
    _DeadlockError in another."""
    out = subprocess.run([sys.executable, "-c", CHECK], env=child_env(), capture_output=True, text=True,
                         timeout=ANSWER_TIMEOUT_S)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "[]", out.stdout
