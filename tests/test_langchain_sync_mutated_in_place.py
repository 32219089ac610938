"""A message of a LangChain/LangGraph state changed in place is an edit, however it was
changed. A sync compares the state with the one its last sync ended with (a snapshot of
each message's fields, `_langchain_sync._snapshot`) so that a state grown at its end costs
only its new messages; LangChain messages are mutable pydantic models, so the state may
hold the very objects the last sync saw, changed since: a field set anew, a list or dict
in it changed in place, a number turned into an equal one of another type (1, 1.0 and
True are equal in Python, stored as 1, 1.0 and true). Each is stored as the edit it is
(the retraction of the row and the rows after it, then the new version and copies), and
a change of the message's own metadata alone (`response_metadata`, which the row keeps as
first stored, `METADATA_FIELD_KEYS`) changes nothing. A checkpoint's
copies of the same messages are the same state. Real `langchain-core`, real SQLite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tiermem import Config, Memory
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.adapters.langchain import METADATA_FIELD_KEYS, TiermemChatMessageHistory, to_openai
from tiermem.tiers.embed import Embedder

CONV = "trip"
EARLIER = 30  # messages before the ones changed: the edit replays the rows after them


def _state() -> list[BaseMessage]:
    head: list[BaseMessage] = [(HumanMessage if i % 2 == 0 else AIMessage)(f"message {i}", id=f"m{i}")
                               for i in range(EARLIER)]
    return [*head,
            HumanMessage("Weather in Oslo for 1 day?", id="h"),
            AIMessage("", id="c", tool_calls=[{"id": "call_w", "name": "weather", "args": {"city": "Oslo", "days": 1}}],
                      response_metadata={"model_name": "m", "finish_reason": "tool_calls"}),
            ToolMessage("sunny", tool_call_id="call_w", id="t", artifact={"hours": [9, 10]}),
            AIMessage([{"type": "text", "text": "Sunny in Oslo."}], id="a")]


def _at(state: list[BaseMessage], lc_id: str) -> Any:
    return next(m for m in state if m.id == lc_id)


def _set_name(m: Any) -> None:
    m.name = "ola"


def _bump(m: Any, key: str, value: Any) -> None:
    m.tool_calls[0]["args"][key] = value


# (the message changed, how; whether it is an edit)
CHANGES: list[tuple[str, str, Callable[[Any], None], bool]] = [
    # a string content set anew
    ("content set", "h", lambda m: setattr(m, "content", "Weather in Bergen?"), True),
    # a text block of a list content changed in place
    ("block text in place", "a", lambda m: m.content[0].update(text="Rain in Oslo."), True),
    # a block added to a list content in place
    ("block appended in place", "a", lambda m: m.content.append({"type": "text", "text": "Take a coat."}), True),
    # a tool call's argument changed in place
    ("call argument in place", "c", lambda m: _bump(m, "city", "Bergen"), True),
    # a number argument turned into True in place: equal in Python, stored as true
    ("argument 1 to True", "c", lambda m: _bump(m, "days", True), True),
    # and into 1.0: stored as 1.0
    ("argument 1 to 1.0", "c", lambda m: _bump(m, "days", 1.0), True),
    # a tool call added to the list in place
    ("call appended in place", "c", lambda m: m.tool_calls.append(
        {"id": "call_x", "name": "weather", "args": {"city": "Rome"}, "type": "tool_call"}), True),
    # a tool message's artifact changed in place
    ("artifact in place", "t", lambda m: m.artifact["hours"].append(11), True),
    # a tool message's status set anew
    ("status set", "t", lambda m: setattr(m, "status", "error"), True),
    # the name set anew
    ("name set", "h", _set_name, True),
    # what the stored form leaves out, changed in place and set anew: no edit
    ("response_metadata in place", "c", lambda m: m.response_metadata.update(finish_reason="stop"), False),
    ("response_metadata set", "c", lambda m: setattr(m, "response_metadata", {"other": object()}), False),
]


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


def _stored(mem: Memory) -> list[dict[str, Any]]:
    return to_openai(TiermemChatMessageHistory(mem, CONV).messages)


def _bodies(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` without the message's own metadata (kept as first stored: no edit alone)."""
    own = set(METADATA_FIELD_KEYS.values())
    return [{**r, "metadata": {k: v for k, v in r.get("metadata", {}).items() if k not in own}} for r in rows]


def _grown(state: list[BaseMessage], n: int) -> list[BaseMessage]:
    return [*state, HumanMessage(f"next {n}", id=f"n{n}")]


@pytest.mark.parametrize(("case", "lc_id", "change", "edit"), CHANGES, ids=[c[0] for c in CHANGES])
def test_a_message_changed_in_place_is_an_edit(mem: Memory, case: str, lc_id: str,
                                               change: Callable[[Any], None], edit: bool) -> None:
    sync = ConversationSync(mem, CONV)
    state = _state()
    sync.sync(state)
    state = _grown(state, 1)  # the same objects and one more, as an agent's next model call
    assert sync.sync(state) == 1
    rows = len(mem.history(CONV))
    change(_at(state, lc_id))
    state = _grown(state, 2)
    # the changed message and the new one, or the new one alone
    assert sync.sync(state) == (2 if edit else 1)
    assert _bodies(_stored(mem)) == _bodies(to_openai(state))
    after_edit = len(mem.history(CONV))
    # retractions and copies of the changed row and the rows after it, or the new row alone
    assert after_edit - rows > 2 if edit else after_edit - rows == 1
    # synced again, from this instance or a fresh one: nothing more is written
    for s in (sync, ConversationSync(mem, CONV)):
        assert s.sync(state) == 0
    assert len(mem.history(CONV)) == after_edit


@pytest.mark.parametrize("edit", [
    False,  # a checkpoint's copies of the messages synced, and one new message
    True,   # the same, one of the copies edited
])
def test_copies_of_the_state_are_the_same_state(mem: Memory, edit: bool) -> None:
    sync = ConversationSync(mem, CONV)
    state = _state()
    sync.sync(state)
    copies = [m.model_copy(deep=True) for m in state]
    if edit:
        _bump(_at(copies, "c"), "city", "Bergen")
    copies = _grown(copies, 1)
    assert sync.sync(copies) == (2 if edit else 1)
    assert _stored(mem) == to_openai(copies)


@pytest.mark.parametrize("changed", [
    False,  # given back as it was: another worker's edit of it since stands
    True,   # given back changed: this state's edit
])
def test_a_message_removed_and_given_back(mem: Memory, changed: bool) -> None:
    ours, theirs = ConversationSync(mem, CONV), ConversationSync(mem, CONV)
    state = _state()
    ours.sync(state)
    kept = _at(state, "h")
    # another worker edits the message while this state holds it no more (`RemoveMessage`)
    other = [m.model_copy(deep=True) for m in state]
    _at(other, "h").content = "Weather in Rome?"
    assert theirs.sync(other) == 1
    without = [m for m in state if m is not kept]
    assert ours.sync(without) == 0
    if changed:
        kept.content = "Weather in Paris?"
    assert ours.sync(state) == (1 if changed else 0)
    want = "Weather in Paris?" if changed else "Weather in Rome?"
    assert _at(TiermemChatMessageHistory(mem, CONV).messages, "h").content == want


# an artifact whose snapshot is a digest, not a copy (`_langchain_sync.MAX_SNAPSHOT_COPY_BYTES`:
# ~100 bytes a number copied), and whose stored form the row keeps (`BIG_METADATA_BYTES`)
LARGE_ITEMS = 5_000
BIG_METADATA_BYTES = 1024 * 1024


def _set_item(a: list[Any], k: int, value: Any) -> None:
    a[k] = value


# (how the large artifact is changed in place; whether it is an edit)
LARGE_CHANGES: list[tuple[str, Callable[[list[Any]], None], bool]] = [
    # one number in the middle set anew
    ("item set in place", lambda a: _set_item(a, LARGE_ITEMS // 2, -1), True),
    # one number turned into an equal float: stored as 7.0
    ("item 7 to 7.0", lambda a: _set_item(a, 7, 7.0), True),
    # a number appended
    ("item appended", lambda a: a.append(0), True),
    # unchanged: no edit
    ("unchanged", lambda a: None, False),
]


@pytest.mark.parametrize(("case", "change", "edit"), LARGE_CHANGES, ids=[c[0] for c in LARGE_CHANGES])
def test_a_large_artifact_changed_in_place_is_an_edit(tmp_path: Path, embedder: Embedder, case: str,
                                                      change: Callable[[list[Any]], None], edit: bool) -> None:
    config = Config(data_dir=tmp_path / "data", max_metadata_bytes=BIG_METADATA_BYTES)
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem:
        sync = ConversationSync(mem, CONV)
        artifact = list(range(LARGE_ITEMS))
        state = [*_state()[:EARLIER + 2],
                 ToolMessage("sunny", tool_call_id="call_w", id="t", artifact=artifact)]
        sync.sync(state)
        state = _grown(state, 1)
        assert sync.sync(state) == 1
        rows = len(mem.history(CONV))
        change(artifact)
        state = _grown(state, 2)
        assert sync.sync(state) == (2 if edit else 1)
        assert _stored(mem) == to_openai(state)
        assert (len(mem.history(CONV)) - rows > 2) if edit else (len(mem.history(CONV)) - rows == 1)
        assert sync.sync(state) == 0
