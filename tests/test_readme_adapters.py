"""The README's message-format and adapter examples run as written (each python block
after a `<!-- docs-test -->` marker), offline, in a fresh directory; the MCP-over-HTTP
one against a real `tiermem serve` started with the README's token."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"<!-- docs-test -->\n```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
# what each example must print or leave behind (by its order in the README)
EXPECT = ["", "items in the session", "last block: tool_result", "You asked about Lisbon.", "'append', 'context'",
          "over HTTP: [{'role': 'user', 'content': 'Window seat, always.'}]"]
IDS = ["formats", "openai_agents", "anthropic", "langchain_langgraph", "mcp", "mcp_http"]
README_TOKENS = {"tok-alice-0123456789abcdef": "alice"}  # the token the README's serve command sets


def test_every_marked_block_is_found() -> None:
    assert len(BLOCKS) == len(EXPECT) == len(IDS) == 6


@pytest.mark.parametrize(("code", "expect", "name"), list(zip(BLOCKS, EXPECT, IDS, strict=True)), ids=IDS)
def test_readme_example_runs(tmp_path: Path, code: str, expect: str, name: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    if name == "mcp_http":
        pytest.importorskip("mcp")
        from reliability_helpers import start_server, stop_server

        srv = start_server(tmp_path / "serve-data", tmp_path / "serve.log", env={
            "TIERMEM_AUTH_TOKENS": json.dumps(README_TOKENS), "TIERMEM_REDIS_URL": "redis://127.0.0.1:1/0"})
        try:
            _run(tmp_path, code, expect, {**env, "TIERMEM_URL": srv.url})
        finally:
            stop_server(srv)
        return
    _run(tmp_path, code, expect, env)


def _run(tmp_path: Path, code: str, expect: str, env: dict[str, str]) -> None:
    script = tmp_path / "example.py"
    # the embedded Redis a Memory starts outlives it: stop it when the example ends (each
    # example has a data dir of its own, so that running them in one folder in order works)
    dirs = sorted(set(re.findall(r'data_dir="([^"]+)"', code))) or ["./data"]
    stops = "".join(f"EmbeddedRedis({d!r}).stop()\n" for d in dirs)
    script.write_text(code + "\nfrom tiermem.tiers.redis_server import EmbeddedRedis\n" + stops)
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert expect in out.stdout, out.stdout
