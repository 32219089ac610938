"""A fork made after a retraction does not bring the retracted item back.

Invariants (DESIGN invariant 4; tiers.cold / tiers.postgres `fork`, tiers.formats
`retractions_past`):
- A fork copies the parent's view of positions 0..up_to as it is when the fork is made,
  retractions included: an item the parent retracted before the fork stays hidden in the
  fork also where the retraction row lies after up_to (a user said "forget it", then
  forked from an earlier turn). Such a retraction is copied after the prefix (up_to + 1,
  ...), so no read but history() shows the item: the fork's context, a search of it or
  of the namespace, another conversation's namespace recall; a caller's fold over it
  no longer stands in, in the fork as in the parent.
- A retraction written after the fork is the parent's alone (the fork already held its
  copy), and one inside the copied prefix is copied with it, as before.
Both engines (tests/conftest.py `engine_config`); SQLite's batched copy too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tiermem.tiers.cold as cold_module
from tiermem import Config, Memory

T0 = 1.8e9
SECRET = "My bank PIN is 4821 for the savings account."
MARK = "4821"
QUERY = "What is my bank PIN for the savings account?"
BUDGET = 3000  # room for every turn and hit: what is missing is left out for being hidden
RETRACT = {"type": "tiermem.retract", "position": 2}
PARENT = [("user", "Planning a trip to Rome."),            # 0
          ("assistant", "Noted: a Rome trip."),            # 1
          ("user", SECRET),                                # 2
          ("assistant", "Noted."),                         # 3
          ("user", "Forget what I said about my PIN.")]    # 4; 5: RETRACT (hides #2)
FOLDS = {1: "The user plans a trip to Rome.",              # before the retracted item
         3: "Trip to Rome; the user's bank PIN is 4821."}  # over it: a caller's fold holding it


def _build(mem: Memory, up_to: int, *, fold: int | None = None, fork_first: bool = False) -> None:
    for i, (role, text) in enumerate(PARENT):
        mem.append("b", {"role": role, "content": text}, created_at=T0 + i * 60)
    if fold is not None:  # a caller's checkpoint (no per-line positions)
        mem.checkpoint("b", FOLDS[fold], fold)
    if fork_first:
        mem.fork("b", up_to, new_id="c")
    mem.append("b", RETRACT, created_at=T0 + 400)  # 5
    if not fork_first:
        mem.fork("b", up_to, new_id="c")
    mem.append("a", {"role": "user", "content": "Hello from another chat."}, created_at=T0)
    for conv in ("a", "c"):
        mem.append(conv, {"role": "user", "content": QUERY}, created_at=T0 + 3600)
    for conv in mem.conversations():
        mem.catch_up(conv)  # every vector stored: the dense search sees every turn


def _context(mem: Memory, conv: str) -> str:
    return str(mem.context(conv, QUERY, BUDGET, record=False).messages)


def _search(mem: Memory, conv: str | None) -> list[tuple[str, int]]:
    return [(h.conversation_id, h.position) for h in mem.search(conv, "bank PIN savings account")
            if MARK in str(h)]


def _hidden_everywhere(mem: Memory) -> None:
    assert MARK not in _context(mem, "c")     # the fork's own context
    assert MARK not in _context(mem, "a")     # another conversation's namespace recall
    assert MARK not in _context(mem, "b")     # the parent (as before)
    assert _search(mem, None) == []           # the namespace's search
    assert _search(mem, "c") == []            # the fork's search


@pytest.mark.parametrize("up_to", [
    3,  # the repro: forked from before the retraction row; the fork showed #2 everywhere
    2,  # forked at the retracted item itself
])
def test_retraction_before_the_fork_holds_in_it(engine_config: Config, up_to: int) -> None:
    with Memory(engine_config) as mem:
        _build(mem, up_to)
        _hidden_everywhere(mem)
        log = mem.history("c")
        # the prefix, then the parent's retraction copied after it, then the question
        assert [m.position for m in log] == list(range(up_to + 3))
        assert log[up_to + 1].body == RETRACT
        assert log[2].body["content"] == SECRET  # history keeps the item, as the parent's does


@pytest.mark.parametrize(("fold", "stands_in"), [
    (1, True),    # a fold before the retracted item: it stands in for 0..1 in the fork
    (3, False),   # a fold over it: no longer stands in (it would show the PIN), as in the parent
])
def test_fold_over_a_retracted_item(engine_config: Config, fold: int, stands_in: bool) -> None:
    with Memory(engine_config) as mem:
        _build(mem, 3, fold=fold)
        _hidden_everywhere(mem)
        assert (FOLDS[fold] in _context(mem, "c")) == stands_in


@pytest.mark.parametrize(("fork_first", "up_to", "fork_shows"), [
    (True, 3, True),     # retracted after the fork: the parent's alone, the fork keeps its copy
    (False, 5, False),   # the retraction inside the copied prefix: copied with it, hidden
])
def test_other_orders_unchanged(engine_config: Config, fork_first: bool, up_to: int, fork_shows: bool) -> None:
    with Memory(engine_config) as mem:
        _build(mem, up_to, fork_first=fork_first)
        assert (MARK in _context(mem, "c")) == fork_shows
        assert MARK not in _context(mem, "b")
        # nothing copied after the prefix: the question took up_to + 1
        assert [m.position for m in mem.history("c")] == list(range(up_to + 2))


def test_batched_fork(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite copies a long prefix in batches from its top down (tiers.cold `fork`), and
    publishes it (the retractions copied with it) in the last transaction."""
    monkeypatch.setattr(cold_module, "FORK_BATCH_MESSAGES", 1)
    with Memory(Config(data_dir=tmp_path / "data")) as mem:
        _build(mem, 3)
        assert MARK not in _context(mem, "c")
        assert MARK not in _context(mem, "a")
        assert [m.position for m in mem.history("c")] == [0, 1, 2, 3, 4, 5]
        assert mem.history("c")[4].body == RETRACT
