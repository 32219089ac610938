"""Statements: the parts of one message that each state a fact, so that a correction can
supersede one of them and leave the others current.

``statement_spans`` cuts a text into statements: sentences (ending in ``.``, ``!``,
``?``, or cut by ``;``), and clauses joined by "and" / "but" / "while" / "whereas" when
both sides have a verb of their own ("My flight is LH 1172 and my hotel is the Tivoli
Oriente" is two statements; "Book the flight and the hotel" is one). Spans are
character offsets into the text as given, so a derived record can name a part of a
stored message without copying or editing it (tiers/statements.py).

Invariants:

- Pure functions of the text: the same text always gives the same spans, so a span
  recorded at append time still names the same words when the log is replayed.
- Spans never overlap, are in text order, and leave out only whitespace and the joining
  conjunction; a text without a cut is one span (the whole text, stripped).
- Time linear in the text's length, whatever runs of spaces or conjunctions it holds (a
  stored message is read whole, past what the classifier reads).
"""

from __future__ import annotations

import re
from itertools import islice

from tiermem.tiers.statements import remaining_text  # one home: the planner renders with it too

__all__ = ["MAX_STATEMENTS", "remaining_text", "statement_spans"]

MAX_STATEMENTS = 12  # statements considered per message (a long message: the rest is one tail span)
CLAUSE_VERB_WORDS = 4  # the right-hand clause's verb must come within this many words of its start

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|;\s*")
# A join starts at its comma or at the first space of a run, and keeps the spaces it took: a
# search tries every position, and ",?\s+" from each of n spaces in a run backtracked over
# the rest of it, n squared steps ("..., can you" and 16,000 spaces: 18 s to append)
_JOIN = re.compile(r"(?:,|(?<![\s,]))\s++(?:and|but|while|whereas)\s++", re.I)
_WORDS = re.compile(r"\S+")
# A verb of its own: a copula or auxiliary, a contraction, a common verb of stating facts,
# or a past tense in -ed ("the package arrived damaged").
_VERB = re.compile(
    r"\b(?:is|are|was|were|am|be|has|have|had|will|would|can|could|should|must|do|does|did|go|goes|run|runs|use|"
    r"uses|need|needs|take|takes|live|lives|work|works|start|starts|end|ends|cost|costs|land|lands|leave|leaves|"
    r"arrive|arrives|prefer|prefers|want|wants|like|likes|stay|stays|get|gets|pay|pays|own|owns|eat|eats|"
    r"drink|drinks|speak|speaks|\w{3,}ed)\b|\w'(?:s|m|re|ve|ll|d)\b",
    re.I,
)


def _has_verb(text: str, *, within: int | None = None) -> bool:
    # only the words read are split off: the right clause is the rest of its sentence, and
    # splitting all of it at each conjunction was n squared
    words = text.split() if within is None else [m.group(0) for m in islice(_WORDS.finditer(text), within)]
    return bool(_VERB.search(" ".join(words)))


def _strip(text: str, a: int, b: int) -> tuple[int, int] | None:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return (a, b) if a < b else None


def statement_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the statements of `text`, in order."""
    sentences: list[tuple[int, int]] = []
    at = 0
    for m in _SENTENCE_END.finditer(text):
        span = _strip(text, at, m.start() + (1 if m.group(0).startswith(";") else 0))
        if span:
            sentences.append(span)
        at = m.end()
    last = _strip(text, at, len(text))
    if last:
        sentences.append(last)
    out: list[tuple[int, int]] = []
    for a, b in sentences:
        start = a
        # whether the left clause (start to the conjunction) has a verb, read once per part:
        # a conjunction and its spaces hold no verb, so the clause has one when the part
        # before the last conjunction did or the part since does ("x and x and ..." read the
        # whole left clause again at every "and": n squared)
        left_verb, seen = False, start
        for m in _JOIN.finditer(text, a, b):
            left_verb = left_verb or _has_verb(text[seen:m.start()])
            seen = m.end()
            if left_verb and _has_verb(text[m.end():b], within=CLAUSE_VERB_WORDS):
                span = _strip(text, start, m.start())
                if span:
                    out.append(span)
                start, left_verb = m.end(), False
        span = _strip(text, start, b)
        if span:
            out.append(span)
    if len(out) > MAX_STATEMENTS:
        out = [*out[:MAX_STATEMENTS - 1], (out[MAX_STATEMENTS - 1][0], out[-1][1])]
    return out
