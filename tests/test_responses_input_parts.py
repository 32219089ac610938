"""A role-only Responses message keeps its input parts in a Responses context
(`context_format="responses"`, tiers.formats.to_responses).

Before, a user message stored with `input_image` / `input_file` parts (the Responses
API's own shape, without `type: "message"`) reached the model as the text "[image]" or
"[file]": the conversion read every part as a Chat Completions part.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.formats import to_responses

IMAGE = {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "high"}
FILE = {"type": "input_file", "file_id": "file-abc123"}
TEXT = {"type": "input_text", "text": "what is in this?"}

CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # (case, stored user message, the part the context must carry)
    ("responses image", {"role": "user", "content": [TEXT, IMAGE]}, IMAGE),
    ("responses file", {"role": "user", "content": [TEXT, FILE]}, FILE),
    # control: a Chat Completions image part converts to the Responses shape
    ("chat image", {"role": "user", "content": [{"type": "text", "text": "what is in this?"},
                                                 {"type": "image_url", "image_url": {"url": IMAGE["image_url"],
                                                                                     "detail": "high"}}]}, IMAGE),
]


@pytest.mark.parametrize(("body", "part"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_part_reaches_the_context(tmp_path: Path, embedder: Embedder, body: dict[str, Any],
                                      part: dict[str, Any]) -> None:
    (item,) = to_responses([body])
    assert part in item["content"]
    cfg = Config(data_dir=tmp_path / "data", context_format="responses")  # type: ignore[arg-type]
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("c", body)
        ctx = mem.context("c", "what is in this?", 2000)
        assert part in ctx.messages[-1]["content"]
