"""The base install needs no agent framework: tiermem, its CLI and the adapters package
import with all seven blocked, and each adapter module fails only when it is imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BLOCKED = ["openai", "agents", "langchain", "langchain_core", "langgraph", "mcp", "anthropic"]
CODE = f"""
import sys
for name in {BLOCKED!r}:
    sys.modules[name] = None  # import of it raises ImportError
import tiermem, tiermem.cli, tiermem.service, tiermem.adapters
from tiermem import Memory
failed = []
for mod in ["openai_agents", "langchain", "langchain_agent", "langgraph", "mcp_server", "anthropic"]:
    try:
        __import__("tiermem.adapters." + mod)
    except ImportError:
        failed.append(mod)
print(",".join(failed))
"""


def test_base_install_imports_without_the_frameworks() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    # openai_agents imports its SDK lazily (inside the filter), so importing it works;
    # anthropic converts plain dicts and never imports the SDK
    assert out.stdout.strip() == "langchain,langchain_agent,langgraph,mcp_server"
