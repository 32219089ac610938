"""Marks: a superseded turn the raw tail shows, marked in the retrieved block.

The recent tail shows turns as they were said (raw messages, never rewritten: a
provider's cache holds them byte for byte, and tool calls and their results must reach
it whole). A turn superseded wholly or in part that only the tail shows carried no mark:
when a conversation's whole log fits the budget the context is the log verbatim, so a
user who corrected themselves in a short conversation got no SUPERSEDED mark at all,
while in a long one the same turn, retrieved or pinned, was shown marked. Now such a
turn is marked the way every other slice marks it: its line, as a retrieved superseded
turn's (" · SUPERSEDED, not current: <validity>"; of a turn superseded in part, each
superseded statement's line: what still holds is the tail's), in the retrieved block.

Invariants:
- Every turn of this conversation that the context shows raw (the tail, the latest user
  message) and that is superseded now, wholly or in part (a supersession by a popped
  turn counts as absent: tiers.statements.Hidden), is marked once in the context: in a
  line that shows it already (retrieved, pinned: those slices mark it), else by a mark.
- Prefix stability (docs/design.md, invariant 6): a mark goes where this call's own
  part goes (the retrieved block). A context planned anew holds the marks of the
  superseded turns its tail shows; within an epoch an extension appends a mark only for
  a turn superseded since (the correction is new), with this call's retrieved turns,
  after the kept prefix: a correction costs no cache miss, and an earlier call's mark
  stays in the prefix, never sent twice. A turn shown raw and by an earlier mark alone
  that is superseded further since (its other statement, or whole) is such a turn: a
  new mark holds what is new (`for_segments`, the supersessions a mark's reason names),
  no new epoch. A rewind that drops the block holding a mark marks the turn again in
  this call's block.
- A marked line carries one label: a turn superseded in part and then whole keeps each
  statement's label, and the whole's goes only on the lines without one.
- A mark ranks above every retrieved turn for the room (`MARK_SCORE`: the packing drops
  retrieved turns and a new epoch's reserve leaves them out first), and is no retrieved
  turn for an epoch's decisions (`without`: the query's needs and their ranking are the
  retrieved turns'). The budget stays hard: the callers count the result exactly.
- Reads: one statement for the rows of the raw turns the call's tail rows do not cover,
  and the messages of the turns marked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tiermem.planner.candidates import Candidate
from tiermem.planner.epoch import RAW_KINDS, Segment
from tiermem.planner.render import HEADING_SHARE_TOKENS, SUPERSEDED_LABEL, label_superseded

if TYPE_CHECKING:
    from tiermem.planner.candidates import Candidates
    from tiermem.planner.pack import Packing
    from tiermem.planner.plan import PlanItem
    from tiermem.tiers.models import TurnRow
    from tiermem.tiers.zones import Zone

# Above any retrieved turn's score (z-score sums: the best turns of a conversation score
# about 5-10, planner.candidates): the packing's drop order and a new epoch's reserve
# (planner.epoch_policy.give_way) take retrieved turns before a mark.
MARK_SCORE = 100.0
REASON = "the tail shows it as it was said: marked here, not as a current value"
# the supersessions a mark's reason names (`marks`: a whole turn's "superseded by #6 (...",
# each statement's "... superseded by #2 (...", planner.statements)
_BY = re.compile(r"superseded by #(\d+)")


@dataclass
class Mark(Candidate):
    """A mark: a retrieved-block line for a superseded turn the tail shows raw."""


def superseded(cands: Candidates, conv: str, positions: Iterable[int], known: Sequence[TurnRow] = ()
               ) -> dict[int, TurnRow]:
    """Of `positions` (turns shown raw), those superseded now, wholly or in part, with
    their rows read past popped turns; `known`: rows the call read already."""
    want = set(positions)
    if not want:
        return {}
    rows = {r.position: r for r in known if r.position in want}
    if missing := sorted(want - rows.keys()):
        rows.update((r.position, r) for r in cands.cold.turns_at(conv, missing))
    hid = cands.statements.hidden(conv)
    parted = cands.statements.positions(conv)
    out: dict[int, TurnRow] = {}
    for p, r in rows.items():
        r = hid.row(r)
        if r.superseded_by is not None or (p in parted and cands.statements.parts(conv, p)):
            out[p] = r
    return out


def marks(cands: Candidates, conv: str, rows: Mapping[int, TurnRow], zone: Zone,
          said: Mapping[int, AbstractSet[str]] | None = None) -> list[Mark]:
    """The marks of `rows` (superseded turns, `superseded`), in log order: each one's
    line as a retrieved superseded turn's (its session heading, its validity interval on
    `zone`'s clock), of a turn superseded in part its superseded statements' lines;
    `said`: by position, lines an earlier mark of the turn holds in the context, not sent
    again."""
    if not rows:
        return []
    whole = [r for r in rows.values() if r.superseded_by is not None]
    intervals = cands.intervals(conv, whole, zone)
    out: list[Mark] = []
    for m in cands.cold.get(conv, sorted(rows)):
        r = rows[m.position]
        line, trimmed = cands.render.line(m, dated=False, zone=zone)
        if r.superseded_by is not None:
            # one label a line: a statement superseded before the whole turn was is marked
            # on its line already (planner.render), the rest of the turn takes the whole's
            line = label_superseded(line, intervals[m.position][1])
            why = f"superseded by #{r.superseded_by} ({intervals[m.position][0]}): {REASON}"
        else:
            parts = cands.statements.parts(conv, m.position)
            # what still holds is the tail's to show: the mark holds the superseded lines
            line = "\n".join(ln for ln in line.split("\n") if SUPERSEDED_LABEL in ln)
            why = f"{cands.statements.reason(m.position, parts, m.created_at, zone)}: {REASON}"
        if said and m.position in said:
            line = "\n".join(ln for ln in line.split("\n") if ln not in said[m.position])
        if not line:
            continue
        out.append(Mark("retrieved", conv, m.position, MARK_SCORE, why, line,
                        tokens=cands.render.line_tokens(line) + HEADING_SHARE_TOKENS,
                        fidelity="trimmed" if trimmed else "verbatim", tier="cold",
                        header=cands.render.heading(m, None, zone)))
    return out


def for_tail(cands: Candidates, conv: str, packing: Packing, known: Sequence[TurnRow], zone: Zone) -> list[Mark]:
    """The marks a context planned anew needs: of the superseded turns its chosen tail
    shows that no chosen retrieved or pinned line shows (those are marked there)."""
    chosen = packing.chosen
    raw = {p for c in chosen["tail"] if c.conversation_id == conv for p in (c.group or [c.position])}
    lined = {p for s in ("retrieved", "pinned") for c in chosen[s] if c.conversation_id == conv
             for p in (c.group or [c.position])}
    return marks(cands, conv, superseded(cands, conv, raw - lined, known), zone)


def take(packing: Packing, got: Sequence[Mark]) -> None:
    """Add `got` to the packing's retrieved slice (what does not fit, the exact count
    drops: retrieved turns first, `MARK_SCORE`)."""
    if not got:
        return
    cost = sum(c.tokens for c in got) + (packing.header["retrieved"] if not packing.chosen["retrieved"] else 0)
    packing.chosen["retrieved"].extend(got)
    packing.used["retrieved"] += cost
    packing.remaining -= cost


def for_segments(cands: Candidates, conv: str, segments: Sequence[Segment], new: Iterable[int],
                 known: Sequence[TurnRow], zone: Zone) -> list[Mark]:
    """The marks an extension appends: of the superseded turns `segments` (the context
    kept, with what arrived since) show raw, and `new` (positions arriving now), those
    no line of `segments` shows (a retrieved or pinned line is marked, or the epoch had
    ended: planner.build `_extend`), nor an earlier call's mark as they stand now: a turn
    marked before is marked again, after it, for a supersession its marks do not name (a
    second statement superseded, or the whole turn: the correction is new), never by a
    new epoch."""
    raw = {p for g in segments if g.kind in RAW_KINDS for it in g.items if it.conversation_id == conv
           for p in it.positions} | set(new)
    lined = {p for g in segments if g.kind not in RAW_KINDS for it in g.items if it.conversation_id == conv
             and it.fidelity in ("verbatim", "trimmed") and not is_mark(it) for p in it.positions}
    named: dict[int, set[int]] = {}  # position -> the superseders its marks name
    said: dict[int, set[str]] = {}  # position -> the labelled lines of the blocks its marks are in
    for g in segments:
        for it in g.items:
            if g.kind not in RAW_KINDS and it.conversation_id == conv and is_mark(it):
                text = g.message.get("content")
                for p in it.positions:
                    named.setdefault(p, set()).update(int(b) for b in _BY.findall(it.reason))
                    if isinstance(text, str):
                        said.setdefault(p, set()).update(ln for ln in text.split("\n") if SUPERSEDED_LABEL in ln)
    gone = superseded(cands, conv, raw - lined, known)
    # a statement an earlier mark labelled is not labelled again: the new mark holds what is new
    return marks(cands, conv, {p: r for p, r in gone.items() if not _by(cands, conv, r) <= named.get(p, set())},
                 zone, said)


def is_mark(item: PlanItem) -> bool:
    """Whether a plan item is a mark (`marks`: its reason ends with `REASON`)."""
    return item.reason.endswith(REASON)


def _by(cands: Candidates, conv: str, r: TurnRow) -> set[int]:
    """What supersedes `r` now (read past popped turns, `superseded`): the turn that
    superseded it whole (its mark labels every line), else each superseded statement's."""
    if r.superseded_by is not None:
        return {r.superseded_by}
    return {x.by for x in cands.statements.parts(conv, r.position)}


def without(chosen: dict[str, list[Candidate]]) -> dict[str, list[Candidate]]:
    """`chosen` with no mark in its retrieved slice: what an epoch's decisions weigh as
    the query's retrieved turns (a copy; the packing keeps its marks)."""
    return {**chosen, "retrieved": [c for c in chosen["retrieved"] if not isinstance(c, Mark)]}
