"""A reasoning item's `id`, where given, is a non-empty string on append, as the Responses
API's request type has it (`ResponseReasoningItemParam.id: str`).

One whose id was a number or null was stored: every context and Agents session sending
it back broke the request (the SDK's request type refuses it, the provider answers 400).
Now refused at append naming `id` (nothing of the batch written), on the library, the
HTTP service and the Agents session's `add_items`; a row stored before is still read
(not salvaged). An item without an id is accepted: the Agents SDK's
`reasoning_item_id_policy="omit"` saves and sends reasoning items so
(tests/test_agents_reasoning_id_omitted.py). Real SQLite, the real `openai` and
`openai-agents` packages; the row of an older version written behind tiermem's back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cold_helpers import rewrite_stored
from fastapi.testclient import TestClient
from openai.types.responses import ResponseReasoningItemParam
from pydantic import TypeAdapter

from tiermem import Config, Memory
from tiermem.errors import ValidationError
from tiermem.service import create_app
from tiermem.tiers.embed import Embedder

CONV = "c"
ASK = {"role": "user", "content": "Which fare is cheaper?"}
REPLY = {"role": "assistant", "content": "The Tuesday one."}
WHY = "(a reasoning item's id is the string the provider gave it, as 'rs_...')"
REASONING_PARAM = TypeAdapter(ResponseReasoningItemParam)


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as m:
        yield m


REFUSED: list[tuple[dict[str, Any], str]] = [
    # a number (an id read from a caller's own numbering)
    ({"type": "reasoning", "id": 7, "summary": []}, f"id: must be a string, got int {WHY}"),
    # an explicit null (what a dump of an item built without one writes)
    ({"type": "reasoning", "id": None, "summary": [], "encrypted_content": "gAAAA"},
     f"id: must be a string, got null {WHY}"),
    # a list, an id of several
    ({"type": "reasoning", "id": ["rs_1"], "summary": []}, f"id: must be a string, got list {WHY}"),
    # empty: no item of the provider's has it (the same rule as a tool call's id)
    ({"type": "reasoning", "id": "", "summary": []}, f"id: must not be empty {WHY}"),
]
REFUSED_IDS = ["int", "null", "list", "empty"]


@pytest.mark.parametrize(("item", "expected"), REFUSED, ids=REFUSED_IDS)
def test_a_reasoning_item_without_a_string_id_is_refused(mem: Memory, item: dict[str, Any],
                                                         expected: str) -> None:
    mem.append(CONV, ASK)
    with pytest.raises(ValidationError) as info:
        mem.append_many(CONV, [item, REPLY])
    assert str(info.value) == f"messages[0].{expected}"
    assert [m.body for m in mem.history(CONV)] == [ASK]  # nothing of the batch written


def test_the_request_type_refuses_what_append_refuses() -> None:
    # the refused forms break the request: the openai SDK's own param type says so (the
    # empty id aside, which it types as a string)
    for item, _expected in REFUSED[:3]:
        with pytest.raises(Exception, match="id"):
            REASONING_PARAM.validate_python(item)


@pytest.mark.parametrize(("item", "expected"), REFUSED, ids=REFUSED_IDS)
def test_the_service_refuses_it_naming_id(mem: Memory, item: dict[str, Any], expected: str) -> None:
    mem.append(CONV, ASK)
    app = create_app(mem.config, mem, auth=False, start_scheduler=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        r = client.post(f"/v1/conversations/{CONV}/messages", json=item)
    assert r.status_code == 422
    assert [(d["loc"], d["msg"]) for d in r.json()["detail"]] == [(["body", "id"], expected.split(": ", 1)[1])]
    assert [m.body for m in mem.history(CONV)] == [ASK]  # nothing written


def test_the_agents_session_refuses_it_writing_nothing(mem: Memory) -> None:
    pytest.importorskip("agents")
    from tiermem.adapters.openai_agents import TiermemSession

    session = TiermemSession(mem, CONV)
    asyncio.run(session.add_items([ASK]))
    with pytest.raises(ValidationError, match=r"^messages\[0\]\.id: must be a string, got null"):
        asyncio.run(session.add_items([{"type": "reasoning", "id": None, "summary": []}, REPLY]))
    assert asyncio.run(session.get_items()) == [ASK]


ACCEPTED: list[dict[str, Any]] = [
    # the provider's id, no summary written
    {"type": "reasoning", "id": "rs_1", "summary": []},
    # what an SDK reply's model_dump() writes (nulls included)
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Compare fares."}],
     "content": None, "encrypted_content": None, "status": None},
]


@pytest.mark.parametrize("item", ACCEPTED, ids=["empty summary", "sdk dump"])
def test_a_string_id_is_stored_as_given(mem: Memory, item: dict[str, Any]) -> None:
    mem.append_many(CONV, [ASK, item, REPLY])
    assert [m.body for m in mem.history(CONV)] == [ASK, item, REPLY]
    sent = [m for m in mem.context(CONV, "fares?", 2000).messages if m.get("type") == "reasoning"]
    assert len(sent) == 1
    REASONING_PARAM.validate_python(sent[0])


def test_a_row_stored_before_without_an_id_is_still_read(mem: Memory) -> None:
    mem.append_many(CONV, [ASK, {"type": "reasoning", "id": "rs_1", "summary": []}, REPLY])
    key = mem.cold.key_of("default", CONV)
    assert key is not None
    rewrite_stored(mem.config.db_path, key, [(1, "body", '{"type": "reasoning", "summary": []}')])
    assert [m.position for m in mem.history(CONV)] == [0, 1, 2]  # read, not salvaged
    assert mem.history(CONV)[1].body == {"type": "reasoning", "summary": []}
