"""Statement-level supersession: the derived record of which *part* of a turn a later
turn superseded, when one message states several facts and a correction revises one.

A row says: the characters ``start:end`` of the text of the message at ``position``
(`StoredMessage.text`, the text the message was stored with) held from that message's
time until the message at ``superseded_by``. Invariants:

- Derived, never an edit of the log: the message is untouched, the row names a span of
  its text, and ``rebuild`` clears the table and the supersession replay refills it
  (DESIGN invariant 2). An erasure or a prune removes a conversation's rows with its
  other derived rows (the table is in each engine's ``CONVERSATION_TABLES``); a fork
  copies the rows whose both ends it copies, as it does ``turns.superseded_by``.
- ``turns.superseded_by`` keeps meaning "the whole turn no longer holds": it is set when
  a turn's last current statement is superseded, so readers of whole turns (the pins,
  the hot tier) need nothing new; a turn with rows here and no ``superseded_by`` is
  current in part.
- Recording a row moves the conversation's pin version (a trigger, as for every other
  change of what may be presented as current), so a pinned block or a turn rendered from
  a kept copy is re-read.
- Rows are written once per (conversation, position, start): a replay that decides the
  same again leaves them as they are; only a row naming a hidden turn is replaced, by the
  correction that supersedes its statement again (see below).
- A pop hides a correction without editing these rows or ``superseded_by``: readers see
  supersession through ``Hidden`` (``read_hidden``), where a turn or statement superseded
  by a hidden turn counts as superseded by what superseded that one in turn, and as
  current when nothing did. A turn of which a statement holds again so is current in
  part, even where its ``superseded_by`` (set when its last statement went, maybe by a
  turn no pop hides) says whole (`Hidden.revived`), for every reader of whole turns --
  only when that ``superseded_by`` is one of its own statement rows' (a later correction
  that superseded the statement again set it otherwise). A correction that supersedes a
  statement whose row names a hidden turn rewrites that row (``set_superseded_statements``'s
  ``over``). A replay (``rebuild``) never takes a hidden turn as a correction or a target,
  so it records the same.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tiermem.tiers.formats import hidden_positions
from tiermem.tiers.models import HIT_CURRENT, HIT_SUPERSEDED, HIT_SUPERSEDED_IN_PART, TurnRow

if TYPE_CHECKING:
    from tiermem.tiers.store import ColdLog

__all__ = ["NOTHING_HIDDEN", "Hidden", "StatementRow", "TurnState", "hidden_many", "postgres_migration", "read_hidden",
           "remaining_spans", "remaining_text", "sqlite_migration", "turn_states"]

TABLE = "statement_supersessions"


@dataclass(frozen=True)
class StatementRow:
    """Characters `start:end` of the message at `position` were superseded by the message
    at `superseded_by`."""

    position: int
    start: int
    end: int
    superseded_by: int


def sqlite_migration(c: Any) -> None:
    """m014_statement_supersessions of the SQLite engine: the table and its pin-version triggers."""
    c.execute(
        f"""CREATE TABLE {TABLE}(
            conversation_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            start INTEGER NOT NULL CHECK (start >= 0),
            "end" INTEGER NOT NULL CHECK ("end" > start),
            superseded_by INTEGER NOT NULL CHECK (superseded_by > position),
            PRIMARY KEY (conversation_id, position, start)
        )"""
    )
    bump = ("INSERT INTO pin_versions(conversation_id, version) VALUES ({conv}, 1) "
            "ON CONFLICT(conversation_id) DO UPDATE SET version = version + 1;")
    for event, row in (("INSERT", "NEW"), ("DELETE", "OLD")):
        c.execute(f"CREATE TRIGGER pin_version_statement_{event.lower()} AFTER {event} ON {TABLE} "
                  f"BEGIN {bump.format(conv=row + '.conversation_id')} END")


def postgres_migration(c: Any) -> None:
    """The PostgreSQL engine's step for the same table (tm_bump_pin_version exists)."""
    c.execute(
        f"""CREATE TABLE {TABLE}(
            conversation_id TEXT NOT NULL,
            position BIGINT NOT NULL,
            start INTEGER NOT NULL CHECK (start >= 0),
            "end" INTEGER NOT NULL CHECK ("end" > start),
            superseded_by BIGINT NOT NULL CHECK (superseded_by > position),
            PRIMARY KEY (conversation_id, position, start))"""
    )
    c.execute(f"CREATE TRIGGER pin_version_statements AFTER INSERT OR DELETE ON {TABLE} FOR EACH ROW "
              "EXECUTE FUNCTION tm_bump_pin_version()")


# what joined a cut statement to its neighbours ("..., and" / "but ..."): goes with it
_JOINER_END = re.compile(r"[\s,;]*(?:\b(?:and|but|while|whereas))?[\s,;]*$", re.I)
_JOINER_START = re.compile(r"^[\s,;]*(?:(?:and|but|while|whereas)\b)?[\s,;]*", re.I)


def remaining_spans(text: str, gone: Sequence[tuple[int, int]], within: tuple[int, int] | None = None
                    ) -> list[tuple[int, int]]:
    """The spans of `text` (of `text[within]`, when given) outside the spans in `gone`,
    each without the words that joined it to a gone one: exact substrings, in order."""
    start, end = within if within is not None else (0, len(text))
    pieces: list[tuple[int, int]] = []
    at = start
    for a, b in sorted(gone):
        if b <= at or a >= end:
            continue
        if a > at:
            pieces.append((at, a))
        at = max(at, b)
    if at < end:
        pieces.append((at, end))
    out = []
    for a, b in pieces:
        head = _JOINER_START.match(text[a:b])  # on the piece: "^" ignores a start offset
        a += head.end() if head is not None else 0
        tail = _JOINER_END.search(text[a:b])
        b = a + tail.start() if tail is not None else b
        if a < b:
            out.append((a, b))
    return out


def remaining_text(text: str, gone: Sequence[tuple[int, int]]) -> str:
    """`text` without the spans in `gone` (and the words that joined them to the rest):
    the statements that still hold, whitespace collapsed."""
    if not gone:
        return text
    return " ".join(" ".join(text[a:b].split()) for a, b in remaining_spans(text, gone))


@dataclass(frozen=True)
class Hidden:
    """What a conversation's control rows hide now (a pop), as supersession readers need
    it: `after` holds each hidden position's own ``superseded_by``, so a chain A -> B -> C
    with B popped reads A -> C, and with C popped B is current again. `revived`: the turns
    of which a statement holds again because only a hidden turn superseded it
    (`reviving`), each with the ``superseded_by`` of its own statement rows: such a turn
    is current in part when its ``superseded_by`` is one of those (it was set when its
    last statement was superseded, by a turn that need not be hidden), and superseded as
    it says otherwise: a later correction superseded the statement again, whose row a
    store written before such rows were rewritten (`over`) still names the hidden turn."""

    positions: frozenset[int] = frozenset()
    after: Mapping[int, int | None] = field(default_factory=dict)
    revived: Mapping[int, frozenset[int]] = field(default_factory=dict)

    def by(self, by: int | None) -> int | None:
        """The turn that supersedes, for a record that says `by`: past the hidden ones."""
        seen: set[int] = set()
        while by is not None and by in self.positions and by not in seen:
            seen.add(by)
            by = self.after.get(by)
        return by

    def row(self, r: TurnRow) -> TurnRow:
        """`r` with its ``superseded_by`` read past the hidden turns: None for a revived turn."""
        if r.superseded_by is None:
            return r
        if r.superseded_by in self.revived.get(r.position, ()):
            return replace(r, superseded_by=None)
        if r.superseded_by not in self.positions:
            return r
        return replace(r, superseded_by=self.by(r.superseded_by))

    def reviving(self, rows: Iterable[StatementRow]) -> Hidden:
        """This, with the turns of `rows` (statement rows) of which a statement only hidden
        turns superseded added to `revived`, with their rows' ``superseded_by``."""
        if not self.positions:
            return self
        rows = list(rows)
        got = {s.position for s in rows if self.by(s.superseded_by) is None}
        if not got:
            return self
        revived = {p: set(v) for p, v in self.revived.items()}
        for s in rows:
            if s.position in got:
                revived.setdefault(s.position, set()).add(s.superseded_by)
        return replace(self, revived={p: frozenset(v) for p, v in revived.items()})

    def statements(self, rows: Sequence[StatementRow]) -> list[StatementRow]:
        """`rows` read past the hidden turns: a statement only a hidden turn superseded
        holds again, so its row is left out."""
        out = []
        for s in rows:
            by = self.by(s.superseded_by)
            if by is not None:
                out.append(s if by == s.superseded_by else StatementRow(s.position, s.start, s.end, by))
        return out


NOTHING_HIDDEN = Hidden()


def read_hidden(cold: ColdLog, conversation_id: str, hidden: set[int] | frozenset[int] | None = None) -> Hidden:
    """`Hidden` for a conversation: its control rows read (or `hidden`, the positions a
    caller read already), and what superseded each hidden turn."""
    if hidden is None:
        hidden = hidden_positions(cold.control_rows([conversation_id]).get(conversation_id, []))[0]
    if not hidden:
        return NOTHING_HIDDEN
    after = {r.position: r.superseded_by for r in cold.turns_at(conversation_id, sorted(hidden))}
    # a turn whose statement only a hidden turn superseded is current in part again
    return Hidden(frozenset(hidden), after).reviving(cold.superseded_statements(conversation_id))


def hidden_many(cold: ColdLog, hidden: Mapping[str, Collection[int]],
                rows: Mapping[tuple[str, int], TurnRow], keys: Iterable[tuple[str, int]]) -> dict[str, Hidden]:
    """`Hidden` of each conversation with hidden positions (`hidden`: key -> positions, as
    a caller read them), for the turns at `keys` across conversations: `rows` holds their
    turn rows and the hidden turns' (read by the caller in one `turns_at_many`). The
    statement rows of the keys wholly superseded in such a conversation (what `revived`
    needs) are read in one `superseded_statements_many`, none when there are none."""
    hid = {c: Hidden(frozenset(ps), {p: r.superseded_by for p in ps if (r := rows.get((c, p))) is not None})
           for c, ps in hidden.items() if ps}
    whole = [k for k in dict.fromkeys(keys)
             if k[0] in hid and (r := rows.get(k)) is not None and r.superseded_by is not None]
    if not whole:
        return hid
    got: dict[str, list[StatementRow]] = {}
    for c, s in cold.superseded_statements_many(whole):
        got.setdefault(c, []).append(s)
    return {c: h.reviving(got.get(c, ())) for c, h in hid.items()}


@dataclass(frozen=True)
class TurnState:
    """What a conversation holds of one of its turns now (`turn_states`): a
    `tiers.models.SearchHit` status, and for a wholly superseded turn the turn that
    superseded it (past popped ones) and that turn's time (None: its row is not readable)."""

    status: str
    superseded_by: int | None = None
    until: float | None = None


CURRENT = TurnState(HIT_CURRENT)


def turn_states(cold: ColdLog, keys: Sequence[tuple[str, int]],
                hidden: Mapping[str, Collection[int]]) -> dict[tuple[str, int], TurnState]:
    """The supersession state of the turns at (key, position) pairs across conversations,
    read past what each conversation's control rows hide now (`hidden`: key -> positions,
    as a caller read them already): a turn only a popped correction superseded is current
    again, wholly or in part, as `facts()` and the planner read it.

    Reads for all the keys at once, never one per key or per conversation: the turn rows
    (with the hidden turns', whose own `superseded_by` a chain past a popped step follows)
    in one `turns_at_many`, the statement rows of the turns not wholly superseded in one
    `superseded_statements_many`, and the superseding turns' times in a third, only when
    some turn is wholly superseded; in a conversation with popped turns, the statement
    rows of its wholly superseded turns (`hidden_many`) in a fourth, only when there are
    such turns. A key with no turn row (gone meanwhile) is left out."""
    want = list(dict.fromkeys(keys))
    if not want:
        return {}
    hid_keys = [(c, p) for c, ps in hidden.items() for p in sorted(ps)]
    rows = {(r.conversation_id, r.position): r for r in cold.turns_at_many([*want, *hid_keys])}
    hid = hidden_many(cold, hidden, rows, want)
    whole: dict[tuple[str, int], int] = {}  # wholly superseded -> by
    rest: list[tuple[str, int]] = []
    for key in want:
        r = rows.get(key)
        if r is None:
            continue
        by = hid[key[0]].row(r).superseded_by if key[0] in hid else r.superseded_by
        if by is not None:
            whole[key] = by
        else:
            rest.append(key)
    parts: dict[tuple[str, int], list[StatementRow]] = {}
    for c, srow in cold.superseded_statements_many(rest) if rest else []:
        parts.setdefault((c, srow.position), []).append(srow)
    ends = ({(r.conversation_id, r.position): r.created_at
             for r in cold.turns_at_many(sorted({(c, by) for (c, _p), by in whole.items()}))}
            if whole else {})
    out: dict[tuple[str, int], TurnState] = {}
    for key in want:
        if key in whole:
            by = whole[key]
            out[key] = TurnState(HIT_SUPERSEDED, by, ends.get((key[0], by)))
        elif key in rows:
            got = parts.get(key, [])
            if got and key[0] in hid:
                got = hid[key[0]].statements(got)
            out[key] = TurnState(HIT_SUPERSEDED_IN_PART) if got else CURRENT
    return out
