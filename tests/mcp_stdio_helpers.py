"""What the tests of a real `tiermem mcp` child process share (test_mcp_stdio_burst,
test_mcp_stdio_reader_fault, ...): the checkout the child imports, how long its answers and
its exit may take, the protocol version its host speaks, its environment, and a child
spoken to line by line (`StdioChild`); `started_child` one whose store exists, checked to
exit 0 after, `stdin_log_lines` the warnings it logged of stdin lines, `child_rows` every
row of its store.

Imported explicitly by the test modules (the lead owns conftest.py)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cold_helpers import every_row

REPO = Path(__file__).resolve().parents[1]
ANSWER_TIMEOUT_S = 60.0  # the child's first answer waits on its imports (1-2 s, more on a busy machine)
EXIT_TIMEOUT_S = 30.0
PROTOCOL_VERSION = "2025-06-18"
STDIN_LOG_LINE = "WARNING tiermem.adapters.mcp_stdio: stdin line of"  # the CLI's log format: level, logger, message


def child_env() -> dict[str, str]:
    """The child's whole environment: this checkout's tiermem, no model download, one
    thread per math library, and no Redis to start."""
    return {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
            "TIERMEM_REDIS_URL": "redis://127.0.0.1:1/0",  # unreachable: cold-only, quickly
            "PATH": os.environ.get("PATH", "")}


MARKER_ID = "marker"  # a ping sent after a line: what came before its answer answers the line


class StdioChild:
    """`tiermem mcp` as an MCP host starts it (initialized), its stderr in `log_path`. Its
    stdout is read by a thread into a queue, so that two answers in one read are both seen
    (test_mcp_stdio_strict_numbers, test_mcp_stdio_responses)."""

    def __init__(self, data_dir: Path, log_path: Path, namespace: str = "acme") -> None:
        self.data_dir, self.log_path = data_dir, log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tiermem.cli import main; main()", "--data-dir", str(data_dir),
             "--namespace", namespace, "mcp"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=child_env())
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.write(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}).encode())
        init = self.next_answer()
        assert init["id"] == 0 and "result" in init, init
        self.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def write(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def next_answer(self) -> dict[str, Any]:
        try:
            doc: dict[str, Any] = json.loads(self.lines.get(timeout=ANSWER_TIMEOUT_S))
        except queue.Empty:
            raise AssertionError(f"no answer in {ANSWER_TIMEOUT_S} s") from None
        return doc

    def send(self, line: bytes, *, answered: bool) -> list[dict[str, Any]]:
        """Write `line`, then a ping: the reader answers or passes on each line in order, so
        every answer of `line` that is not a tool's result came before the ping's; a tool's
        result (`answered`: a request the package runs) may come after it and is waited for."""
        self.write(line)
        self.write(json.dumps({"jsonrpc": "2.0", "id": MARKER_ID, "method": "ping"}).encode())
        got: list[dict[str, Any]] = []
        marker_seen = False
        while not marker_seen or (answered and not got):
            doc = self.next_answer()
            if doc.get("id") == MARKER_ID:
                marker_seen = True
            else:
                got.append(doc)
        return got

    def call(self, rid: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tools/call of `tool`, its one answer."""
        (answer,) = self.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                                          "params": {"name": tool, "arguments": arguments}}).encode(), answered=True)
        return answer

    def close(self) -> int:
        """Close stdin; the child's exit status."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        status = self.proc.wait(timeout=EXIT_TIMEOUT_S)
        self._log.close()
        return status


@contextmanager
def started_child(root: Path, conv: str, namespace: str = "acme", *, secret: str | None = None) -> Iterator[StdioChild]:
    """A `StdioChild` under `root` whose store exists (a first message appended to `conv`,
    request id 1). After: stdin closed, the child exited 0 (no crash: the session ends
    when stdin closes) and, given a `secret`, it is nowhere in the child's log."""
    c = StdioChild(root / "data", root / "stderr.log", namespace)
    try:
        first = c.call(1, "append", {"conversation_id": conv, "message": {"role": "user", "content": "first"}})
        assert first["result"]["isError"] is False, first  # the store exists
        yield c
    finally:
        assert c.close() == 0
        if secret is not None:
            assert secret not in c.log_path.read_text()


def stdin_log_lines(child: StdioChild) -> list[str]:
    """The child's log lines about a stdin line it did not answer, in order."""
    return [line for line in child.log_path.read_text().splitlines() if line.startswith(STDIN_LOG_LINE)]


def child_rows(child: StdioChild) -> dict[str, list[str]]:
    """Every row of the child's store (`every_row`): equal before and after, nothing written."""
    (db,) = child.data_dir.rglob("*.db")
    return every_row(db)
