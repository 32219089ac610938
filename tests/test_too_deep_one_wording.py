"""A value nested past the interpreter's recursion limit (json.dumps's RecursionError) is
refused in one wording, wherever the message is encoded: the library's
`tiers.plain_json.unencodable`, the Anthropic adapter's `from_anthropic`, and a
`tiermem.client.Client`'s Anthropic batch before sending. They said "too deep to be
stored", "too deep to store" and "too deep to be sent"; the one wording is
`tiers.plain_json.NESTED_TOO_DEEP`.

Real parts: the real functions; the Client refuses before any request (its URL serves
nothing: a request would fail with a connection error instead).

Fails on the code before: 3 of 3 (no NESTED_TOO_DEEP: an ImportError for the module; each
of the three worded differently)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tiermem.adapters.anthropic import from_anthropic
from tiermem.client import Client
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.plain_json import NESTED_TOO_DEEP, unencodable

DEPTH = 3000  # levels: past the interpreter's recursion limit (1,000) for json.dumps
NOTHING_LISTENS = "http://127.0.0.1:9"  # the discard port: a request sent would fail to connect


def _deep() -> dict[str, Any]:
    value: dict[str, Any] = {"a": "x"}
    for _ in range(DEPTH):
        value = {"a": value}
    return value


def _tool_use() -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": _deep()}]}


def _client_batch() -> None:
    with Client(NOTHING_LISTENS) as client:
        client.append_many("c", [_tool_use()], format="anthropic")


def _unencodable() -> None:
    raise unencodable({"role": "user", "content": "x", "metadata": _deep()})


# (case id, the call that refuses, the field it names)
CASES: list[tuple[str, Callable[[], Any], str]] = [
    # the library's encoder check: the top-level field holding the deep value
    ("library metadata", _unencodable, "metadata"),
    # the Anthropic adapter (the library and the service convert with it): the block
    ("from_anthropic tool input", lambda: from_anthropic(_tool_use()), "content[0]"),
    # a Client's Anthropic batch, checked by encoding before it is sent
    ("client anthropic batch", _client_batch, "messages[0].content"),
]


@pytest.mark.parametrize(("label", "call", "field"), CASES, ids=[c[0] for c in CASES])
def test_one_wording(label: str, call: Callable[[], Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        call()
    assert refused.value.problem == NESTED_TOO_DEEP
    assert refused.value.field == field
    assert str(refused.value) == f"{field}: {NESTED_TOO_DEEP}"
