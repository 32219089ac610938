"""A fault of `tiermem mcp`'s own check of a stdin line answers that line and ends nothing.

The stdio reader checks every line (`mcp_stdio.line_refusal`) in the `mcp` package's
reader thread. An exception there, or in serializing the refusal the check gave, escaped
into the package's reader task and ended the whole session: exit status 1, that line and
every call in flight unanswered. Now the line is answered with a JSON-RPC internal error
(-32603, the request's id when the line gives one a response may carry, else null), it
reaches no tool (nothing written), the traceback is logged at ERROR under tiermem's
logger with the line's size and id but no exception message (which may quote the line),
and the session goes on.

No input is known to make the real check raise (a fuzz of 2 million mutated lines found
none), so the child swaps tiermem's own `line_refusal` for one that faults on a marker
line and checks every other line as ever, as tests/test_mcp_stdio_public_api.py swaps the
server's class: the real `tiermem mcp` command, the real `mcp` package, a real process.
"""

from __future__ import annotations

import json
import select
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from mcp_stdio_helpers import ANSWER_TIMEOUT_S, EXIT_TIMEOUT_S, PROTOCOL_VERSION, child_env

INTERNAL_ERROR = -32603
RAISES = "FAULT-RAISES"  # a line holding it: the check raises
UNWRITABLE = "FAULT-UNWRITABLE"  # ... the check gives a refusal that cannot be serialized
SECRET = "secret words of the user 7319"  # the faulty line's content: never in the log
FAULT_TEXT = "the check quoted the line"  # the exception's message: never in the log
LOGGER_PREFIX = "ERROR tiermem.adapters.mcp_stdio:"  # the CLI's log format: level, logger, message

# `tiermem mcp` with its line check faulting on the marker lines (tiermem's own function,
# looked up by the reader at each line); every other line checked by the real one
CHILD = f"""
from tiermem.adapters import mcp_stdio
checked = mcp_stdio.line_refusal

def faulty(raw):
    if {RAISES.encode()!r} in raw:
        raise RuntimeError({FAULT_TEXT!r} + ": " + raw.decode("utf-8", "replace"))
    if {UNWRITABLE.encode()!r} in raw:  # an id of no JSON-RPC type: JSONRPCError refuses it
        return {{"jsonrpc": "2.0", "id": 1.5, "error": {{"code": -32600, "message": raw.decode("utf-8", "replace")}}}}
    return checked(raw)

mcp_stdio.line_refusal = faulty
from tiermem.cli import main
main()
"""


def _call(rid: Any, tool: str, arguments: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments}}).encode()


def _append(rid: Any, content: str) -> bytes:
    return _call(rid, "append", {"conversation_id": "c", "message": {"role": "user", "content": content}})


# (the faulty line, the id its internal error must carry, the exception type logged, the
# function the traceback must show it raised in)
CASES: list[tuple[bytes, str | int | None, str, str]] = [
    # an append whose check raises: answered with its id, nothing stored
    (_append(2, f"{RAISES} {SECRET}"), 2, "RuntimeError", "faulty"),
    # ... a string id is carried back as well
    (_append("call-2", f"{RAISES} {SECRET}"), "call-2", "RuntimeError", "faulty"),
    # a line that is not JSON: no id to read, null
    (f"{RAISES} {SECRET} not json".encode(), None, "RuntimeError", "faulty"),
    # an id of a lone surrogate: no answer may carry it (not encodable), null
    (_append("\ud800", f"{RAISES} {SECRET}"), None, "RuntimeError", "faulty"),
    # the check's refusal cannot be serialized (pydantic refuses its id): answered with the line's id
    (_append(2, f"{UNWRITABLE} {SECRET}"), 2, "ValidationError", "line_of"),
]


class Session:
    """`tiermem mcp` (with the faulty check) as an MCP host starts it, line by line."""

    def __init__(self, data_dir: Path, stderr: Path) -> None:
        self.data_dir, self.stderr = data_dir, stderr
        with stderr.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", CHILD, "--data-dir", str(data_dir), "--namespace", "acme", "mcp"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=child_env())

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], ANSWER_TIMEOUT_S)
        assert ready, f"no answer in {ANSWER_TIMEOUT_S} s; stderr: {self.errors()[-3000:]}"
        line = self.proc.stdout.readline()
        # before the fix the reader's exception ended the session here: stdout closed
        assert line, f"stdout closed (exit {self.proc.wait(EXIT_TIMEOUT_S)}); stderr: {self.errors()[-3000:]}"
        doc: dict[str, Any] = json.loads(line)
        return doc

    def errors(self) -> str:
        return self.stderr.read_text(errors="replace")

    def stored(self) -> list[str]:
        (db,) = self.data_dir.rglob("*.db")
        with sqlite3.connect(db) as conn:
            return [json.loads(r[0])["content"] for r in conn.execute("SELECT body FROM messages ORDER BY id")]


# the table's ids, for the messages of a failed check
CASE_IDS = ["raises-int-id", "raises-str-id", "raises-not-json", "raises-surrogate-id", "refusal-unserializable"]


def test_a_fault_of_the_check_answers_the_line_and_the_session_goes_on(tmp_path: Path) -> None:
    """Every row of CASES in one session, one after another (a process start is most of a
    row's time): each faulty line is answered and the call behind it goes through, so the
    session also goes on past several faults. Each row's log is read apart (the stderr the
    row added)."""
    s = Session(tmp_path / "d", tmp_path / "stderr.txt")
    logs: list[str] = []  # each row's part of stderr
    try:
        s.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}).encode())
        assert "result" in s.answer()
        s.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
        for n, (case, (line, rid, _raised, _frame)) in enumerate(zip(CASE_IDS, CASES, strict=True)):
            seen = len(s.errors())
            s.send(_append(1, f"before {n}"))
            before = s.answer()
            assert before["id"] == 1 and before["result"]["isError"] is False, (case, before)
            # the faulty line, then a call right behind it without waiting (a host pipelines)
            s.send(line)
            s.send(_append(3, f"after {n}"))
            fault = s.answer()
            assert fault["id"] == rid and "result" not in fault, (case, fault)
            assert fault["error"]["code"] == INTERNAL_ERROR, (case, fault)
            assert SECRET not in json.dumps(fault), (case, fault)  # the answer quotes nothing of the line either
            after = s.answer()
            assert after["id"] == 3 and after["result"]["isError"] is False, (case, after)
            # the faulty line stored nothing: "after" right behind "before"
            assert after["result"]["structuredContent"]["position"] == 2 * n + 1, (case, after)
            logs.append(s.errors()[seen:])  # the row's error is logged before its answer is sent
        assert s.proc.stdin is not None
        s.proc.stdin.close()
        rc = s.proc.wait(timeout=EXIT_TIMEOUT_S)
    finally:
        if s.proc.poll() is None:  # a failed check above: no child left behind
            s.proc.kill()
            s.proc.wait()
    errors = s.errors()
    assert rc == 0, (rc, errors[-3000:])
    assert s.stored() == [f"{w} {n}" for n in range(len(CASES)) for w in ("before", "after")]
    assert SECRET not in errors and FAULT_TEXT not in errors, errors[-3000:]
    for case, (line, rid, raised, frame), log in zip(CASE_IDS, CASES, logs, strict=True):
        # logged once at ERROR under tiermem's logger: the size, the id, the traceback's frames
        # (where it raised among them) and the exception's type, no message and no content
        logged = [ln for ln in log.splitlines() if ln.startswith(LOGGER_PREFIX)]
        assert len(logged) == 1 and f"stdin line of {len(line)} bytes" in logged[0], (case, log[-3000:])
        assert f"(id {rid!r})" in logged[0], (case, logged)
        assert "Traceback (most recent call last)" in log and f", in {frame}\n" in log, (case, log[-3000:])
        assert f"{raised} (its message left out" in log, (case, log[-3000:])
