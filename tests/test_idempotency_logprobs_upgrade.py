"""An idempotent retry spanning the upgrade that made append drop an `output_text` part's
logprobs (2fe5e0c) replays: the key's record, written by the release before, holds the
fingerprint of the body as the client sent it, logprobs in it; the retry's fingerprint is
of the body without them, and `also` carries the one as sent (`tiers.models.Fingerprint`,
`tiers.dialect._replayed`). Another request under the key is still refused.

The record an earlier release wrote is planted through the store as that release called it
(`ColdLog.append_batch` with its fingerprint: sha256 of the canonical rows, the body as
sent). On the code before, every retry case raised IdempotencyKeyReused. Real SQLite files."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hash_embedder import HashEmbedder
from openai.types.responses import ResponseOutputMessage

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.errors import IdempotencyKeyReused
from tiermem.tiers.models import Message, sdk_dump, stamped

LOGPROBS = [{"token": "Hi", "logprob": -0.2, "bytes": [72, 105], "top_logprobs": []}]
REPLY = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Hi.", "annotations": [], "logprobs": LOGPROBS}]}
ASK = {"role": "user", "content": "x"}


def _earlier_fingerprint(bodies: list[dict[str, Any]]) -> bytes:
    """What the release before 2fe5e0c recorded: the rows' canonical JSON, bodies as sent."""
    rows = [{"role": b["role"], "body": b, "session_id": None, "metadata": None} for b in bodies]
    return hashlib.sha256(json.dumps(rows, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                                     allow_nan=False).encode()).digest()


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(Config(data_dir=tmp_path / "m"), embedder=HashEmbedder(), hot=False, background_indexing=False)
    m.append("c", {"role": "user", "content": "hello"})
    yield m
    m.close()


def _plant(mem: Memory, bodies: list[dict[str, Any]], key: str) -> list[int]:
    """The batch appended under `key` as the release before the upgrade did."""
    res = mem.cold.append_batch("c", [stamped(Message(**b)) for b in bodies], idempotency_key=key,
                                fingerprint=_earlier_fingerprint(bodies))
    return list(res.positions)


RETRIES = [
    # the reply alone, as a dict
    pytest.param([REPLY], lambda: [REPLY], id="reply-dict"),
    # the reply and the next question in one batch
    pytest.param([REPLY, ASK], lambda: [REPLY, ASK], id="batch-dict"),
    # the SDK's object both times (its dump, as sent: logprobs, `phase: null`)
    pytest.param([sdk_dump(ResponseOutputMessage.model_validate(REPLY))],
                 lambda: [ResponseOutputMessage.model_validate(REPLY)], id="reply-sdk-object"),
    # the retry hands a Message built from the reply (parsed again on append)
    pytest.param([REPLY], lambda: [Message(**REPLY)], id="reply-message"),
]


@pytest.mark.parametrize(("first", "retry"), RETRIES)
def test_retry_across_upgrade_replays(mem: Memory, first: list[dict[str, Any]], retry: Any) -> None:
    positions = _plant(mem, first, "k1")
    out = mem.append_outcome("c", retry(), idempotency_key="k1")
    assert (out.replayed, list(out.positions)) == (True, positions)
    assert len(mem.history("c")) == 1 + len(first)  # nothing written twice


def test_retry_after_upgrade_replays(mem: Memory) -> None:
    # a request made after the upgrade, retried after it
    first = mem.append_outcome("c", [REPLY], idempotency_key="k2")
    again = mem.append_outcome("c", [REPLY], idempotency_key="k2")
    assert (again.replayed, list(again.positions)) == (True, list(first.positions))


def test_other_request_still_refused(mem: Memory) -> None:
    # the key's record from before the upgrade; a reply with another text under it
    _plant(mem, [REPLY], "k3")
    other = {**REPLY, "content": [{**REPLY["content"][0], "text": "Bye."}]}
    with pytest.raises(IdempotencyKeyReused):
        mem.append_outcome("c", [other], idempotency_key="k3")
    # the same text with other logprobs: another request to the release that recorded it
    same = {**REPLY, "content": [{**REPLY["content"][0], "logprobs": [{**LOGPROBS[0], "logprob": -0.9}]}]}
    with pytest.raises(IdempotencyKeyReused):
        mem.append_outcome("c", [same], idempotency_key="k3")
