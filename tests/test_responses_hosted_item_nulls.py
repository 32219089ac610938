"""Hosted-tool items (stored and sent verbatim) go out in a form the API's request type
takes: a top-level field it requires and allows null in (`code_interpreter_call.outputs`
and `.code`, `image_generation_call.result`: `tiers.formats.REQUIRED_NULL_FIELDS`) is sent
with its null, and an item appended as the `openai` SDK's object is stored as the SDK
sends one (`exclude_unset`: `tiers.models.sdk_dump`), without the nulls of the fields
the reply did not carry (a web search's `action.queries`, `action.sources`).

On the code before, the context left out the required nulls (the SDK's request type
refuses the item without the key) and sent the web search's `action` with
`queries: null, sources: null`, which it refuses too.

Real SQLite files, the real `openai` SDK: the reply parsed into a `Response`, its items
appended as they are, the context validated against `ResponseInputItemParam`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ForwardRef, get_args

import pytest
from openai.types.responses import ResponseInputItemParam
from sdk_corpus import format_memory, sdk_output, valid_responses

from tiermem import Memory

CODE = {"type": "code_interpreter_call", "id": "ci_1", "status": "completed", "code": "print(1)",
        "container_id": "cntr_1", "outputs": None}
CODE_PENDING = {"type": "code_interpreter_call", "id": "ci_2", "status": "in_progress", "code": None,
                "container_id": "cntr_1", "outputs": None}
IMAGE = {"type": "image_generation_call", "id": "ig_1", "status": "generating", "result": None}
WEB = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}}
SAID = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "done", "annotations": []}]}

ITEMS = [
    pytest.param(CODE, id="code_interpreter_call-outputs-null"),      # no outputs asked for
    pytest.param(CODE_PENDING, id="code_interpreter_call-code-null"),  # code not written yet
    pytest.param(IMAGE, id="image_generation_call-result-null"),       # an image still generating
    pytest.param(WEB, id="web_search_call-action-without-queries"),    # the SDK's dump: queries/sources null
]


@pytest.fixture
def mem(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Memory]:
    with format_memory(tmp_path, request.param) as m:  # the context_format each test names
        yield m


@pytest.mark.parametrize("mem", ["as_stored", "responses"], indirect=True)
@pytest.mark.parametrize("item", ITEMS)
def test_a_hosted_item_appended_as_the_sdk_object_is_sent_valid(mem: Memory, item: dict[str, Any]) -> None:
    mem.append("c", {"role": "user", "content": "run it"})
    mem.append_many("c", sdk_output([item, SAID]))
    mem.append("c", {"role": "user", "content": "and now?"})
    sent = mem.context("c", "and now?", budget=4000).messages
    valid_responses(sent)  # the SDK's own request types, unknown keys forbidden
    (out,) = [s for s in sent if s.get("type") == item["type"]]
    assert out == item  # as the reply had it: its required nulls, nothing unset added
    (stored,) = [r.body for r in mem.history("c") if r.body.get("type") == item["type"]]
    assert stored == item


@pytest.mark.parametrize("mem", ["as_stored"], indirect=True)
def test_a_required_null_given_in_a_dict_is_sent(mem: Memory) -> None:
    # the caller's own dict (an SDK item's model_dump()): its required null goes out; a
    # null the request type does not require (an optional one) is left out as before
    mem.append("c", {"role": "user", "content": "run it"})
    mem.append_many("c", [{**IMAGE, "revised_prompt": None}, SAID])
    mem.append("c", {"role": "user", "content": "and now?"})
    sent = mem.context("c", "and now?", budget=4000).messages
    valid_responses(sent)
    assert [s for s in sent if s.get("type") == "image_generation_call"] == [IMAGE]


def test_the_required_nulls_are_the_sdks() -> None:
    # every top-level `Required[Optional[...]]` field of the SDK's request types for items
    # tiermem sends verbatim, and no other
    from tiermem.tiers.formats import REQUIRED_NULL_FIELDS
    found: dict[str, set[str]] = {}
    for m in get_args(ResponseInputItemParam):
        ann: dict[str, Any] = {}
        for base in reversed(m.__mro__):
            ann.update(getattr(base, "__annotations__", {}))
        text = {k: v.__forward_arg__ if isinstance(v, ForwardRef) else str(v) for k, v in ann.items()}
        kind = text.get("type", "").removeprefix("Required[Literal['").removesuffix("']]")
        nullable = {k for k, v in text.items() if v.startswith("Required[Optional[")}
        if nullable:
            found.setdefault(kind, set()).update(nullable)
    assert found == {k: set(v) for k, v in REQUIRED_NULL_FIELDS.items()}
