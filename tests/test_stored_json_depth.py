"""`loads_stored`, the decoder of stored rows: `json.loads`, except that text nested deeper
than MAX_STORED_JSON_DEPTH raises ValueError (so readers salvage the row) and never
RecursionError. The depth is found by a scan of the brackets outside string tokens; these
cases pin where the scan must agree with the JSON grammar (tests/test_deep_stored_rows.py
checks the read paths that use it)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tiermem.tiers.models import MAX_STORED_JSON_DEPTH, loads_stored, stored_json_deeper_than

LIMIT = MAX_STORED_JSON_DEPTH


def arrays(levels: int) -> str:
    return "[" * levels + "]" * levels


# (the stored text, decodes to it: True, or refused as too deep: False) -- with why
CASES: list[tuple[str, bool]] = [
    # an ordinary message
    ('{"role": "user", "content": [{"type": "text", "text": "hi"}]}', True),
    # exactly at the bound: decoded (the message object is level 1)
    (arrays(LIMIT), True),
    # one past it: refused
    (arrays(LIMIT + 1), False),
    # objects and arrays both count
    ('{"a": ' * (LIMIT // 2) + "[" * (LIMIT // 2 + 1) + "]" * (LIMIT // 2 + 1) + "}" * (LIMIT // 2), False),
    # many brackets, none nested: a list of 5,000 empty objects (past the counting shortcut)
    ("[" + ", ".join(["{}"] * 5_000) + "]", True),
    # brackets inside a string are text, not nesting
    ('{"role": "user", "content": "' + "{[" * 5_000 + '"}', True),
    # an escaped quote does not end the string: the brackets after it are still text
    ('{"role": "user", "content": "say \\"' + "{" * 5_000 + '"}', True),
    # an escaped backslash before the quote does end it: the brackets after are nesting
    ('{"a": "x\\\\", "b": ' + arrays(LIMIT) + "}", False),
    # an escaped backslash then an escaped quote (`\\\"`): the string goes on
    ('{"content": "x\\\\\\"' + "[" * 5_000 + '"}', True),
    # a whole document that is one string full of brackets
    ('"' + "[" * 5_000 + '"', True),
    # a quote written as \u0022 does not end the string either
    ('{"content": "\\u0022' + "[" * 5_000 + '"}', True),
    # a row of 100,000 levels: refused at once, no recursion
    (arrays(100_000), False),
    # deep and unterminated (a torn write): refused, not a RecursionError
    ("[" * 100_000, False),
]


@pytest.mark.parametrize(("text", "decodes"), CASES,
                         ids=["message", "at-bound", "past-bound", "mixed", "wide", "in-string", "escaped-quote",
                              "escaped-backslash", "backslash-then-quote", "one-string", "unicode-quote", "100000", "unterminated"])
def test_loads_stored_decodes_or_refuses_by_depth(text: str, decodes: bool) -> None:
    if decodes:
        assert loads_stored(text) == json.loads(text)
        assert loads_stored(text.encode()) == json.loads(text)  # a BLOB column's bytes too
    else:
        with pytest.raises(ValueError, match=f"{LIMIT} levels"):
            loads_stored(text)


# (the text, the error) -- what is not JSON fails as json.loads fails, which readers salvage
NOT_JSON: list[tuple[Any, type[Exception]]] = [
    # truncated: the classic torn write
    ('{"role": "user", "content": "tru', ValueError),
    # bytes that are not UTF-8
    (b'{"content": "\xff"}', ValueError),
    # not text at all (a NULL read back)
    (None, TypeError),
]


@pytest.mark.parametrize(("text", "error"), NOT_JSON, ids=["truncated", "not-utf8", "none"])
def test_what_is_not_json_fails_as_json_loads_does(text: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        loads_stored(text)


def test_a_row_within_the_bound_under_a_deep_caller_is_refused_not_a_recursion_error() -> None:
    # the bound leaves room for the callers tiermem has; a caller far deeper still gets a
    # ValueError (the row salvaged), never RecursionError
    text = arrays(LIMIT)

    def down(frames: int) -> Any:
        return loads_stored(text) if frames == 0 else down(frames - 1)

    with pytest.raises(ValueError, match="too deeply"):
        down(400)


def test_the_scan_needs_no_recursion_and_counts_only_outside_strings() -> None:
    assert not stored_json_deeper_than('"' + "[" * 10 + '"', 1)
    assert stored_json_deeper_than("[[", 1)
    assert not stored_json_deeper_than("[][]", 1)  # siblings, not nesting
