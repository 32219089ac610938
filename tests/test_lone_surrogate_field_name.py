"""A string with a lone surrogate is refused at the edge, named by where it is.

UTF-8 cannot encode a lone surrogate (a file name decoded with `surrogateescape`), so the
library refuses a message holding one and writes nothing (docs/design.md invariant 8).
`parse_message` named every such refusal `content`, wherever the string was: a Responses
tool output's `output`, or its `output[0].text` (the reviewer's
repro_surrogate_field_name.py). Now the first such string is named by its place
(`tiers.plain_json.lone_surrogate`), as the HTTP API's guard names it. Every format the
library takes: chat, Responses, Anthropic (`from_anthropic`, which names its own).
Real SQLite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tiermem.adapters.anthropic import from_anthropic
from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ConversationNotFound, ValidationError

BAD = "caf\udce9.txt"  # b"caf\xe9.txt" decoded as UTF-8 with surrogateescape
QUESTION = {"role": "user", "content": "List the files."}
PROBLEM = "lone surrogate"

# (case, a message holding BAD, the field the refusal names, within the batch's messages[1])
CASES: list[tuple[str, dict[str, Any], str]] = [
    # a chat message's text (passed before too)
    ("chat content", {"role": "user", "content": BAD}, "content"),
    # a chat content part's text (failed before: "content")
    ("chat content part", {"role": "user", "content": [{"type": "text", "text": BAD}]}, "content[0].text"),
    # a chat tool call's arguments (failed before: "content")
    ("chat tool call arguments", {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": f'{{"p": "{BAD}"}}'}}]},
     "tool_calls[0].function.arguments"),
    # a chat tool result (passed before too: its text is `content`)
    ("chat tool result", {"role": "tool", "tool_call_id": "call_1", "content": BAD}, "content"),
    # a Responses tool output, a string (failed before: "content")
    ("responses output", {"type": "function_call_output", "call_id": "call_1", "output": BAD}, "output"),
    # a Responses tool output, a list of parts (failed before: "content")
    ("responses output part", {"type": "function_call_output", "call_id": "call_1",
                               "output": [{"type": "input_text", "text": BAD}]}, "output[0].text"),
    # a Responses call's arguments (failed before: "content")
    ("responses call arguments", {"type": "function_call", "call_id": "call_1", "name": "ls",
                                  "arguments": f'{{"p": "{BAD}"}}'}, "arguments"),
    # a Responses message's input_text part (failed before: "content")
    ("responses message part", {"role": "user", "content": [{"type": "input_text", "text": BAD}]},
     "content[0].text"),
]


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Any:
    with Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


@pytest.mark.parametrize(("label", "message", "field"), CASES, ids=[c[0] for c in CASES])
def test_the_refusal_names_the_string_with_the_lone_surrogate(mem: Memory, label: str, message: dict[str, Any],
                                                             field: str) -> None:
    with pytest.raises(ValidationError) as err:
        mem.append_many("c", [QUESTION, message])
    assert err.value.field == f"messages[1].{field}"
    assert PROBLEM in str(err.value)
    with pytest.raises(ConversationNotFound):  # nothing written: the batch is all or nothing
        mem.history("c")


def test_a_key_with_a_lone_surrogate_is_named_by_its_place(mem: Memory) -> None:
    # a dict key inside a Responses output part (failed before: "content")
    item = {"type": "function_call_output", "call_id": "call_1", "output": [{"type": "input_text", "text": "x",
                                                                             BAD: 1}]}
    with pytest.raises(ValidationError) as err:
        mem.append("c", item)
    assert err.value.field.startswith("output[0]")
    assert f"a key is not valid UTF-8 ({PROBLEM})" in str(err.value)


def test_anthropic_names_its_own_block() -> None:
    # the Anthropic format is converted by `from_anthropic`, which names the block (passed before too)
    with pytest.raises(ValidationError) as err:
        from_anthropic({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                     "content": [{"type": "text", "text": BAD}]}]})
    assert err.value.field == "content[0].content[0].text"
