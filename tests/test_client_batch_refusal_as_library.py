"""A `tiermem.client.Client`'s batch refuses a message as the library in this process does:
the same exception class and the same words, naming the same place.

Two ways it did not:
- `Client.append_many` checks each message before sending (`_wire`, within the server's
  limits once read), and renamed a refusal to `messages[i].<field>` by making a new plain
  `ValidationError`: a `LimitExceeded` (content or metadata past the server's limit) lost
  its class, its value and its limit, where `Client.append` and `Memory.append_many` raise
  `LimitExceeded`;
- an Anthropic block holding a value JSON cannot carry (NaN, an object, a lone surrogate)
  was refused by the Client as "cannot be sent as JSON" at its place
  (`content[0].input.x`), by the library's `from_anthropic` (what the server converts the
  same block with) as "is not storable as JSON" at the block (`content[0]`), or "is not
  valid UTF-8".

Real HTTP to the real app on a real SQLite file; a Memory in this process with the same
Config. Fails on the code before: 6 of 6 (2 plain ValidationError, 4 other words/field)."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_helpers import TOKEN_ACME, served_and_local

from tiermem import Memory
from tiermem.adapters.anthropic import from_anthropic
from tiermem.client import Client
from tiermem.tiers.errors import ConversationNotFound, LimitExceeded, ValidationError

NS = "acme"
MAX_CONTENT_BYTES = 4096  # both stores'
MAX_METADATA_BYTES = 1024  # both stores'

# (case id, the message, the class both raise, the field) : past the server's own limits,
# which the client reads first (`limits()`), so it refuses before sending
LIMITS: list[tuple[str, dict[str, Any], type, str]] = [
    # content one byte past max_content_bytes
    ("content", {"role": "user", "content": "x" * (MAX_CONTENT_BYTES + 1)}, LimitExceeded, "messages[1].content"),
    # metadata past max_metadata_bytes
    ("metadata", {"role": "user", "content": "hi", "metadata": {"note": "m" * MAX_METADATA_BYTES}},
     LimitExceeded, "messages[1].metadata"),
]


def _tool_use(value: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"x": value}}]}


# (case id, an Anthropic message, the field from_anthropic names: the client's is messages[1].<it>)
ANTHROPIC: list[tuple[str, dict[str, Any], str]] = [
    # NaN in a tool's input (json.dumps's ValueError)
    ("nan in tool input", _tool_use(math.nan), "content[0].input.x"),
    # a date in a tool's input (json.dumps's TypeError)
    ("date in tool input", _tool_use(dt.date(2026, 12, 24)), "content[0].input.x"),
    # a lone surrogate in a text block (UnicodeEncodeError)
    ("lone surrogate", {"role": "user", "content": [{"type": "text", "text": "a\ud800b"}]}, "content[0].text"),
    # an infinity in a tool_result's text block (the result's blocks: one level deeper)
    ("inf in a tool result", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                           "content": [{"type": "text", "text": math.inf}]}]},
     "content[0].content[0].text"),
]
QUESTION = {"role": "user", "content": "hello"}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Memory]]:
    """The served store's URL, and a store in this process with the same Config."""
    with served_and_local(tmp_path_factory.mktemp("client-batch-refusal"), max_content_bytes=MAX_CONTENT_BYTES,
                          max_metadata_bytes=MAX_METADATA_BYTES) as both:
        yield both


@pytest.mark.parametrize(("label", "message", "kind", "field"), LIMITS, ids=[c[0] for c in LIMITS])
def test_batch_keeps_the_class(stores: tuple[str, Memory], tmp_path: Path, label: str,
                               message: dict[str, Any], kind: type, field: str) -> None:
    url, local = stores
    conv = f"c-{tmp_path.name}"
    with pytest.raises(ValidationError) as here:
        local.append_many(conv, [QUESTION, message], namespace=NS)
    with Client(url, token=TOKEN_ACME, namespace=NS) as client:
        client.limits()  # read: the check before sending holds the server's limits
        with pytest.raises(ValidationError) as there:
            client.append_many(conv, [QUESTION, message])
        with pytest.raises(ConversationNotFound):  # nothing written
            client.history(conv)
    assert type(here.value) is kind and here.value.field == field, repr(here.value)
    assert type(there.value) is type(here.value), repr(there.value)
    assert str(there.value) == str(here.value)
    assert isinstance(there.value, LimitExceeded) and isinstance(here.value, LimitExceeded)
    assert (there.value.value, there.value.limit) == (here.value.value, here.value.limit)


@pytest.mark.parametrize(("label", "message", "field"), ANTHROPIC, ids=[c[0] for c in ANTHROPIC])
def test_anthropic_block_refused_in_the_library_words(stores: tuple[str, Memory], tmp_path: Path, label: str,
                                                      message: dict[str, Any], field: str) -> None:
    url, _local = stores
    conv = f"c-{tmp_path.name}"
    with pytest.raises(ValidationError) as here:
        from_anthropic(message)
    with Client(url, token=TOKEN_ACME, namespace=NS) as client:
        with pytest.raises(ValidationError) as there:
            client.append_many(conv, [QUESTION, message], format="anthropic")
        with pytest.raises(ConversationNotFound):  # nothing written
            client.history(conv)
    assert here.value.field == field, str(here.value)
    assert there.value.field == f"messages[1].{field}", str(there.value)
    assert there.value.problem == here.value.problem  # one wording
    assert here.value.problem.startswith("cannot be stored as JSON ("), here.value.problem
