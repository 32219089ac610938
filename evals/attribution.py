"""Reply recall: a recall measure that needs no labels, for `tiermem tune` on your own logs.

A logged conversation already says what the model needed: each assistant reply shows,
by what it says, which earlier turns it drew on. For every reply (the assistant messages
after a user message, up to the next user message) this module finds its **sources**:
earlier turns outside the recent window that one of the reply's sentences restates.
`tiermem tune` then scores each context it built for that user message by the share of
the reply's sources the context contained (verbatim or trimmed): the **reply recall**.

Attribution, per reply sentence `s` (sentences with fewer than `MIN_SENTENCE_WORDS`
content words are skipped: "Thanks, that sounds great!" draws on nothing) against each
candidate turn `t`:

- lexical: the IDF-weighted share of `s`'s content words that `t` contains (IDF over the
  conversation's own messages, so names, order numbers and rare words weigh most);
- by meaning: the cosine of the two MiniLM vectors (the store's embedder).

`t` is a source of `s` when the cosine is at least `MIN_COSINE` (0.4), the shared words'
IDF adds up to `MIN_SHARED_IDF` (4.0: one rare word, or two uncommon ones), and
`LEX_WEIGHT * lexical + (1 - LEX_WEIGHT) * cosine >= SOURCE_THRESHOLD` (0.45); of those,
the `SOURCES_PER_SENTENCE` best, and none when more than `MAX_MATCHES` turns qualify (a
stock phrase). The participants' names and words in more than `COMMON_WORD_SHARE` of the
turns (and more than `COMMON_WORD_MIN_TURNS`) are not content words. The thresholds were set by reading attributions on one LoCoMo
conversation (conv-26), before any comparison with LoCoMo's evidence labels.

Invariants: sources depend only on the log (never on a config or a budget), so every
candidate and budget of a tune run is scored against the same sets; a candidate turn
is never a system message (always in context: it would inflate every score) and never
one of the `RECENT_MESSAGES` messages just before the user message nor the user message
itself (every context holds those; they say nothing about memory).

Where it misleads: a reply that uses an earlier fact without restating it (an agent that
acts on a preference silently) has no source, so what the context missed there is not
counted; a reply that repeats a common phrase can be credited to an unrelated turn; and
a turn the reply *could* have used but did not is never a source, so the measure rewards
serving what the logged model happened to say, which is only one good answer.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tiermem.tiers.embed import Embedder
from tiermem.tiers.formats import canonical_role
from tiermem.tiers.models import ENVELOPE_FIELDS, message_text

RECENT_MESSAGES = 6  # messages just before the user message that never count as sources
MIN_SENTENCE_WORDS = 3  # content words a reply sentence needs to be attributed at all
LEX_WEIGHT = 0.5  # the lexical score's weight in the combined score (the rest: cosine)
SOURCE_THRESHOLD = 0.45  # combined score from which a turn is a sentence's source
SOURCES_PER_SENTENCE = 2  # at most this many sources per sentence (the best ones)
MIN_COSINE = 0.4  # below this a turn is not about what the sentence says, whatever words it shares
# the IDF (ln(turns / turns with the word)) the shared words must add up to: one word found
# in under 2% of the turns (ln 50 = 3.9), or two in under 13% each (2 x 2.0)
MIN_SHARED_IDF = 4.0
COMMON_WORD_SHARE = 0.05  # a word in more of the turns than this is not a content word here
COMMON_WORD_MIN_TURNS = 5  # ... provided it is in more turns than this (short logs keep their words)
MAX_MATCHES = 6  # a sentence that many turns restate is a stock phrase: attributed to none
MIN_WORD_CHARS = 3  # shorter words are not content words, except numbers
MAX_SENTENCES_PER_REPLY = 32  # a reply longer than this is attributed by its first sentences

_WORD = re.compile(r"[a-z0-9][a-z0-9\-']*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_STOPWORD_TEXT = """
about above after again against all also and any are aren't because been before being below between both but
can can't cannot could couldn't did didn't does doesn't doing don't down during each few for from further had
hadn't has hasn't have haven't having he'd he'll he's her here here's hers herself him himself his how how's
i'd i'll i'm i've into isn't it's its itself just let's more most mustn't myself nor not now off once only
other ought our ours ourselves out over own really same shan't she she'd she'll she's should shouldn't some
such than that that's the their theirs them themselves then there there's these they they'd they'll they're
they've this those through too under until very was wasn't we'd we'll we're we've were weren't what what's
when when's where where's which while who who's whom why why's will with won't would wouldn't yes you you'd
you'll you're you've your yours yourself yourselves yeah wow oh okay sure thanks thank great good nice cool
awesome glad like know think want one get got going really well much many lot lots way thing things
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def content_words(text: str) -> list[str]:
    """Lowercased words that carry content: not stopwords, at least `MIN_WORD_CHARS`
    characters, or any number (an order id, a date)."""
    out = []
    for w in _WORD.findall(text.lower()):
        w = w.strip("-'")
        if w and w not in STOPWORDS and (len(w) >= MIN_WORD_CHARS or w.isdigit()):
            out.append(w)
    return out


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _body(msg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in msg.items() if k not in ENVELOPE_FIELDS}


@dataclass
class Reply:
    """The reply to the user message at index `user_index` and the indexes of the earlier
    messages it draws on (ascending; empty when it restates nothing)."""

    user_index: int
    sources: list[int] = field(default_factory=list)


def replies(messages: Sequence[dict[str, Any]]) -> dict[int, list[int]]:
    """user message index -> indexes of the assistant messages that answer it (those
    after it up to the next user message; tool results in between are not the reply)."""
    out: dict[int, list[int]] = {}
    current: int | None = None
    for i, m in enumerate(messages):
        role = canonical_role(_body(m))
        if role == "user":
            current = i
            out[i] = []
        elif role == "assistant" and current is not None:
            out[current].append(i)
    return out


def attribute(messages: Sequence[dict[str, Any]], embedder: Embedder) -> list[Reply]:
    """Every reply of one conversation with its sources (see the module docstring)."""
    bodies = [_body(m) for m in messages]
    roles = [canonical_role(b) for b in bodies]
    texts = [message_text(b) for b in bodies]
    # the participants' names are in half the turns ("Thanks, Caroline!"): no content
    names = {w for m in messages if isinstance(m.get("name"), str) for w in content_words(m["name"])}
    words = [set(content_words(t)) - names for t in texts]
    n = max(len(texts), 1)
    df = Counter(w for ws in words for w in ws)
    # words in more than COMMON_WORD_SHARE of the turns are the conversation's small talk
    idf = {w: math.log(n / c) for w, c in df.items() if c <= max(COMMON_WORD_MIN_TURNS, COMMON_WORD_SHARE * n)}
    by_user = replies(messages)
    sents: list[tuple[int, set[str]]] = []  # (the user message it answers, its content words)
    sent_texts: list[str] = []
    for u, reply_ix in by_user.items():
        for r in reply_ix:
            for s in sentences(texts[r])[:MAX_SENTENCES_PER_REPLY]:
                cw = {w for w in content_words(s) if w in idf}
                if len(cw) >= MIN_SENTENCE_WORDS:
                    sents.append((u, cw))
                    sent_texts.append(s)
    out = {u: Reply(u) for u in by_user}
    if not sents:
        return list(out.values())
    turn_vecs = np.asarray(embedder.embed([t or " " for t in texts]), dtype=np.float32)
    sent_vecs = np.asarray(embedder.embed(sent_texts), dtype=np.float32)
    cos = sent_vecs @ turn_vecs.T  # both L2-normalized
    found: dict[int, set[int]] = {u: set() for u in by_user}
    for k, (u, s_words) in enumerate(sents):
        limit = u - RECENT_MESSAGES  # candidates: indexes below this
        if limit <= 0:
            continue
        total = sum(idf[w] for w in s_words)
        scored: list[tuple[float, int]] = []
        for t in range(limit):
            if roles[t] in ("system", "developer") or float(cos[k, t]) < MIN_COSINE:
                continue
            shared = sum(idf[w] for w in s_words & words[t])
            if shared < MIN_SHARED_IDF:
                continue
            combined = LEX_WEIGHT * shared / total + (1 - LEX_WEIGHT) * float(cos[k, t])
            if combined >= SOURCE_THRESHOLD:
                scored.append((combined, t))
        if len(scored) > MAX_MATCHES:
            continue  # a stock phrase restated all over the conversation: no one source
        scored.sort(reverse=True)
        found[u].update(t for _score, t in scored[:SOURCES_PER_SENTENCE])
    for u, src in found.items():
        out[u].sources = sorted(src)
    return list(out.values())


@dataclass
class ReplyScore:
    """Reply recall at one (candidate, budget) point, accumulated reply by reply."""

    shares: list[float] = field(default_factory=list)  # per reply with sources: contained / sources
    sources: int = 0
    contained: int = 0

    def add(self, sources: Sequence[int], contained: set[int]) -> None:
        if not sources:
            return
        hit = sum(1 for p in sources if p in contained)
        self.shares.append(hit / len(sources))
        self.sources += len(sources)
        self.contained += hit

    def summary(self) -> dict[str, Any]:
        return {
            "reply_recall": round(sum(self.shares) / len(self.shares), 4) if self.shares else None,
            "replies_with_sources": len(self.shares),
            "reply_sources": self.sources,
            "reply_sources_contained": self.contained,
        }


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None below 3 points or when
    either side is constant."""
    if len(xs) != len(ys) or len(xs) < 3:
        return None

    def ranks(v: Sequence[float]) -> np.ndarray:
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v), dtype=np.float64)
        arr = np.asarray(v, dtype=np.float64)[order]
        i = 0
        while i < len(arr):
            j = i
            while j + 1 < len(arr) and arr[j + 1] == arr[i]:
                j += 1
            r[order[i:j + 1]] = (i + j) / 2.0
            i = j + 1
        return r

    rx, ry = ranks(xs), ranks(ys)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])
