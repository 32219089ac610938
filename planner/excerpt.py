"""Query-focused excerpts of retrieved turns: the EXCERPT fidelity.

A retrieved turn that does not fit the room left (or, with EXCERPT_LONG_TOKENS set, a
long turn whose value is in one sentence) may be shown as an excerpt instead of being
dropped or shown whole: the sentence(s) of its text that best match the query, in their
order, with an ellipsis marker where text was left out, under the same session (date)
heading as any retrieved line.

Which sentences: the best-scoring first, then the rest by priority (planner.excerpt.choose)
as far as the room allows. A sentence's score is the planner's own keyword weight: the sum, over the query's terms
(tiers.lexical.query_terms: FTS5's words, stopwords out, Porter stems) that the sentence
holds, of each term's BM25 idf in this conversation (a word every turn says weighs
nothing, a rare one much). A turn none of whose sentences holds a query term has no
excerpt (its match was by meaning only, and no sentence can be chosen by the keyword
scores; it stays whole or out).

Invariants:
- Derived, never stored: the log is untouched; an excerpt is rendered per call from the
  turn's text and the query.
- An excerpt is a strict subset of the turn's sentences (at most EXCERPT_MAX_SENTENCES),
  kept in their original order, each verbatim; every cut is marked with ELLIPSIS, so an
  excerpt never reads as the whole turn. The plan item says fidelity "excerpt" and why.
- An excerpt line is shorter than the whole line (else the whole line is shown) and is
  counted like any line: the budget stays exact and hard (planner.build counts the
  rendered result).
- Pure given the index: the same query, turn and limit give the same excerpt, so a
  context rebuilt for the same query shows the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tiermem.planner.render import HEADING_SHARE_TOKENS, LINE_SEP_TOKENS
from tiermem.tiers.lexical import bm25_idf, doc_terms, query_terms

if TYPE_CHECKING:
    from tiermem.planner.candidates import Candidate
    from tiermem.tiers.tokens import TokenCounter
    from tiermem.tiers.turncache import TurnTable

# 0: off (a turn is whole or out). LEFTOVER (1): a retrieved turn that does not fit whole
# is offered as an excerpt in the room the verbatim lines left (after every verbatim line
# that fits was taken, so no verbatim line gives way to an excerpt). INLINE (2): in rank
# order, a turn that does not fit whole goes in as its excerpt before lower-ranked turns
# take the room (they may then not fit). The recall harness sets it (knob `excerpt`).
# Off by default: on the four dev conversations (final run, README, issue 19), INLINE
# below INLINE_MAX_ROOM_TOKENS raised recall counting excerpts (held out, one setting per
# fold over 500 / 1,000 / 2,000 / 4,000: 79.1 / 87.3 / 93.1 / 96.4 against 78.4 / 87.1 /
# 93.1 / 96.4) but not answer coverage (32.9 / 35.5 / 37.5 / 38.9 against 32.8 / 35.7 /
# 37.5 / 38.9) and cost verbatim recall (78.0 / 87.0 at 500 / 1,000); excerpting every
# line over 40 tokens (EXCERPT_LONG_TOKENS = 40) raised recall counting excerpts to
# 81.4 / 89.4 / 93.8 / 96.8 but lost 2.7-3.8 points of answer coverage: the sentences the
# keywords choose often are not the ones that hold the answer. LEFTOVER changed nothing
# measurable (the room left after the whole lines is too small for an excerpt).
# (INLINE at 2,000 tokens lost 0.1 point of verbatim recall in `tiermem eval locomo`,
# 0.4 of it temporal, for no answer coverage: hence INLINE_MAX_ROOM_TOKENS.)
LEFTOVER = 1
INLINE = 2
EXCERPT = 0
# INLINE applies to a context whose room for the slices is at most this many tokens (a
# 500 or 1,000-token budget): with more room the turns that do not fit whole rank low,
# and their excerpts only displace whole turns the room still fits (LEFTOVER applies
# above it). The harness sets it (knob `exroom`).
INLINE_MAX_ROOM_TOKENS = 1500
# A retrieved line longer than this many tokens is offered as its excerpt of at most this
# many tokens already in the first (verbatim) pass, leaving the room it saves to more
# turns; 0: off. The harness sets it (knob `exlong`).
EXCERPT_LONG_TOKENS = 0
# COMPACT = 1: a long line's excerpt (EXCERPT_LONG_TOKENS) has no token cap: it keeps every
# sentence but the questions that hold no query term ("How was it?": a question asks, its
# answer is told in a turn of its own); 0: the excerpt is cut to EXCERPT_LONG_TOKENS by
# priority. (Dropping unmatched exclamations too lost answer coverage on the dev
# conversations: chat tells facts with "!".) Knob `excompact`.
COMPACT = 0
# A call tries at most this many turns that did not fit whole for an excerpt in each pass
# (each try splits and counts a turn's sentences: bounded so a long pool costs little)
EXCERPT_MAX_TRIES = 6
EXCERPT_MAX_SENTENCES = 8  # sentences an excerpt keeps at most (a turn's few; bounds the work)
# Below this many tokens of room no excerpt is tried (a line's brackets, name, one
# short sentence and the heading's share take about this many)
MIN_EXCERPT_TOKENS = 10
ELLIPSIS = "…"
# a sentence ends at . ! or ? (and any closing quote or bracket) followed by space
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")


@dataclass(frozen=True)
class Focus:
    """One query's keyword weights: each query term's idf in this conversation."""

    weights: dict[str, float]

    @classmethod
    def of(cls, query: str, table: TurnTable) -> Focus:
        terms = query_terms(query)
        if table.lexical is None or not terms:
            return cls({})
        total, _lengths, found = table.lexical.postings(terms, len(table))
        return cls({t: bm25_idf(total, docs.shape[0]) for t, docs, _tf in found})

    def score(self, sentence: str) -> float:
        return sum(self.weights.get(t, 0.0) for t in set(doc_terms(sentence)))


def sentences(text: str) -> list[str]:
    """The text's sentences, in order, each stripped (a text without an end mark is one)."""
    return [s.strip() for s in _SENTENCE_END.split(text.replace("\n", " ")) if s.strip()]


def choose(parts: Sequence[str], focus: Focus, fits: int, cost: TokenCounter) -> list[int]:
    """Indexes (ascending) of the sentences kept, whose text together costs at most `fits`
    tokens; [] when no sentence holds a query term or the best one does not fit.

    Sentences are kept greedily by priority: those holding query terms by their score,
    then the others, statements before questions and exclamations (an answer is more often
    told than asked or exclaimed), earlier first; each that still fits is kept. So a small
    room keeps the best sentence, a larger one drops only the least useful ones."""
    scores = [focus.score(s) for s in parts]
    if not any(sc > 0.0 for sc in scores):
        return []
    if fits < 0:  # compact: every sentence but the unmatched questions and exclamations
        return [i for i, p in enumerate(parts) if scores[i] > 0.0 or not p.endswith("?")][:EXCERPT_MAX_SENTENCES]
    order = sorted(range(len(parts)), key=lambda i: (-scores[i], not parts[i].endswith("."), i))
    picked: list[int] = []
    used = 0
    for i in order:
        t = cost.count(parts[i]) + 1  # the ellipsis beside it, at most
        if used + t <= fits:
            picked.append(i)
            used += t
        elif not picked:
            return []  # the best sentence does not fit: no excerpt
        if len(picked) >= EXCERPT_MAX_SENTENCES:
            break
    return sorted(picked)


def render(prefix: str, parts: Sequence[str], picked: Sequence[int]) -> str:
    """'[who] … kept sentence … kept sentence …': an ELLIPSIS wherever text was cut."""
    out: list[str] = []
    nxt = 0
    for i in picked:
        if i > nxt:
            out.append(ELLIPSIS)
        out.append(parts[i])
        nxt = i + 1
    if nxt < len(parts):
        out.append(ELLIPSIS)
    return f"{prefix} {' '.join(out)}"


def enabled() -> bool:
    """Whether any excerpt mode is on (else the candidates need no Focus)."""
    return bool(EXCERPT or EXCERPT_LONG_TOKENS)


def excerpt_of(c: Candidate, limit: int | None, tokens: TokenCounter, why: str) -> Candidate | None:
    """`c` (a retrieved verbatim line with a source text and a Focus) as an excerpt whose
    line costs at most `limit` tokens (as packed: the line and its heading share), or None
    (not excerptable, nothing matches, nothing fits, or no shorter than the whole).
    `why` goes into the plan item's reason (it did not fit whole / a long turn).
    `limit` None: the compact excerpt (COMPACT), whatever it costs below the whole."""
    if c.focus is None or not c.source or c.fidelity != "verbatim":
        return None
    if limit is not None and limit < MIN_EXCERPT_TOKENS:
        return None
    if not c.focus.score(c.source):
        return None  # no query word anywhere in it: no sentence can be chosen
    parts = sentences(c.source)
    if len(parts) < 2:
        return None
    prefix = c.text[:c.text.index("]") + 1] if c.text.startswith("[") and "]" in c.text else ""
    overhead = LINE_SEP_TOKENS + HEADING_SHARE_TOKENS  # as every retrieved line is packed
    fits = -1 if limit is None else limit - overhead - tokens.count(prefix) - 1
    picked = choose(parts, c.focus, fits, tokens)
    if not picked or len(picked) == len(parts):
        return None
    line = render(prefix, parts, picked)
    cost = tokens.count(line) + overhead
    if (limit is not None and cost > limit) or cost >= c.tokens:
        return None
    kept = len(picked)
    return replace(c, text=line, tokens=cost, fidelity="excerpt",
                   reason=f"{c.reason}; shown as an excerpt: {why} ({kept} of {len(parts)} sentences, the "
                          f"best keyword match for the query; {c.tokens} tokens whole)")
