"""Fork families: which turns of another conversation are copies of this one's.

Invariants:
- A fork (tiers.cold `fork`) copies positions 0..up_to of its parent into the child and
  records (parent key, up_to) on the child's row; nothing else links conversations. Two
  conversations are of one family when their chains of recorded parents meet (an
  ancestor, a descendant, or a branch of a common ancestor), transitively; the parent's
  key stays recorded after the parent is erased, so branches of an erased parent still
  meet there.
- The turns two members share are positions 0..N, N the least `up_to` on the path
  between them through the tree: those are one text, copied. Recalled from the other
  member they would come back duplicated, "from another conversation", and without the
  marks the asking conversation's own supersessions give them (a correction made after
  the fork is in one branch only). Namespace recall (planner.candidates
  `namespace_hits`) skips them; what a branch added after its fork stays recallable.
- Nor are two OTHER members' copies of one turn both recalled (a fork of a third
  conversation, or of the asker's sibling: b#4 and its copy c#4): of the members holding
  one text at a position, only the one ranked first keeps it (`copied_prefixes`): the
  asker itself (its copies are skipped above), then the member closest to it in the fork
  tree (fewest forks between them, erased parents counted), then the original (the
  member nearest the family's root, which the others copied it from), then by key, so
  every call keeps the same copy. The copy relation at a position is an equivalence
  (shared with b and b's with c: shared with c, the path between them inside the two
  paths), so this keeps exactly one copy of each text among the members searched.
- That choice is per position: a member's copy of p is skipped only where a member
  ranked before it (not the asker) still shows its copy of p; one that has hidden it
  since (a retraction, a pop, an edit: its control rows, tiers.formats
  `hidden_positions`, as namespace recall hides it) passes p to the next member, so a
  turn one member retracted is still recalled from a member that did not (b retracts
  its #0 after c forked it: c#0 is recalled). The asker's own copies stay skipped even
  where it hid them: it retracted the turn, and recalling its copy from a fork would
  undo that.
- Read per context() call, only when namespace recall searches other conversations: one
  statement by primary key per level of ancestry (`ColdLog.fork_links`), and where two
  or more other members are searched one read of their control rows
  (`ColdLog.control_rows`); none cached, so a fork, an erasure or a retraction is seen by
  the next call.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import NamedTuple

from tiermem.tiers.formats import hidden_positions
from tiermem.tiers.store import ColdLog

# levels of parents read at most: a chain of forks of forks deeper than this is cut
# there (its deeper ancestors' copies recalled as before); a guard against a cycle a
# hand-edited row could record
MAX_FORK_DEPTH = 64


def _chain(key: str, links: Mapping[str, tuple[str, int]]) -> dict[str, float]:
    """`key` and its recorded ancestors -> the last position it shares with each (itself:
    every one, infinity)."""
    out: dict[str, float] = {key: float("inf")}
    limit = float("inf")
    at = key
    for _ in range(MAX_FORK_DEPTH):
        link = links.get(at)
        if link is None or link[0] in out:
            break
        limit = min(limit, link[1])
        at = link[0]
        out[at] = limit
    return out


def _links(cold: ColdLog, keys: Collection[str]) -> dict[str, tuple[str, int]]:
    """The fork links of `keys` and of their ancestors: one read per level of ancestry."""
    links: dict[str, tuple[str, int]] = {}
    asked: set[str] = set()
    ask = set(keys)
    for _ in range(MAX_FORK_DEPTH):
        got = cold.fork_links(sorted(ask))
        asked |= ask
        links.update(got)
        ask = {parent for parent, _up_to in got.values()} - asked
        if not ask:
            break
    return links


def _meet(a: dict[str, float], b: dict[str, float]) -> tuple[float, int] | None:
    """Where two chains (`_chain`) meet: (the last position their members share, the
    forks between them), None when they do not (no common ancestor read)."""
    for i, (node, limit) in enumerate(a.items()):
        if node in b:
            return min(limit, b[node]), i + list(b).index(node)
    return None


class Copies(NamedTuple):
    """A member's copies not to search: positions 0..`last` but those in `shown` (copies
    no member ranked before it shows: `copied_prefixes`)."""

    last: int
    shown: frozenset[int] = frozenset()

    def skips(self, position: int) -> bool:
        return position <= self.last and position not in self.shown


def copied_prefixes(cold: ColdLog, conv: str, others: Collection[str]) -> dict[str, Copies]:
    """Of `others`, those holding copies of turns that `conv` or another of `others`
    ranked before it holds too -> those copies (`Copies`: within a prefix, as every copy
    is); the others are absent. `conv`'s own copies are every member's prefix it shares
    with `conv` (0 up to the least fork point between them), skipped whole; among
    `others`, a member ranks by its forks from `conv` (none in common: after every member
    that has), then by its depth (the original before its forks), then by key, and its
    copy of a position is skipped only where one ranked before it still shows its copy
    there (not hidden by its control rows: module docstring)."""
    others = {o for o in others if o != conv}
    if not others:
        return {}
    links = _links(cold, {conv, *others})
    if not links:
        return {}
    chains = {c: _chain(c, links) for c in (conv, *others)}
    mine = chains[conv]
    met = {o: _meet(chains[o], mine) for o in others}
    inf = float("inf")

    def rank(o: str) -> tuple[float, int, str]:
        m = met[o]
        return (inf if m is None else m[1], len(chains[o]) - 1, o)

    def last(m: tuple[float, int] | None) -> int:
        """The last position of a meeting's copies, -1: none (no meeting, or an infinite
        limit: a chain that loops back on itself, which a hand-edited row could record)."""
        return int(m[0]) if m is not None and m[0] != inf and m[0] >= 0 else -1

    # a member neither forked nor forked from (its chain alone, in no other's) shares nothing
    linked = {node for c in (conv, *others) if len(chains[c]) > 1 for node in chains[c]}
    ranked = sorted((o for o in others if o in linked), key=rank)
    # what each member's control rows hide now: its copy there is shown by no one (read
    # only where a member ranks after another, the only case that asks)
    hidden = ({c: hidden_positions(rows)[0] for c, rows in cold.control_rows(ranked).items()}
              if len(ranked) > 1 else {})
    out: dict[str, Copies] = {}
    for i, o in enumerate(ranked):
        own = last(met[o])  # the asker's copies: skipped whole
        before = [(last(_meet(chains[o], chains[b])), hidden.get(b, set())) for b in ranked[:i]]
        end = max([own, *(n for n, _h in before)])
        if end < 0:
            continue
        # a position past the asker's copies that every member ranked before holding it
        # hides: this member's copy is the one shown (only a hidden position can be one)
        maybe = {p for n, h in before for p in h if own < p <= n}
        shown = frozenset(p for p in maybe if all(p > n or p in h for n, h in before))
        out[o] = Copies(end, shown)
    return out
