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
  same again leaves them as they are.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["StatementRow", "postgres_migration", "remaining_text", "sqlite_migration"]

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


def remaining_text(text: str, gone: Sequence[tuple[int, int]]) -> str:
    """`text` without the spans in `gone` (and the words that joined them to the rest):
    the statements that still hold, whitespace collapsed."""
    if not gone:
        return text
    pieces: list[str] = []
    at = 0
    for a, b in sorted(gone):
        if a > at:
            pieces.append(text[at:a])
        at = max(at, b)
    pieces.append(text[at:])
    out = []
    for p in pieces:
        p = _JOINER_START.sub("", _JOINER_END.sub("", p))
        if p:
            out.append(" ".join(p.split()))
    return " ".join(out)
