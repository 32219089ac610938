"""A LangGraph sync that fits in one append names a message the store refuses by its index
in the graph state, as a chunked sync does (232828a): a later sync's new messages follow
the ones an earlier sync stored, so their index in the sync's batch is not theirs in the
state (`messages[1]` for the state's `messages[4]`).

Real parts: a real `TiermemHooks` over a Memory in this process and over a `Client` of a
real served app (real SQLite each, the same Config).

Fails on the code before: 2 of 4 (the later sync, in process and over a Client, named the
message `messages[1]`); a first sync's batch index is its state index: those pass before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph")
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from service_helpers import TOKEN_ACME, served_and_local, stored_rows

from tiermem import Memory
from tiermem.adapters._common import MemoryLike
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.client import Client
from tiermem.tiers.errors import LimitExceeded

NS = "acme"
MAX_CONTENT_BYTES = 4096  # both stores'
PAST_CONTENT = MAX_CONTENT_BYTES + 1  # chars (ASCII: bytes) of a text the store refuses
NEW = 2  # new messages in the refused sync: one batch, the last refused

# (case id, messages of the state a sync before stored (0: none), the refused field)
CASES = [
    # the first sync: batch index == state index (passes before too)
    ("first sync", 0, f"messages[{NEW - 1}].content"),
    # after 3 stored: the new ones are the state's 3 and 4, the batch's 0 and 1
    ("sync after stored", 3, f"messages[{3 + NEW - 1}].content"),
]


def _state(stored: int, refused: bool) -> list[BaseMessage]:
    first = [HumanMessage(f"h{i}", id=f"h{i}") if i % 2 == 0 else AIMessage(f"a{i}", id=f"a{i}")
             for i in range(stored)]
    if not refused:
        return first
    return [*first, HumanMessage("fine", id="fine"), HumanMessage("x" * PAST_CONTENT, id="big")]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Memory]]:
    """The served store's URL, and a store in this process with the same Config."""
    with served_and_local(tmp_path_factory.mktemp("single-batch-named"), max_content_bytes=MAX_CONTENT_BYTES) as both:
        yield both


@pytest.mark.parametrize("store", ["memory", "client"])
@pytest.mark.parametrize(("label", "stored", "field"), CASES, ids=[c[0] for c in CASES])
def test_single_batch_sync_names_state_index(stores: tuple[str, Memory], tmp_path: Path, store: str,
                                             label: str, stored: int, field: str) -> None:
    url, local = stores
    conv = f"c-{tmp_path.name}"
    with Client(url, token=TOKEN_ACME, namespace=NS) as client:
        mem: MemoryLike = local.namespaced(NS) if store == "memory" else client
        hooks = TiermemHooks(mem, conv)
        if stored:
            hooks.sync(_state(stored, refused=False))
        with pytest.raises(LimitExceeded) as refused:
            hooks.sync(_state(stored, refused=True))
        assert refused.value.field == field, str(refused.value)
        assert str(refused.value) == f"{field}: {refused.value.problem}"
        # its value and limit kept through the renaming
        assert (refused.value.value, refused.value.limit) == (PAST_CONTENT, MAX_CONTENT_BYTES)
        assert stored_rows(mem, conv) == stored  # nothing of the refused sync written
