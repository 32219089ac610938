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


def copied_prefixes(cold: ColdLog, conv: str, others: Collection[str]) -> dict[str, int]:
    """Of `others`, those holding copies of turns that `conv` or another of `others`
    ranked before it holds too -> the last position of those copies (0..that: a prefix,
    as every copy is); the others are absent. `conv`'s own copies are every member's
    prefix it shares with `conv` (0 up to the least fork point between them); among
    `others`, a member ranks by its forks
    from `conv` (none in common: after every member that has), then by its depth (the
    original before its forks), then by key (module docstring)."""
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

    # a member neither forked nor forked from (its chain alone, in no other's) shares nothing
    linked = {node for c in (conv, *others) if len(chains[c]) > 1 for node in chains[c]}
    ranked = sorted((o for o in others if o in linked), key=rank)
    out: dict[str, int] = {}
    for i, o in enumerate(ranked):
        shared = [m[0] for m in [met[o], *(_meet(chains[o], chains[b]) for b in ranked[:i])] if m is not None]
        last = max(shared, default=-1.0)
        if last != inf and last >= 0:
            out[o] = int(last)
    return out
