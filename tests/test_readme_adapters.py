"""The README's message-format and adapter examples run as written (each python block
after a `<!-- docs-test -->` marker), offline, in a fresh directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"<!-- docs-test -->\n```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
# what each example must print or leave behind (by its order in the README)
EXPECT = ["", "items in the session", "You asked about Lisbon.", "'append', 'context'"]


def test_every_marked_block_is_found() -> None:
    assert len(BLOCKS) == len(EXPECT) == 4


@pytest.mark.parametrize(("code", "expect"), list(zip(BLOCKS, EXPECT, strict=True)),
                         ids=["formats", "openai_agents", "langchain_langgraph", "mcp"])
def test_readme_example_runs(tmp_path: Path, code: str, expect: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    script = tmp_path / "example.py"
    # the embedded Redis a Memory starts outlives it: stop it when the example ends
    script.write_text(code + "\nfrom tiermem.tiers.redis_server import EmbeddedRedis\nEmbeddedRedis('./data').stop()\n")
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert expect in out.stdout, out.stdout
