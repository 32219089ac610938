"""How the planner shows a turn of which some statements were superseded.

A turn that states several facts ("My flight is LH 1172 and my hotel is the Tivoli
Oriente") and of which a later turn corrected one ("the hotel is now the Pestana
Palace") is current in part. The record is derived (tiers/statements.py: spans of the
message text, each with the turn that superseded it); this module renders it.

Invariants:

- What still holds is shown as current, and a superseded statement never is: it is cut
  out of the turn's line and shown on a line of its own, marked ``SUPERSEDED, not
  current`` with its validity interval (valid from the turn's time until the superseding
  turn's, then replaced or retracted), so a question about the past finds it and a
  question about the present cannot mistake it for current. The plan item's reason
  names every such statement with its interval.
- The record is kept per conversation key between calls and re-read only when the
  key's pin version moved (recording a statement moves it, tiers/statements.py), and
  the version is read at most once per conversation per `context()` call (`begin`,
  `version`): the planner's pin candidates (planner.candidates `pin_set`) take the
  same read, so one call sends the log one version read, not one per cache, and what
  it keeps of pins and of statements is keyed by one version.
- Its intervals' times are the user's (the call's zone, which defaults to
  `Config.timezone`; tiers.zones): in UTC exactly as before zones existed, elsewhere local
  with the UTC offset shown. What it keeps between calls (the parts) holds no time text,
  so calls in different zones share it.
- A statement superseded only by a turn a control row hides now (a popped correction)
  holds again: the call's `Hidden` (`hide`, read with the call's control rows, which
  move no pin version) is applied to the kept record on every read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from tiermem.tiers.statements import NOTHING_HIDDEN, Hidden, remaining_text
from tiermem.tiers.store import ColdLog
from tiermem.tiers.zones import Zone, shown_time

__all__ = ["Part", "StatementView"]

KEPT_CONVERSATIONS = 256  # conversation keys whose records are kept between calls (LRU)


@dataclass(frozen=True)
class Part:
    """Characters `start:end` of a turn's text, superseded by turn `by` at time `until`."""

    start: int
    end: int
    by: int
    until: float | None
    how: str  # "replaced" or "retracted"


def _when(ts: float | None, zone: Zone) -> str:
    if ts is None:
        return "a later message"
    return shown_time(ts, zone) or "unknown time"  # None: a stored time no calendar can show


class StatementView:
    """The statement-level supersessions of conversations, as the planner renders them."""

    def __init__(self, cold: ColdLog) -> None:
        self.cold = cold
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, tuple[int, dict[int, tuple[Part, ...]]]] = OrderedDict()
        self._call = threading.local()  # the pin versions this call has read, per key

    def begin(self) -> None:
        """A new `context()` call: pin versions are read again (once per key)."""
        self._call.versions = {}
        self._call.hidden = {}

    def version(self, conv: str) -> int:
        """The log's pin version of `conv` for this call: read once per `begin` and
        then the same for everything the call keys by it (these statements, the pin
        candidates); outside a call (no `begin` on this thread), read on every ask. Read
        before the rows kept under it, so what is kept is never older than its key."""
        versions: dict[str, int] | None = getattr(self._call, "versions", None)
        if versions is None:
            return self.cold.pin_version(conv)
        got = versions.get(conv)
        if got is None:
            got = versions[conv] = self.cold.pin_version(conv)
        return got

    def hide(self, conv: str, hidden: Hidden) -> None:
        """What control rows hide in `conv` for the rest of this call (`begin` clears it)."""
        if not hasattr(self._call, "hidden"):
            self._call.hidden = {}
        self._call.hidden[conv] = hidden

    def hidden(self, conv: str) -> Hidden:
        """What this call was told control rows hide in `conv` (nothing, if not told)."""
        return getattr(self._call, "hidden", {}).get(conv, NOTHING_HIDDEN)

    def parts(self, conv: str, position: int) -> tuple[Part, ...]:
        """The superseded statements of the turn at `position`, in text order; a part
        only a hidden (popped) turn superseded holds again."""
        got = self._of(conv).get(position, ())
        hid = self.hidden(conv)
        if not got or not hid.positions:
            return got
        out = []
        for p in got:
            by = hid.by(p.by)
            if by is not None:  # past a popped step of a chain: until a later message
                out.append(p if by == p.by else Part(p.start, p.end, by, None, p.how))
        return tuple(out)

    def positions(self, conv: str) -> set[int]:
        """The turns of which some statement was superseded."""
        got = self._of(conv)
        if not self.hidden(conv).positions:
            return set(got)
        return {p for p in got if self.parts(conv, p)}

    def _of(self, conv: str) -> dict[int, tuple[Part, ...]]:
        # outside a call (no `begin` on this thread) every read checks the version
        version = self.version(conv)
        with self._lock:
            kept = self._kept.get(conv)
            if kept is not None:
                self._kept.move_to_end(conv)
        if kept is not None and kept[0] == version:
            return kept[1]
        rows = self.cold.superseded_statements(conv)
        ends = {r.position: r for r in self.cold.turns_at(conv, sorted({s.superseded_by for s in rows}))} if rows else {}
        got: dict[int, list[Part]] = {}
        for s in rows:
            end = ends.get(s.superseded_by)
            how = "retracted" if end is not None and "retraction" in (end.label_reason or "") else "replaced"
            got.setdefault(s.position, []).append(Part(s.start, s.end, s.superseded_by,
                                                       end.created_at if end is not None else None, how))
        out = {p: tuple(sorted(v, key=lambda x: x.start)) for p, v in got.items()}
        with self._lock:
            self._kept[conv] = (version, out)
            while len(self._kept) > KEPT_CONVERSATIONS:
                self._kept.popitem(last=False)
        return out

    def forget(self, conv: str | None) -> None:
        """Drop what is kept for a conversation key (None: for every one)."""
        with self._lock:
            if conv is None:
                self._kept.clear()
            else:
                self._kept.pop(conv, None)

    def render(self, text: str, parts: tuple[Part, ...], since: float, zone: Zone
               ) -> tuple[str, list[tuple[str, str]]]:
        """(what still holds of `text`, [(a superseded statement, its interval)]); `zone`: the
        call's, whose clock the intervals show."""
        gone = [(" ".join(text[p.start:p.end].split()),
                 f"valid {_when(since, zone)} until {_when(p.until, zone)}, then {p.how}") for p in parts]
        current = remaining_text(text, [(p.start, p.end) for p in parts])
        return current, gone

    def reason(self, position: int, parts: tuple[Part, ...], since: float, zone: Zone) -> str:
        """The plan's wording: each superseded statement with its interval (`zone`: as `render`)."""
        return "; ".join(f"statement at characters {p.start}-{p.end} superseded by #{p.by} (valid #{position} "
                         f"{_when(since, zone)} until #{p.by} {_when(p.until, zone)}, {p.how})" for p in parts)
