"""`tiermem mcp`'s stdio adapter uses the `mcp` package's public interface only: a private
attribute (`MCPServer._lowlevel_server` was one) may be renamed by the next mcp release,
and the adapter would break at start.

Two checks: the source of every tiermem module that imports mcp touches no other
object's private attribute (`x._name`, `getattr(x, "_name")`); and a real child process
serves a real `MCPServer` over its stdin and stdout with that server's private
attributes closed to tiermem's code (reading one raises), answering initialize, the
tools list, a call, a refused line and a read back (sent with carriage returns between
its tokens), as an MCP host drives it. The same
session holds what serving promises the rest of the process: a stray `print` (or a
write on fd 1) inside a tool lands on stderr, never inside the protocol, and stdout is
the wire again once serving ends.
"""

from __future__ import annotations

import ast
import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "tiermem"
ANSWER_TIMEOUT_S = 60.0  # the child's first answer waits on its imports (1-2 s, more on a busy machine)
EXIT_TIMEOUT_S = 30.0
PROTOCOL_VERSION = "2025-06-18"
PARSE_ERROR = -32700
TOOLS = {"append", "context", "history", "search", "pin", "unpin", "erase"}
STRAY_TEXT = "stray print from a tool"
STRAY_FD = b"stray write on fd 1"
SERVED = "served and restored"
OWN_NAMES = {"self", "cls"}  # an object's own private attributes are its own business


def _mcp_modules() -> list[Path]:
    """tiermem's modules that import the `mcp` package (its own folders, not the
    top-level ones linked into it: none of those imports mcp)."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            if any(n == "mcp" or n.startswith("mcp.") for n in names):
                out.append(path)
                break
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_reads(source: str) -> list[str]:
    """Each place in `source` that reads another object's private attribute, as
    'line N: expr'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in OWN_NAMES):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and _private(node.args[1].value)):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


# the scan itself: what it must flag and what it must let be
SCAN_CASES = [
    # what the adapter read before: MCPServer's low-level server
    ("lowlevel = server._lowlevel_server", 1),
    # the same through getattr, so a string does not hide it
    ("lowlevel = getattr(server, '_lowlevel_server')", 1),
    # a class's own state
    ("self._lock = None", 0),
    # dunders are public protocol
    ("cause = exc.__cause__", 0),
    # a private module of tiermem's own, imported by name, is no attribute read
    ("from tiermem.adapters._common import LocalMemory", 0),
]


@pytest.mark.parametrize(("source", "flagged"), SCAN_CASES,
                         ids=["attribute", "getattr", "own", "dunder", "import"])
def test_the_scan_flags_private_reads(source: str, flagged: int) -> None:
    assert len(private_reads(source)) == flagged, private_reads(source)


def test_the_mcp_adapters_are_found() -> None:
    # so that the scan below cannot pass by scanning nothing
    names = {p.name for p in _mcp_modules()}
    assert {"mcp_server.py", "mcp_stdio.py", "mcp_http.py"} <= names, names


@pytest.mark.parametrize("path", _mcp_modules(), ids=lambda p: p.name)
def test_no_private_attribute_of_another_object(path: Path) -> None:
    assert private_reads(path.read_text(encoding="utf-8")) == []


# The child: `tiermem mcp`'s server and transport (build_server, run_stdio), its
# MCPServer's class swapped for one that refuses tiermem's code a private attribute
# (the mcp package's own code reads them as ever), plus one tool that writes stray
# output. After serving it prints on stdout, which must be the wire again.
CHILD = f"""
import os, sys
from mcp.server.mcpserver import MCPServer
from tiermem import Config, Memory
from tiermem.adapters.mcp_server import build_server
from tiermem.adapters.mcp_stdio import run_stdio

class PublicOnly(MCPServer):
    def __getattribute__(self, name):
        if name.startswith("_") and not name.startswith("__"):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.split(".")[0] == "tiermem":
                raise AttributeError(f"{{caller}} read MCPServer.{{name}}, a private attribute of mcp")
        return super().__getattribute__(name)

with Memory(Config(data_dir=sys.argv[1]), hot=False, background_indexing=False) as mem:
    server = build_server(mem.namespaced("acme"))

    @server.tool(description="writes stray output, as a careless library might")
    def shout() -> str:
        print({STRAY_TEXT!r}, flush=True)
        os.write(1, {STRAY_FD!r} + b"\\n")
        return "shouted"

    server.__class__ = PublicOnly
    run_stdio(server)
print({SERVED!r}, flush=True)
"""


class Child:
    """The child above, spoken to line by line as an MCP host speaks to `tiermem mcp`."""

    def __init__(self, data_dir: Path, stderr: Path) -> None:
        env = {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
               "PATH": os.environ.get("PATH", "")}
        self.stderr = stderr
        with stderr.open("wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(data_dir)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, env=env)

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def line(self) -> bytes:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], ANSWER_TIMEOUT_S)
        assert ready, f"no answer in {ANSWER_TIMEOUT_S} s; stderr: {self.stderr.read_text(errors='replace')[-2000:]}"
        line = self.proc.stdout.readline()
        assert line, f"stdout closed; stderr: {self.stderr.read_text(errors='replace')[-2000:]}"
        return line

    def request(self, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode())
        got: dict[str, Any] = json.loads(self.line())  # every line on the wire is one JSON-RPC message
        assert got["id"] == rid, got
        return got

    def call(self, rid: int, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        got = self.request(rid, "tools/call", {"name": tool, "arguments": args})
        assert "result" in got and got["result"]["isError"] is False, got
        result: dict[str, Any] = got["result"]
        return result


def test_served_over_stdio_with_private_attributes_closed(tmp_path: Path) -> None:
    child = Child(tmp_path / "d", tmp_path / "stderr.txt")
    try:
        init = child.request(1, "initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                               "clientInfo": {"name": "test", "version": "1"}})
        assert init["result"]["serverInfo"]["name"] == "tiermem", init
        child.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
        listed = child.request(2, "tools/list", {})
        assert {t["name"] for t in listed["result"]["tools"]} == TOOLS | {"shout"}
        first = child.call(3, "append", {"conversation_id": "c", "message": {"role": "user", "content": "hello"}})
        assert first["structuredContent"]["position"] == 0
        # a line the package would drop unanswered is answered by the adapter, on the same wire
        child.send(b"this is not json")
        refused = json.loads(child.line())
        assert refused["id"] is None and refused["error"]["code"] == PARSE_ERROR, refused
        # stray output inside a tool: not on the wire, whose next line is the call's answer
        assert child.call(4, "shout", {})["structuredContent"] == {"result": "shouted"}
        # a carriage return between tokens is JSON whitespace: the call is answered, not split
        # in two halves the package's reader (universal newlines) would drop unanswered
        child.send(b'{"jsonrpc":"2.0",\r"id":5,"method":"tools/call",\r"params":{"name":"history",'
                   b'"arguments":{"conversation_id":"c"}}}')
        page = json.loads(child.line())
        assert page["id"] == 5 and page["result"]["isError"] is False, page
        assert [m["message"] for m in page["result"]["structuredContent"]["messages"]] == [
            {"role": "user", "content": "hello"}]
        assert child.proc.stdin is not None
        child.proc.stdin.close()
        # stdin closed: serving ends, and what the process prints after goes to stdout again
        assert child.line().decode().rstrip("\n") == SERVED
        assert child.proc.wait(timeout=EXIT_TIMEOUT_S) == 0
    finally:
        if child.proc.poll() is None:  # a failed check above: no child left behind
            child.proc.kill()
            child.proc.wait()
    err = child.stderr.read_text(errors="replace")
    assert "private attribute" not in err, err[-2000:]
    assert STRAY_TEXT in err and STRAY_FD.decode() in err, err[-2000:]
