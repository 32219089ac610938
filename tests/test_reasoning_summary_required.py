"""A reasoning item's `summary` is required on append: a list, as the Responses API's
request type has it (`ResponseReasoningItemParam.summary: Required[Iterable[Summary]]`,
`[]` when the model wrote none).

`{"type": "reasoning", "id": "r", "summary": null}` was stored, and so was one without a
summary: a context sent it back without the field (its wire form leaves nulls out) and an
Agents session as stored (null), each a 400 from the provider ("Missing required
parameter: 'input[1].summary'"). Now refused at append naming `summary` (nothing
written), like every other required field of an item; a row stored before is still read
(not salvaged) and a context sends it with `summary: []`. Real SQLite; the row of an
older version written behind tiermem's back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cold_helpers import rewrite_stored
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.errors import ValidationError
from tiermem.service import create_app
from tiermem.tiers.embed import Embedder

CONV = "c"
ASK = {"role": "user", "content": "Which fare is cheaper?"}
REPLY = {"role": "assistant", "content": "The Tuesday one."}
REQUIRED = "summary: Field required (a reasoning item's summary is a list; [] when there is none)"
NOT_NULL = "summary: must be a list, got null (a reasoning item's summary is a list; [] when there is none)"


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as m:
        yield m


REFUSED: list[tuple[dict[str, Any], str]] = [
    # the hunt's item: an explicit null
    ({"type": "reasoning", "id": "r", "summary": None}, NOT_NULL),
    # no summary at all: a context sent it without one too
    ({"type": "reasoning", "id": "r"}, REQUIRED),
    # with encrypted content (a stateless caller's item), still no summary
    ({"type": "reasoning", "id": "r", "encrypted_content": "gAAAA", "summary": None}, NOT_NULL),
]


@pytest.mark.parametrize(("item", "expected"), REFUSED, ids=["null", "absent", "encrypted, null"])
def test_a_reasoning_item_without_a_summary_list_is_refused(mem: Memory, item: dict[str, Any],
                                                            expected: str) -> None:
    mem.append(CONV, ASK)
    with pytest.raises(ValidationError) as info:
        mem.append_many(CONV, [item, REPLY])
    assert str(info.value) == f"messages[0].{expected}"
    assert [m.body for m in mem.history(CONV)] == [ASK]  # nothing of the batch written


def test_the_service_refuses_it_naming_summary(mem: Memory) -> None:
    app = create_app(mem.config, mem, auth=False, start_scheduler=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        r = client.post(f"/v1/conversations/{CONV}/messages", json={"type": "reasoning", "id": "r", "summary": None})
    assert r.status_code == 422
    assert [(d["loc"], d["msg"]) for d in r.json()["detail"]] == [(["body", "summary"], NOT_NULL.split(": ", 1)[1])]


ACCEPTED: list[dict[str, Any]] = [
    # no summary written: the empty list
    {"type": "reasoning", "id": "r", "summary": []},
    # a summary, and the nulls an SDK reply's model_dump() writes (content, status, encrypted_content)
    {"type": "reasoning", "id": "r", "summary": [{"type": "summary_text", "text": "Compare fares."}],
     "content": None, "encrypted_content": None, "status": None},
]


@pytest.mark.parametrize("item", ACCEPTED, ids=["empty", "sdk dump"])
def test_a_summary_list_is_stored_as_given(mem: Memory, item: dict[str, Any]) -> None:
    mem.append_many(CONV, [ASK, item, REPLY])
    assert [m.body for m in mem.history(CONV)] == [ASK, item, REPLY]


@pytest.mark.parametrize("stored_json", ['{"type": "reasoning", "id": "r", "summary": null}',
                                         '{"type": "reasoning", "id": "r"}'], ids=["null", "absent"])
def test_a_row_stored_before_is_read_and_sent_with_an_empty_summary(mem: Memory, stored_json: str) -> None:
    mem.append_many(CONV, [ASK, {"type": "reasoning", "id": "r", "summary": []}, REPLY])
    key = mem.cold.key_of("default", CONV)
    assert key is not None
    rewrite_stored(mem.config.db_path, key, [(1, "body", stored_json)])  # as an older version stored it
    assert [m.position for m in mem.history(CONV)] == [0, 1, 2]  # read, not salvaged
    sent = [m for m in mem.context(CONV, "fares?", 2000).messages if m.get("type") == "reasoning"]
    assert sent == [{"type": "reasoning", "id": "r", "summary": []}]
