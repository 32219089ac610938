"""The MCP `erase` tool checks the conversation id before the confirmation.

With a `confirm` that did not match, the refusal quoted the conversation id whole before
the id's own checks ran: a 100,000-character id came back as a 100,105-character tool
error, and an id the store would refuse (`../etc`, one with a newline, an empty one) was
refused as a `confirm` problem and quoted as sent. The id is checked first (the checks
every other tool's id gets: `validate_id`), so a refusal quotes only a valid id, at most
`MAX_ID_CHARS_LIMIT` characters of the id alphabet (not today's `max_id_chars`: a
conversation made before it was lowered must stay erasable, tests/test_id_limit_lowered.py).
The real MCP server in process (`build_server`) and the official `mcp` client, real SQLite.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("mcp")
from mcp import Client

from tiermem import Memory
from tiermem.adapters.mcp_server import build_server
from tiermem.config import MAX_ID_CHARS_LIMIT

NS = "acme"
KEPT = "trip"
HUGE_CHARS = 100_000
PATTERN_PROBLEM = "may contain only ASCII letters, digits and . _ : @ - (and not start with . or -)"


def _erase(mem: Memory, conversation_id: str, confirm: str) -> tuple[bool, str]:
    async def run() -> tuple[bool, str]:
        async with Client(build_server(mem.namespaced(NS))) as client:
            r = await client.call_tool("erase", {"conversation_id": conversation_id, "confirm": confirm})
            text: str = r.content[0].text  # type: ignore[union-attr]
            return r.is_error, text
    return asyncio.run(run())


CASES: list[tuple[str, str, str]] = [
    # a huge id, unconfirmed: its length refused, not the id quoted whole
    ("a" * HUGE_CHARS, "x", f"conversation_id: {HUGE_CHARS} characters exceeds the limit of "
                            f"{MAX_ID_CHARS_LIMIT} characters"),
    # the same id confirmed: refused by its length as before
    ("a" * HUGE_CHARS, "a" * HUGE_CHARS, f"conversation_id: {HUGE_CHARS} characters exceeds the limit of "
                                         f"{MAX_ID_CHARS_LIMIT} characters"),
    # an id outside the alphabet, unconfirmed: the id's problem, not the confirmation's
    ("../etc", "x", f"conversation_id: {PATTERN_PROBLEM}"),
    # a newline in the id, never quoted back
    ("trip\nX-Injected: 1", "x", f"conversation_id: {PATTERN_PROBLEM}"),
    # an empty id
    ("", "x", "conversation_id: must not be empty"),
    # a valid id, unconfirmed: quoted (bounded by the id limit), nothing erased
    (KEPT, "yes", f"confirm: must repeat the conversation_id ({KEPT!r}) to erase it; nothing was erased"),
]


@pytest.mark.parametrize(("conversation_id", "confirm", "expected"), CASES,
                         ids=["huge", "huge confirmed", "alphabet", "newline", "empty", "valid unconfirmed"])
def test_the_id_is_checked_before_the_confirmation(cold_memory: Memory, conversation_id: str, confirm: str,
                                                   expected: str) -> None:
    cold_memory.append(KEPT, {"role": "user", "content": "forget me not"}, namespace=NS)
    is_error, text = _erase(cold_memory, conversation_id, confirm)
    assert is_error and text == f"Error executing tool erase: {expected}"
    assert [m.body["content"] for m in cold_memory.history(KEPT, namespace=NS)] == ["forget me not"]


def test_a_confirmed_erase_still_erases(cold_memory: Memory) -> None:
    cold_memory.append(KEPT, {"role": "user", "content": "forget me"}, namespace=NS)
    assert _erase(cold_memory, KEPT, KEPT)[0] is False
    assert KEPT not in cold_memory.conversations(namespace=NS)
