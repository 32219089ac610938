"""A line's `created_at` and `message_id` of the wrong kind are refused naming the field
and what it must be (a bug hunt, 2026-12-06): a NaN `created_at` (JSON readers take the
`NaN` literal) was refused as "less than or equal to 253402300799", which NaN is no more
than it is greater, and `message_id: true` was taken and kept as the label "True". The
library check (`parse_message`) says the same for a NaN given to `Memory.append`."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tiermem.config import DEFAULT_MAX_CONTENT_BYTES, DEFAULT_MAX_METADATA_BYTES
from tiermem.errors import DataFileError, ValidationError
from tiermem.evals.conversations import read_conversations
from tiermem.tiers.models import parse_message

LIMITS = {"max_content_bytes": DEFAULT_MAX_CONTENT_BYTES, "max_metadata_bytes": DEFAULT_MAX_METADATA_BYTES}
MSG = '"conversation_id": "c", "message": {"role": "user", "content": "hi"}'

# (id, the rest of the line, what the refusal says)
REFUSED: list[tuple[str, str, str]] = [
    # the NaN literal Python's json reads: no time at all, not one past the last
    ("created_at NaN", '"created_at": NaN', "created_at: Input should be a finite number"),
    # an infinity is past every time as well, said the same way
    ("created_at Infinity", '"created_at": Infinity', "created_at: Input should be a finite number"),
    # a boolean is an int to Python: it was stored as the label "True"
    ("message_id true", '"message_id": true', "message_id: must be a string or an integer, got a boolean"),
    # a number with a fraction is no label nor index
    ("message_id 1.5", '"message_id": 1.5', "message_id: must be a string or an integer, got a number with a fraction"),
    # an object: it said "must be a string", though an integer is taken
    ("message_id object", '"message_id": {"a": 1}', "message_id: must be a string or an integer, got an object"),
]

# (id, the rest of the line, the message_id kept)
ACCEPTED: list[tuple[str, str, str | None]] = [
    # a string label
    ("string label", '"message_id": "m1"', "m1"),
    # an integer label, kept as its text (probes name it either way)
    ("integer label", '"message_id": 7', "7"),
    # a finite time
    ("finite time", '"created_at": 1700000000.5', None),
]


@pytest.mark.parametrize(("rest", "said"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_field_of_the_wrong_kind_is_refused_naming_it(tmp_path: Path, rest: str, said: str) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text("{" + MSG + ", " + rest + "}\n", encoding="utf-8")
    with pytest.raises(DataFileError) as err:
        read_conversations(path, **LIMITS)
    assert f"line 1: {said}" in str(err.value)


@pytest.mark.parametrize(("rest", "kept"), [a[1:] for a in ACCEPTED], ids=[a[0] for a in ACCEPTED])
def test_a_field_of_the_right_kind_is_taken(tmp_path: Path, rest: str, kept: str | None) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text("{" + MSG + ", " + rest + "}\n", encoding="utf-8")
    (conv,) = read_conversations(path, **LIMITS).conversations
    assert conv.message_ids == [kept]


@pytest.mark.parametrize("when", [math.nan, math.inf], ids=["nan", "inf"])
def test_the_library_says_a_time_must_be_finite(when: float) -> None:
    with pytest.raises(ValidationError) as err:
        parse_message({"role": "user", "content": "hi", "created_at": when}, **LIMITS)
    assert (err.value.field, err.value.problem) == ("created_at", "Input should be a finite number")
