"""Property: no input makes `from_anthropic` crash. Over arbitrary JSON values and over
near-valid Anthropic messages (the SDK's block shapes with one field dropped, retyped,
hostile or oversized), it either returns messages that `parse_message` (what
`Memory.append` validates with) accepts, or raises tiermem's `ValidationError` naming a
field; never another exception. Examples bounded (TIERMEM_FUZZ_EXAMPLES for more).

The regression cases below failed on the code before (each an exception other than
`ValidationError` escaping `from_anthropic`)."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic_strategies import (
    EXAMPLES,
    HUGE_INT,
    NESTING_DEPTH,
    deep,
    json_values,
    near_valid_message,
    valid_message,
)
from hypothesis import HealthCheck, given, settings

from tiermem.adapters.anthropic import from_anthropic
from tiermem.config import DEFAULT_MAX_CONTENT_BYTES, DEFAULT_MAX_METADATA_BYTES
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.models import parse_message

SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _holds(value: Any) -> None:
    try:
        out = from_anthropic(value)
    except ValidationError as exc:
        assert isinstance(exc.field, str) and exc.field, f"no field named: {exc!r}"
        return
    assert out, "nothing to append and no error"
    for m in out:
        parse_message(m, max_content_bytes=DEFAULT_MAX_CONTENT_BYTES, max_metadata_bytes=DEFAULT_MAX_METADATA_BYTES)


@SETTINGS
@given(json_values)
def test_any_json_value(value: Any) -> None:
    _holds(value)


@SETTINGS
@given(near_valid_message())
def test_near_valid_messages(message: dict[str, Any]) -> None:
    _holds(message)


@SETTINGS
@given(valid_message())
def test_valid_messages_are_accepted(message: dict[str, Any]) -> None:
    for m in from_anthropic(message):
        parse_message(m, max_content_bytes=DEFAULT_MAX_CONTENT_BYTES, max_metadata_bytes=DEFAULT_MAX_METADATA_BYTES)


def _use(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {},
                                              **fields}]}


def _text(**fields: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": "hi", **fields}]}


REPLY = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m"}

# each case: what the properties found, and the field the refusal must name
REGRESSIONS: list[tuple[str, Any, str]] = [
    # a role that is a list: `in` on a dict raised TypeError (unhashable)
    ("role a list", {"role": [], "content": "x"}, "role"),
    # an unknown empty key: the error named the field ""
    ("empty key", {"role": "user", "content": "x", "": 0}, "message"),
    # an unknown key with a lone surrogate: it became the field, unencodable in a 422's JSON
    ("surrogate key", {"role": "user", "content": "x", "\ud800": 0}, "message"),
    # a block type that is a huge int: the error's repr of it raised ValueError
    ("huge int type", {"role": "user", "content": [{"type": HUGE_INT}]}, "content[0].type"),
    # a tool's input nested past the recursion limit: json.dumps raised RecursionError
    ("deep input", _use(input=deep(NESTING_DEPTH)), "content[0]"),
    # a tool's input holding a huge int: json.dumps raised ValueError; named down to the
    # integer (past MAX_JSON_INT_DIGITS, the one limit of every way in)
    ("huge int input", _use(input={"n": HUGE_INT}), "content[0].input.n"),
    # a tool's input holding NaN: stored as arguments `{"n": NaN}`, not JSON, sent back as NaN
    ("NaN input", _use(input={"n": float("nan")}), "content[0].input.n"),
    # citations with a lone surrogate: measuring the metadata raised UnicodeEncodeError
    ("surrogate citation", _text(citations=[{"cited_text": "\udfff"}]), "content[0].citations[0].cited_text"),
    # a reply's usage with NaN: measuring the metadata raised ValueError
    ("NaN usage", {**REPLY, "usage": {"input_tokens": float("nan")}}, "usage.input_tokens"),
    # a text with a lone surrogate: accepted, then refused by the store as `content`, not the block
    ("surrogate text", _text(text="a\ud800"), "content[0].text"),
    # a string content with a lone surrogate: accepted, refused by the store only
    ("surrogate string content", {"role": "user", "content": "\udfff"}, "content"),
    # a tool_use id past the stored form's limit: accepted, refused by the store as `tool_calls[0].id`
    ("long tool_use id", _use(id="t" * 65536), "content[0].id"),
    # a tool name past it: the same
    ("long tool name", _use(name="n" * 65536), "content[0].name"),
    # a tool_result's id past it: refused by the store as `tool_call_id`
    ("long tool_use_id", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t" * 65536}]},
     "content[0].tool_use_id"),
]


@pytest.mark.parametrize(("message", "field"), [(m, f) for _n, m, f in REGRESSIONS],
                         ids=[n for n, _m, _f in REGRESSIONS])
def test_found_refused_naming_the_field(message: Any, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        from_anthropic(message)
    assert err.value.field == field


def test_metadata_nested_past_the_recursion_limit_is_a_validation_error() -> None:
    """Citations nested just below what one block's check reaches, but past it once the
    message's whole metadata is encoded, raised a bare RecursionError (the one place the
    size was computed without `_json_bytes`)."""
    import sys

    for depth in range(sys.getrecursionlimit() - 80, sys.getrecursionlimit() + 10):
        nested: Any = "x"
        for _ in range(depth):
            nested = [nested]
        msg = {"role": "assistant", "content": [{"type": "text", "text": "a", "citations": nested}]}
        try:
            from_anthropic(msg)
        except ValidationError:
            pass
