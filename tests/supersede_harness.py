"""The supersession case tests' harness: an earlier fact, filler, a later turn, caught up.

A case file (test_supersede_*.py) lists an earlier fact, a later turn and whether the later
turn supersedes the fact. `turns` builds that conversation: the fact, each filler turn,
then the later turn, every user turn answered by the assistant. `fact_superseded` appends
it, catches it up and says whether the fact was superseded: its whole turn (position 0,
superseded_by) or any statement of it. `superseded_positions` appends user turns (each
answered "Noted.") and maps every superseded turn or statement position to its superseder.

Invariants:
- The filler is the file's to choose and always passed (`FILLER` or `CAT_FILLER`): a
  filler turn that could be revised, or revise, would change a case's answer, so which
  filler a file runs on stays visible in the file.
- The fact is the conversation's first turn and nothing but the later turn and the filler
  follows it, so a supersession at position 0 is the later turn's (or a filler's) doing.
"""

from __future__ import annotations

from collections.abc import Sequence

from tiermem import Memory

CONV = "c"

# filler without a pet, a room, a vehicle, a laptop or a price: nothing else to revise
FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "I made pasta for dinner."]
# the filler the opener-case and request-tail cases were written with; its cat is the
# subject of none of their facts, and keeping it keeps their conversations as they were
CAT_FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "My cat knocked a glass over."]


def turns(fact: str, later: str, filler: Sequence[str]) -> list[dict[str, str]]:
    msgs = [{"role": "user", "content": fact}, {"role": "assistant", "content": "Noted."}]
    for f in filler:
        msgs += [{"role": "user", "content": f}, {"role": "assistant", "content": "I see."}]
    return [*msgs, {"role": "user", "content": later}, {"role": "assistant", "content": "Okay."}]


def fact_superseded(mem: Memory, fact: str, later: str, filler: Sequence[str]) -> bool:
    mem.append_many(CONV, turns(fact, later, filler))
    mem.catch_up(CONV)
    first = mem.cold.turns(CONV)[0]
    return first.superseded_by is not None or any(s.position == 0 for s in mem.cold.superseded_statements(CONV))


def superseded_positions(mem: Memory, users: Sequence[str]) -> dict[int, int]:
    """Append each of `users` answered "Noted." (user turn i at position 2 * i), then map
    each superseded position, whole turn or statement, to the position that superseded it."""
    for u in users:
        mem.append_many(CONV, [{"role": "user", "content": u}, {"role": "assistant", "content": "Noted."}])
    last = 2 * (len(users) - 1)
    rows = mem.cold.turns(CONV, start=0, end=last)
    whole = {r.position: r.superseded_by for r in rows if r.superseded_by is not None}
    whole.update((s.position, s.superseded_by)
                 for s in mem.cold.superseded_statements(CONV, [r.position for r in rows]))
    return whole


def superseded_users(mem: Memory, users: Sequence[str]) -> dict[int, int]:
    """`superseded_positions` by user turn: {superseded user turn i: the user turn that
    superseded it}, whole turns and statements alike (the assistant's "Noted." left out)."""
    return {q // 2: new // 2 for q, new in superseded_positions(mem, users).items() if q % 2 == 0}
