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
- Read per context() call, only when namespace recall searches other conversations: one
  statement by primary key per level of ancestry (`ColdLog.fork_links`), none cached, so
  a fork or an erasure is seen by the next call.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

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


def shared_prefixes(cold: ColdLog, conv: str, others: Collection[str]) -> dict[str, int]:
    """Of `others`, those of `conv`'s fork family -> the last position they share with
    it (copies of one text: positions 0..that); the others are absent."""
    others = {o for o in others if o != conv}
    if not others:
        return {}
    links: dict[str, tuple[str, int]] = {}
    asked: set[str] = set()
    ask = {conv, *others}
    for _ in range(MAX_FORK_DEPTH):
        got = cold.fork_links(sorted(ask))
        asked |= ask
        links.update(got)
        ask = {parent for parent, _up_to in got.values()} - asked
        if not ask:
            break
    if not links:
        return {}
    mine = _chain(conv, links)
    out: dict[str, int] = {}
    for o in others:
        for node, limit in _chain(o, links).items():
            if node in mine:
                shared = min(limit, mine[node])
                if shared != float("inf") and shared >= 0:
                    out[o] = int(shared)
                break
    return out
