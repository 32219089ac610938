"""The MCP server against the official `mcp` client: in-process and over stdio
(`tiermem mcp` as a subprocess, the way an MCP host starts it). Tools are listed with
descriptions and schemas, each call works, refused input is a tool error naming the
field that wrote nothing, and every call stays in the server's namespace."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters
from mcp_helpers import check, exercise

from tiermem import Memory
from tiermem.adapters.mcp_server import build_server

REPO = Path(__file__).resolve().parents[1]


def test_in_process(cold_memory: Memory) -> None:
    server = build_server(cold_memory.namespaced("acme"))

    async def run() -> dict[str, Any]:
        async with Client(server) as client:
            return await exercise(client)

    check(asyncio.run(run()))
    # everything landed in the server's namespace, nowhere else
    assert cold_memory.conversations("acme") == ["trip"] and cold_memory.conversations() == []
    assert [t["id"] for t in cold_memory.tombstones(namespace="acme")] == ["scratch"]


def test_tiermem_mcp_over_stdio(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "TIERMEM_REDIS_URL": "redis://127.0.0.1:1/0",  # unreachable: cold-only, quickly
           "PATH": os.environ.get("PATH", "")}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from tiermem.cli import main; main()", "--data-dir", str(tmp_path / "d"),
              "--namespace", "acme", "mcp"], env=env)

    async def run() -> dict[str, Any]:
        async with Client(params, read_timeout_seconds=120) as client:
            return await exercise(client)

    check(asyncio.run(run()))
