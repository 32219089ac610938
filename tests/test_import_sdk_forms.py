"""A re-import adds nothing, also for messages in an openai SDK object's serialized form.
`append` stores such a message in its wire form (`tiers.models._sdk_wire_form`: the
Python name `async_` renamed `async`, the client-side `parsed` / `parsed_arguments`
dropped), but the import's reader kept the file's form, so the check of what is already
stored compared the stored wire form with the file's and called it a different message:
importing the same file twice (or rerunning an import that was killed halfway) failed
with "already holds a different message" instead of adding nothing (a bug hunt, 2026-12-06)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from convo_fixtures import write_jsonl

from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

ASK = {"role": "user", "content": "what is the weather in Paris?"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}

# (id, a message as an SDK object's model_dump() / to_dict() writes it)
SDK_FORMS: list[tuple[str, dict[str, Any]]] = [
    # ParsedChatCompletionMessage.model_dump(): the structured output's parse under `parsed`
    ("chat_parsed", {"role": "assistant", "content": "{\"city\": \"Paris\"}", "refusal": None,
                     "parsed": {"city": "Paris"}, "tool_calls": None}),
    # a parsed tool call: `parsed_arguments` beside the function's arguments
    ("chat_parsed_arguments", {"role": "assistant", "content": None, "tool_calls": [
        {**CALL, "function": {**CALL["function"], "parsed_arguments": {"city": "Paris"}}}]}),
    # ParsedResponseFunctionToolCall: a Responses call item with its arguments parsed
    ("item_parsed_arguments", {"type": "function_call", "call_id": "call_1", "name": "weather",
                               "arguments": "{}", "parsed_arguments": {}}),
    # a Responses call item dumped by Python field name (no by_alias): `async_`
    ("item_python_names", {"type": "function_call", "call_id": "call_1", "name": "weather",
                           "arguments": "{}", "async_": False}),
    # ParsedResponseOutputMessage: an output_text part carrying its parse
    ("output_text_parsed", {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
                            "content": [{"type": "output_text", "text": "{}", "annotations": [],
                                         "parsed": {}}]}),
]


@pytest.mark.parametrize("message", [m for _, m in SDK_FORMS], ids=[i for i, _ in SDK_FORMS])
def test_importing_the_same_file_again_adds_nothing(tmp_path: Path, embedder: FastEmbedder,
                                                    message: dict[str, Any]) -> None:
    f = write_jsonl(tmp_path / "in.jsonl", [{"conversation_id": "c1", "message": m} for m in (ASK, message)])
    first = tm(tmp_path, embedder, "", "import", str(f), "--json")
    assert first.exit_code == 0, first.output
    again = tm(tmp_path, embedder, "", "import", str(f), "--json")
    assert again.exit_code == 0, again.output
    report = json.loads(again.stdout)
    assert (report["appended"], report["already_present"]) == (0, 2)


def test_a_rerun_after_a_partial_import_adds_only_the_rest(tmp_path: Path, embedder: FastEmbedder) -> None:
    # what a killed import leaves: the first messages committed, the rest not; the rerun
    # of the whole file must append only the rest
    lines = [{"conversation_id": "c1", "message": m} for _, m in SDK_FORMS]
    head = write_jsonl(tmp_path / "head.jsonl", lines[:3])
    assert tm(tmp_path, embedder, "", "import", str(head)).exit_code == 0
    rerun = tm(tmp_path, embedder, "", "import", str(write_jsonl(tmp_path / "all.jsonl", lines)), "--json")
    assert rerun.exit_code == 0, rerun.output
    report = json.loads(rerun.stdout)
    assert (report["appended"], report["already_present"]) == (len(lines) - 3, 3)
