"""The library's `Message` takes its envelope's numbers and text as their own types alone
(strict, as the HTTP request models): a `created_at` of `true`/`false` or a string of
digits, or a session id of bytes, is a ValidationError naming the field, and nothing is
written (every table of the real SQLite file compared before and after), through every
way a message comes in: `Memory.append` / `append_many` / `append_outcome` of a dict, the
`created_at` keyword, a `Message` built directly. A float field still takes an int (stored
as a float) and numpy's numbers.

An export file is unaffected: `tiermem export` writes the stored `created_at`, a float
column (an older version stored `true` as 1.0, and exported 1.0), and `tiermem import`
reads a line's time as Unix seconds or an ISO 8601 string and refuses a boolean, as it
did before (evals/conversations.py `_created_at`): kept so here.

Fails on the code before: pydantic's lax mode read `created_at: true` as 1.0, `false` as
0.0 and `"5"` as 5.0 (a message stored at 1970-01-01 00:00:01), a session id b"s1" as
"s1"."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pydantic
import pytest
from cli_helpers import tm
from cold_helpers import every_row
from convo_fixtures import write_jsonl
from hash_embedder import HashEmbedder

from tiermem import Config, Memory, Message
from tiermem.errors import ValidationError

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

CONV = "trip"
NS = "default"
SAY = {"role": "user", "content": "Lisbon on the 15th, window seat."}


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    d = tmp_path_factory.mktemp("message-strict")
    m = Memory(Config(data_dir=d / "data"), embedder=HashEmbedder(), hot=False, background_indexing=False)
    m.append(CONV, SAY)
    yield m
    m.close()


Append = Callable[[Memory, Any], Any]

# (how the value is passed): each way a message comes into the library
WAYS: list[tuple[str, str, Append]] = [
    # a dict message's envelope field, appended alone
    ("append_dict", "created_at", lambda m, v: m.append(CONV, {**SAY, "created_at": v})),
    # the append keyword
    ("append_keyword", "created_at", lambda m, v: m.append(CONV, SAY, created_at=v)),
    # the second message of a batch: the first, good, is not written either
    ("append_many_second", "messages[1].created_at",
     lambda m, v: m.append_many(CONV, [SAY, {**SAY, "created_at": v}])),
    # a conditional batch (what the HTTP service and the MCP tool append through)
    ("append_outcome", "messages[0].created_at",
     lambda m, v: m.append_outcome(CONV, [{**SAY, "created_at": v}], expect_position=1)),
]

# (the value, why it is refused): for created_at, a float field
TIMES: list[tuple[Any, str]] = [
    (True, "a boolean is no time: lax read it as 1.0"),
    (False, "... nor false: lax read it as 0.0"),
    ("5", "a string of digits is text: lax read it as 5.0"),
    ("1e3", "... however it reads: lax read it as 1000.0"),
]


@pytest.mark.parametrize(("append", "field", "value"), [
    pytest.param(append, field, value, id=f"{way}={value!r}") for way, field, append in WAYS for value, _why in TIMES])
def test_a_time_of_another_type_is_refused_and_nothing_written(mem: Memory, append: Append, field: str,
                                                                value: Any) -> None:
    before = every_row(mem.config.db_path)
    with pytest.raises(ValidationError) as info:
        append(mem, value)
    assert (info.value.field, info.value.problem) == (field, "Input should be a valid number")
    assert every_row(mem.config.db_path) == before
    assert len(before["messages"]) >= 1  # the comparison reads the store the library writes


def test_a_session_id_of_bytes_is_refused(mem: Memory) -> None:
    before = every_row(mem.config.db_path)
    with pytest.raises(ValidationError) as info:  # lax: stored as the text "s1"
        mem.append(CONV, SAY, session_id=b"s1")  # type: ignore[arg-type]
    assert (info.value.field, info.value.problem) == ("session_id", "Input should be a valid string")
    assert every_row(mem.config.db_path) == before


@pytest.mark.parametrize("value", [True, "5"], ids=["true", "digits"])
def test_a_message_built_directly_refuses_them(value: Any) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        Message(role="user", content="hi", created_at=value)
    assert [(e["loc"], e["type"]) for e in info.value.errors()] == [(("created_at",), "float_type")]


# (the time given, the time stored): numbers of their own type are taken
TAKEN: list[tuple[Any, float]] = [
    (1000, 1000.0),  # an int for the float field, stored as a float
    (1000.5, 1000.5),  # a float
    (np.float64(2000.25), 2000.25),  # numpy's float (a float subclass)
    (np.int64(3000), 3000.0),  # numpy's integer (pandas' and numpy's rows give these)
]


@pytest.mark.parametrize(("given", "stored"), TAKEN, ids=[repr(t[0]) for t in TAKEN])
def test_numbers_are_taken(mem: Memory, given: Any, stored: float) -> None:
    position = mem.append(CONV, {**SAY, "created_at": given})
    [row] = mem.history(CONV, after=position - 1)
    assert row.created_at == stored and type(row.created_at) is float
    assert Message(role="user", content="hi", created_at=given).created_at == stored


# (the line's created_at, the time stored, or None: the line refused naming created_at):
# the import reads its own file format, unchanged by the strict Message
IMPORTED: list[tuple[Any, float | None]] = [
    (1.0, 1.0),  # what an older version stored for `true` and exported: a number, imported as it is
    (1, 1.0),  # an integer
    ("1970-01-01T00:00:05Z", 5.0),  # an ISO 8601 string, the import's other form of a time
    (True, None),  # a boolean: refused by the import, as before
    ("5", None),  # a string that is no ISO 8601 time: refused, as before
]


@pytest.mark.parametrize(("created_at", "stored"), IMPORTED, ids=[repr(i[0]) for i in IMPORTED])
def test_an_import_reads_times_as_before(tmp_path: Path, created_at: Any, stored: float | None) -> None:
    f = write_jsonl(tmp_path / "in.jsonl", [{"conversation_id": "c", "message": SAY, "created_at": created_at}])
    r = tm(tmp_path, HashEmbedder(), "", "import", str(f), "--json")  # type: ignore[arg-type]
    if stored is None:
        assert r.exit_code == 1 and "line 1: created_at: " in r.stderr, r.output
        assert not (tmp_path / "data" / "tiermem.db").exists() or not every_row(tmp_path / "data" / "tiermem.db").get(
            "messages")
        return
    assert r.exit_code == 0 and json.loads(r.stdout)["appended"] == 1, r.output
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as m:
        assert [x.created_at for x in m.history("c")] == [stored]
