"""A whole `ChatCompletion`, or one of its `Choice`s, appended where a message goes, is
refused saying what to append: `completion.choices[0].message`. Before, either (object,
`model_dump()` or the JSON body over HTTP) was refused `role: Field required (a chat
message needs a role, a Responses item a type)`, which named a field the caller never
wrote and not the message inside. Nothing is written; the message itself still appends.
The SDK's own classes (the installed `openai` package, no network), a real Memory (cold
log), the real app over real HTTP."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hash_embedder import HashEmbedder
from openai.types.chat import ChatCompletion
from service_helpers import READ_TIMEOUT_S, serve_in_thread

from tiermem import Config, Memory
from tiermem.tiers.errors import ValidationError

pytestmark = pytest.mark.usefixtures("clean_env")

COMPLETION = ChatCompletion.model_validate({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1_765_000_000, "model": "gpt-4o-mini",
    "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                 "message": {"role": "assistant", "content": "Paris.", "refusal": None}}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
})
SAYS = "completion.choices[0].message"  # what every refusal tells the caller to append

# (what the caller passed, the words that say what it is)
CASES: list[tuple[Callable[[], Any], str]] = [
    # the SDK object itself
    (lambda: COMPLETION, "whole chat completion"),
    # its model_dump(), nulls and all
    (lambda: COMPLETION.model_dump(), "whole chat completion"),
    # its JSON as a plain dict, nulls left out
    (lambda: COMPLETION.model_dump(exclude_none=True), "whole chat completion"),
    # one Choice object
    (lambda: COMPLETION.choices[0], "chat completion's choice"),
    # a Choice dumped
    (lambda: COMPLETION.choices[0].model_dump(), "chat completion's choice"),
]


def _memory(tmp_path: Path) -> Memory:
    return Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False, background_indexing=False)


@pytest.mark.parametrize(("given", "what"), CASES)
def test_append_says_which_message_to_pass(tmp_path: Path, given: Callable[[], Any], what: str) -> None:
    with _memory(tmp_path) as mem:
        with pytest.raises(ValidationError) as got:
            mem.append("trip", given())
        assert got.value.field == "message" and what in got.value.problem and SAYS in got.value.problem, got.value
        assert "role: Field required" not in str(got.value)
        assert mem.conversations() == []  # nothing written
        # what the error says works
        assert mem.append("trip", COMPLETION.choices[0].message) == 0
        assert mem.history("trip")[0].body["content"] == "Paris."


@pytest.mark.parametrize(("given", "what"), [c for c in CASES if isinstance(c[0](), dict)])  # JSON bodies
def test_the_service_says_it_too(tmp_path: Path, given: Callable[[], Any], what: str) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem, auth=False) as url:
        r = httpx.post(f"{url}/v1/conversations/trip/messages", json=given(), timeout=READ_TIMEOUT_S)
        assert r.status_code == 422, r.text
        assert what in r.text and SAYS in r.text and "Field required" not in r.text, r.text
        assert mem.conversations() == []  # nothing written
