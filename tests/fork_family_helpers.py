"""The fork-family recall tests' shared set-up (tests/test_fork_family_recall*.py): a
namespace of conversations, some forked from others, that all hold turns about a dinner
budget (BASE: a conversation's first four), one of them asking QUERY; and what its context recalls from the others.

- `say(mem, conv, texts, at)`: appends `texts` to `conv`, roles alternating from the
  conversation's length (user at even positions), each a minute after the one before.
- `ask(mem, askers, fillers)`: `fillers` unrelated one-turn conversations (past
  NAMESPACE_IN_MEMORY_CONVERSATIONS the cold tier's indexes are searched, not the turn
  cache's tables: FILLERS holds a count for each path), QUERY said in each asker an hour
  after T0 (`say`), and every conversation caught up, so the dense search sees every turn.
- `retrieved(mem, conv)`: the asking conversation's context's retrieved items from OTHER
  conversations, and the names of the namespace's conversations by their keys;
  `recalled(mem, conv)`: those items as (conversation name, position) pairs.

BUDGET leaves room for every hit: what a context leaves out, it leaves out for being a copy."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tiermem import Memory
from tiermem.planner.candidates import NAMESPACE_IN_MEMORY_CONVERSATIONS

T0 = 1.8e9  # the first turn's created_at (epoch seconds)
TURN_GAP_S = 60  # between one turn and the next of a conversation
ASKED_AFTER_S = 3600  # QUERY is asked an hour after T0
QUERY = "What is my dinner budget?"
BUDGET = 3000  # tokens: room for every hit
# a conversation's first turns, which the scenarios fork and copy
BASE = ["My dinner budget is 40 EUR.",           # 0
        "Noted: dinner budget 40 EUR.",          # 1
        "My dinner budget covers wine too.",     # 2
        "Noted: the dinner budget covers wine."]  # 3
FILLERS = (
    0,                                       # a few conversations: the turn cache's tables
    NAMESPACE_IN_MEMORY_CONVERSATIONS + 1,   # too many: the cold tier's indexes
)


def say(mem: Memory, conv: str, texts: list[str], at: float) -> None:
    start = len(mem.history(conv)) if conv in mem.conversations() else 0
    for j, text in enumerate(texts):
        mem.append(conv, {"role": "user" if (start + j) % 2 == 0 else "assistant", "content": text},
                   created_at=at + (start + j) * TURN_GAP_S)


def ask(mem: Memory, askers: Iterable[str], fillers: int) -> None:
    for n in range(fillers):  # past the turn cache's limit: the cold tier's indexes are searched
        say(mem, f"filler-{n:02d}", [f"Stamp collection note {n}."], T0)
    for conv in askers:
        say(mem, conv, [QUERY], T0 + ASKED_AFTER_S)
    for conv in mem.conversations():
        mem.catch_up(conv)  # every vector stored: the dense search sees every conversation's turns


def retrieved(mem: Memory, conv: str) -> tuple[dict[str, str], list[Any]]:
    names = {mem._key(c, None)[2]: c for c in mem.conversations()}
    ctx = mem.context(conv, QUERY, BUDGET, record=False)
    own = mem._key(conv, None)[2]
    return names, [i for i in ctx.plan.items if i.slice == "retrieved" and i.conversation_id != own]


def recalled(mem: Memory, conv: str) -> set[tuple[str, int]]:
    names, items = retrieved(mem, conv)
    return {(names.get(i.conversation_id, "?"), p) for i in items for p in i.positions}
