"""Epoch state: what the planner sent last time for a conversation, so that the next
context can extend it instead of rebuilding it (DESIGN invariant 6).

Within an epoch the context is append-only: the previous call's messages stay as they
were, byte for byte, and the next call appends the log turns that arrived since, the
turns retrieved for its own query that are not shown yet, and its latest user message.
A provider's prompt cache then serves the whole previous context. When the room left
cannot hold what the call needs, when a pin shown as current stops being current, when
a shown summary line leaves its view, or when the caller changes the budget, the
system prompt or the time zone (the dates shown are another clock's), a new epoch starts: the context is rebuilt from the stable layers (one
planned cache miss, reported in the plan with its reason).

Invariants:
- The state is derived and per process: losing it (a restart, another worker, the LRU
  dropping a conversation) costs one new epoch, never a wrong context.
- It is keyed by the conversation and an incarnation stamp (the first turn's position
  and time), so a conversation pruned and created again under the same id never
  continues an epoch of its predecessor.
- Nothing in it is presented as current unless the call that extends it has checked
  that it still is (pins, summary lines).
- What arrived since is what the log holds past the newest position the previous call
  read (`read_position`), not past the newest one its context shows (`last_position`):
  a turn the previous context left out for room is not new, so a call with nothing new
  extends the previous context by what its query needs and nothing else (the same call
  again gives the same context: a rebuild is a fixed point, not one side of a cycle).
  Once something new arrives, the appended turns start right after `last_position`, so
  the raw tail stays contiguous (a tool result is never appended without its call).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from tiermem.planner.plan import PlanItem
from tiermem.tiers.zones import UTC_NAME

EPOCH_CACHE_CONVERSATIONS = 1024  # conversations whose last context is kept (~4 bytes a token each)

# The segments of a context that show log turns raw, in log order (the tail, and the
# user message an extension keeps in place as a tail turn): a correction that arrived
# after one of them follows it in the same order, as a rebuilt context's tail shows it
# too, so a statement of theirs superseded since ends no epoch (a pinned, summary or
# retrieved line presented out of order does).
RAW_KINDS = frozenset({"tail", "latest"})


@dataclass(frozen=True)
class EpochKey:
    """What must not change for a context to extend the previous one."""

    budget: int
    system: str
    stamp: tuple[int, float] | None  # first turn's position and time: the incarnation
    namespace_recall: bool
    timezone: str = UTC_NAME  # the user's zone: the context's dates and headings are its clock's


@dataclass(frozen=True)
class Segment:
    """One message of a context, its layer (planner.plan.LAYERS) and the plan items it shows."""

    kind: str
    message: dict[str, Any]
    items: tuple[PlanItem, ...] = ()


@dataclass(frozen=True)
class EpochState:
    key: EpochKey
    epoch: int
    calls: int
    segments: tuple[Segment, ...]  # the context sent, message by message
    pinned: frozenset[int]  # positions in the pinned block, presented as current
    summary_lines: frozenset[str]  # lines of the summary block, presented as current
    last_position: int  # the newest log position the context shows
    # The newest log position the call read (its tail rows): a turn after last_position
    # and not after this one was in the log and left out for room, not "arrived since".
    read_position: int
    latest_user: int | None
    latest_truncated: bool
    head: int = 0  # leading segments kept across a middle eviction (planner.middle), marked for caching
    late_paid: int = 0  # late-pin tokens sent so far in this epoch, summed over its calls (planner.late_pins)


class EpochCache:
    """The last context per conversation, least recently used dropped; thread-safe."""

    def __init__(self, capacity: int = EPOCH_CACHE_CONVERSATIONS) -> None:
        self.capacity = capacity
        self._states: OrderedDict[str, EpochState] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, conversation_id: str) -> EpochState | None:
        with self._lock:
            st = self._states.get(conversation_id)
            if st is not None:
                self._states.move_to_end(conversation_id)
            return st

    def put(self, conversation_id: str, state: EpochState) -> None:
        with self._lock:
            self._states[conversation_id] = state
            self._states.move_to_end(conversation_id)
            while len(self._states) > self.capacity:
                self._states.popitem(last=False)

    def drop(self, conversation_id: str) -> None:
        with self._lock:
            self._states.pop(conversation_id, None)


def key_change(old: EpochKey, new: EpochKey) -> str:
    """Why `new` cannot extend an epoch begun under `old` ("" when it can)."""
    if old.stamp != new.stamp:
        return "the conversation was re-created or its log rewritten"
    if old.budget != new.budget:
        return f"budget changed ({old.budget} -> {new.budget} tokens)"
    if old.system != new.system:
        return "system prompt changed"
    if old.namespace_recall != new.namespace_recall:
        return "namespace recall switched"
    if old.timezone != new.timezone:
        return f"time zone changed ({old.timezone} -> {new.timezone}): the dates shown are another clock's"
    return ""
