"""Which retries are the same request (`tiers.models.append_fingerprint`): each message's
role, body, session, metadata, and created_at where the caller gave one. Checked through
`Memory.append_outcome` (the second append under the key is a replay or is refused) and on
the fingerprints themselves."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hash_embedder import HashEmbedder

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.errors import IdempotencyKeyReused
from tiermem.tiers.models import Message, append_fingerprint, parse_message

HI = {"role": "user", "content": "hi"}
BYE = {"role": "user", "content": "bye"}
T = 1_700_000_000.0

# (first request, second request, the same request?); a request: (messages, append_outcome keywords)
CASES: list[tuple[str, tuple[list[Any], dict[str, Any]], tuple[list[Any], dict[str, Any]], bool]] = [
    # a Message and the equal dict are one message
    ("message_vs_dict", ([Message(role="user", content="hi")], {}), ([HI], {}), True),
    # created_at left to default on both: "now" differs between the two, the request does not
    ("created_at_defaulted_both", ([HI], {}), ([HI], {}), True),
    # the same created_at given on both
    ("created_at_given_same", ([{**HI, "created_at": T}], {}), ([{**HI, "created_at": T}], {}), True),
    # given on one, defaulted on the other: the caller asked for different rows
    ("created_at_given_vs_defaulted", ([{**HI, "created_at": T}], {}), ([HI], {}), False),
    # two different times given
    ("created_at_given_differs", ([{**HI, "created_at": T}], {}), ([{**HI, "created_at": T + 1}], {}), False),
    # metadata differs
    ("metadata_differs", ([{**HI, "metadata": {"a": 1}}], {}), ([{**HI, "metadata": {"a": 2}}], {}), False),
    # metadata given on one only
    ("metadata_missing", ([{**HI, "metadata": {"a": 1}}], {}), ([HI], {}), False),
    # the same metadata, its keys in another order (JSON objects have no order)
    ("metadata_key_order", ([{**HI, "metadata": {"a": 1, "b": 2}}], {}),
     ([{**HI, "metadata": {"b": 2, "a": 1}}], {}), True),
    # the body's keys in another order
    ("body_key_order", ([{"role": "user", "content": "hi"}], {}), ([{"content": "hi", "role": "user"}], {}), True),
    # the session argument differs
    ("session_differs", ([HI], {"session_id": "s1"}), ([HI], {"session_id": "s2"}), False),
    # a session on one only
    ("session_missing", ([HI], {"session_id": "s1"}), ([HI], {}), False),
    # the session as the argument or in the message's envelope: the same stored rows
    ("session_argument_vs_envelope", ([HI], {"session_id": "s1"}), ([{**HI, "session_id": "s1"}], {}), True),
    # the batch in another order
    ("batch_order_differs", ([HI, BYE], {}), ([BYE, HI], {}), False),
    # one message more
    ("batch_longer", ([HI], {}), ([HI, BYE], {}), False),
    # another text
    ("content_differs", ([HI], {}), ([BYE], {}), False),
    # another role for the same text
    ("role_differs", ([HI], {}), ([{"role": "assistant", "content": "hi"}], {}), False),
]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as m:
        yield m


@pytest.mark.parametrize(("first", "second", "same"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_second_append_is_a_replay_exactly_when_the_request_is_the_same(
        mem: Memory, first: tuple[list[Any], dict[str, Any]], second: tuple[list[Any], dict[str, Any]],
        same: bool) -> None:
    positions = mem.append_outcome("c", first[0], idempotency_key="k", **first[1]).positions
    stored = mem.history("c")
    time.sleep(0.01)  # a defaulted created_at differs between the two
    if same:
        out = mem.append_outcome("c", second[0], idempotency_key="k", **second[1])
        assert out.replayed and out.positions == positions
    else:
        with pytest.raises(IdempotencyKeyReused):
            mem.append_outcome("c", second[0], idempotency_key="k", **second[1])
    assert mem.history("c") == stored  # nothing written either way


def _fingerprint(messages: list[Any], session_id: str | None = None) -> bytes:
    return append_fingerprint([parse_message(m, max_content_bytes=1 << 20, max_metadata_bytes=1 << 16,
                                             session_id=session_id, stamp=False) for m in messages])


@pytest.mark.parametrize(("first", "second", "same"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_fingerprints_are_equal_exactly_when_the_request_is_the_same(
        first: tuple[list[Any], dict[str, Any]], second: tuple[list[Any], dict[str, Any]], same: bool) -> None:
    assert (_fingerprint(first[0], **first[1]) == _fingerprint(second[0], **second[1])) is same


def test_a_stamped_message_keeps_its_default_out_of_the_fingerprint() -> None:
    unstamped = parse_message(HI, max_content_bytes=1 << 20, max_metadata_bytes=1 << 16, stamp=False)
    assert unstamped.created_at is None
    assert parse_message(HI, max_content_bytes=1 << 20, max_metadata_bytes=1 << 16).created_at is not None
