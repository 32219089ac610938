"""Summarizers: turn a run of log turns into provenance-carrying sentences.

`Summarizer` is the protocol; `ExtractiveSummarizer` (offline, the default) and
`LLMSummarizer` (any OpenAI-compatible chat-completions endpoint) implement it.

Contract shared by both:

- The output is a list of `tiers.warm.Sentence`, in log order, each naming the input
  positions it came from; every position is one of the input turns' positions.
- `render(sentences)` (one sentence per line, exactly what `SummaryView.text()` shows)
  never has more than `target_tokens` tokens, counted with the summarizer's
  `TokenCounter`.
- Turns with `superseded_by` set are left out, and so are the statements of a turn that
  a later turn superseded (`SourceTurn.superseded_spans`, the statement rows of
  tiers/statements.py): a rolling or session summary states the current value, not the
  replaced or retracted one (the constraint extract marks them instead).
- Failure raises `tiers.errors.SummarizerError`; the caller keeps the previous
  version. A summarizer never returns error text as sentences.

The extractive summarizer's sentences are exact substrings of their source turn's
text (no rewording, no speaker prefix), so a sentence can always be found again in the
turn it cites.
"""

from __future__ import annotations

import email.utils
import itertools
import json
import logging
import math
import os
import re
import threading
import time
import urllib.parse
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import SummarizerError
from tiermem.tiers.redis_url import REDACTED
from tiermem.tiers.statements import remaining_spans, remaining_text
from tiermem.tiers.tokens import BpeTokenCounter, TokenCounter
from tiermem.tiers.vectors import row_dots
from tiermem.tiers.warm import Sentence, render

log = logging.getLogger("tiermem.summarize")


@dataclass(frozen=True)
class SourceTurn:
    """One log turn as a summarizer sees it (text plus the turn index's labels)."""

    position: int
    role: str
    text: str
    intent: str | None = None
    load_bearing: bool = False
    priority: int = 0
    superseded_by: int | None = None
    embedding: np.ndarray | None = None
    session_id: str | None = None
    created_at: float = 0.0
    # characters of `text` a later turn superseded (the rest of the turn still holds)
    superseded_spans: tuple[tuple[int, int], ...] = ()

    def current_spans(self, span: tuple[int, int]) -> list[tuple[int, int]]:
        """The parts of `text[span]` that still hold (exact substrings): `span` itself
        unless a superseded statement overlaps it."""
        if not self.superseded_spans:
            return [span]
        return [(a, e) for a, e in remaining_spans(self.text, self.superseded_spans, span)
                if _HAS_WORD.search(self.text[a:e])]

    def current_text(self) -> str:
        """What still holds of the turn: its text without its superseded statements."""
        return remaining_text(self.text, self.superseded_spans) if self.superseded_spans else self.text


class Summarizer(Protocol):
    """Summarizes turns into sentences with provenance.

    `name` identifies the implementation (and model) and is stored with each view
    version. `summarize(turns, target_tokens=n)` returns sentences in log order whose
    rendering (`tiers.warm.render`) is at most n tokens; every sentence's `positions`
    are positions of `turns`. Raises `SummarizerError` on failure.
    """

    name: str

    def summarize(self, turns: Sequence[SourceTurn], *, target_tokens: int) -> list[Sentence]: ...


def call_bound_s(summarizer: Summarizer) -> float:
    """The most seconds one `summarize` call of `summarizer` can take past the work on
    this host: its `call_bound_s` (a summarizer that waits on a remote model says how
    long it may wait, so a view's lease is held that much longer), 0 for one that has
    none (the extractive summarizer: local work only)."""
    bound = getattr(summarizer, "call_bound_s", 0.0)
    return float(bound) if isinstance(bound, int | float) and math.isfinite(bound) and bound > 0 else 0.0


# ----------------------------------------------------------------------------------
# Sentence splitting (spans, so every piece is an exact substring of the turn)

_BOUNDARY = re.compile(r"(?<=[.!?…])[\"'”’)\]]*\s+(?=\S)")
_WORD_SPAN = re.compile(r"\S+")
_HAS_WORD = re.compile(r"\w")
MAX_SENTENCE_WORDS = 40
_FILLER = re.compile(
    r"^(?:hi|hello|hey|thanks|thank you|thx|ok|okay|k|sure|great|cool|nice|awesome|perfect|got it|"
    r"sounds good|no problem|bye|goodbye|good (?:morning|afternoon|evening|night)|yes|no|yep|nope|lol|"
    r"oh no|oh|wow|hmm+|oops|i see|right|alright|all right|haha|will do|of course|you're welcome)"
    r"(?:[\s,]+(?:so much|a lot|again|there|you|everyone|all))*[\s!.,:)]*$",
    re.IGNORECASE,
)


def split_sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) spans of the sentences of `text`: split at line breaks and at
    sentence punctuation; pieces longer than MAX_SENTENCE_WORDS words are cut into
    word windows. Pieces without a word character are dropped."""
    spans: list[tuple[int, int]] = []
    line_start = 0
    for line in text.split("\n"):
        cuts = [line_start]
        for m in _BOUNDARY.finditer(line):
            cuts.append(line_start + m.end())
        cuts.append(line_start + len(line))
        for a, b in itertools.pairwise(cuts):
            piece = text[a:b]
            words = [(a + w.start(), a + w.end()) for w in _WORD_SPAN.finditer(piece)]
            for i in range(0, len(words), MAX_SENTENCE_WORDS):
                chunk = words[i:i + MAX_SENTENCE_WORDS]
                s, e = chunk[0][0], chunk[-1][1]
                if _HAS_WORD.search(text, s, e):
                    spans.append((s, e))
        line_start += len(line) + 1
    return spans


# ----------------------------------------------------------------------------------
# Packing under an exact token target


class Packer:
    """Greedy packing of sentences, offered in the caller's order of preference, under
    an exact token target for their rendering in log order (`render`).

    Adding one sentence to a rendering adds at most its own tokens plus one for the
    newline (BPE pretokenization never merges across a newline into more tokens), so an
    offer that is clearly too big is refused without counting, and the exact count runs
    only on acceptance and near the boundary: a few dozen counts per summary.
    """

    NEAR = 2  # an offer up to this many tokens over the bound is counted exactly
    MAX_MISSES = 8  # exact counts that refused an offer; after these, only sure fits

    def __init__(self, tokens: TokenCounter, target: int) -> None:
        self.tokens = tokens
        self.target = target
        self.items: list[tuple[Any, Sentence]] = []  # (log-order key, sentence)
        self.used = 0  # exact tokens of render(items)
        self.misses = 0

    @property
    def remaining(self) -> int:
        return self.target - self.used

    def offer(self, order: Any, sentence: Sentence, n_tokens: int | None = None) -> bool:
        """Add `sentence` if the rendering stays within the target. `n_tokens` is
        count(render_sentence(sentence)) if the caller has it."""
        if n_tokens is None:
            n_tokens = self.tokens.count(render([sentence]))
        bound = self.used + n_tokens + (1 if self.items else 0)
        near = self.NEAR if self.misses < self.MAX_MISSES else 0
        if bound - self.target > near:
            return False
        trial = sorted([*self.items, (order, sentence)], key=lambda x: x[0])
        n = self.tokens.count(render([s for _, s in trial]))
        if n > self.target:
            self.misses += 1
            return False
        self.items, self.used = trial, n
        return True

    def sentences(self) -> list[Sentence]:
        return [s for _, s in self.items]


# ----------------------------------------------------------------------------------
# Extractive

INTENT_WEIGHT: dict[str, float] = {
    "correction": 1.0,
    "instruction": 0.9,
    "statement": 0.5,
    "question": 0.3,
    "tool_result": 0.0,
    "chitchat": -1.0,
}
ROLE_WEIGHT: dict[str, float] = {"system": 0.3, "user": 0.2, "assistant": 0.0, "tool": -0.2}
LOAD_BEARING_BONUS = 1.0
CENTRALITY_WEIGHT = 1.0
MMR_LAMBDA = 0.7
MODEL_SHARE = 0.5  # of a sentence vector: its turn's embedding
TURN_WORDS_SHARE = 0.2  # its turn's words; the rest: its own words
LEX_DIM = 512
_LEX_STOP = frozenset(re.findall(r"\w+", """
    a an and are as at be but by did do does for from had has have he her him his how i if in into is it its
    me my of on or our she so that the their them then there these they this to us was we were what when
    where which who will with would you your"""))


def _lex_vectors(texts: Sequence[str]) -> np.ndarray:
    """Hashed bag-of-words vectors (crc32, stable across processes), L2-normalized."""
    out = np.zeros((len(texts), LEX_DIM), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in re.findall(r"\w+", t.lower()):
            if w not in _LEX_STOP:
                out[i, zlib.crc32(w.encode()) % LEX_DIM] += 1.0
    np.sqrt(out, out=out)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return out / norms


def _normalize(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32)


@dataclass
class _Cand:
    order: tuple[int, int]  # (position, start offset): log order
    text: str
    turn: SourceTurn
    tokens: int
    relevance: float


class ExtractiveSummarizer:
    """Offline extractive summarizer.

    Candidates are the sentences of the input turns (superseded turns left out). Each
    gets a relevance: intent weight (corrections and instructions up, chitchat down),
    a load-bearing bonus, priority, role, and embedding centrality (cosine of its
    vector to the centroid of all candidates). A sentence's vector mixes its turn's
    embedding (stored by the cold tier; computed with `embedder` for turns without one
    when an embedder is given, else left out for those turns), a hashed bag of words of
    its turn and one of its own words. Pass `embedder=None` to never run the model
    during a refresh (the background indexer embeds turns anyway). Maximal
    marginal relevance then picks sentences, trading relevance against similarity to
    what is already picked, and keeps one only if the exact token count of the
    rendered result stays within the target. Output is in log order.
    """

    def __init__(self, tokens: TokenCounter, embedder: Embedder | None = None, *,
                 mmr_lambda: float = MMR_LAMBDA, name: str = "extractive") -> None:
        self.tokens = tokens
        self.embedder = embedder
        self.mmr_lambda = mmr_lambda
        self.name = name

    # -- pieces ----------------------------------------------------------------------------

    def _model_vectors(self, turns: Sequence[SourceTurn]) -> np.ndarray | None:
        """Turn embeddings (rows of zeros where a turn has none), or None when no turn
        has one. Missing ones are computed with `embedder` when given."""
        vecs: list[np.ndarray | None] = [None if t.embedding is None else np.asarray(t.embedding, np.float32)
                                         for t in turns]
        missing = [i for i, v in enumerate(vecs) if v is None]
        if missing and self.embedder is not None:
            try:
                fresh = self.embedder.embed([turns[i].text for i in missing])
                for i, v in zip(missing, fresh, strict=True):
                    vecs[i] = np.asarray(v, np.float32)
            except Exception as exc:  # an embedding failure degrades to words, never fails a summary
                log.warning("extractive: embedding failed (%s); missing turns use words only", exc)
        present = [v for v in vecs if v is not None]
        if not present:
            return None
        dim = present[0].shape[-1]
        if any(v.shape[-1] != dim for v in present):
            log.warning("extractive: turn embeddings of different widths; using words only")
            return None
        out = np.zeros((len(turns), dim), dtype=np.float32)
        for i, v in enumerate(vecs):
            if v is not None:
                out[i] = v
        return _normalize(out)

    @staticmethod
    def _relevance(turn: SourceTurn, text: str, tokens: int) -> float:
        r = INTENT_WEIGHT.get(turn.intent or "", 0.4)
        if turn.load_bearing:
            r += LOAD_BEARING_BONUS
        r += 0.15 * math.log1p(max(0, turn.priority))
        r += ROLE_WEIGHT.get(turn.role, 0.0)
        if _FILLER.match(text):
            r -= 1.0
        words = len(text.split())
        if words < 4:  # "Okay, do it.", "Oh no.": meaningless out of context
            r -= 0.6
        elif tokens > 60:
            r -= 0.3
        return r

    # -- the algorithm -----------------------------------------------------------------------

    def summarize(self, turns: Sequence[SourceTurn], *, target_tokens: int) -> list[Sentence]:
        if target_tokens <= 0:
            return []
        live = [t for t in turns if t.superseded_by is None and t.text.strip()]
        if not live:
            return []
        cands: list[_Cand] = []
        owner: list[int] = []
        seen: set[str] = set()
        for ti, t in enumerate(live):
            # a superseded statement is cut out of its sentence: what is left still holds
            for s, e in (piece for span in split_sentences(t.text) for piece in t.current_spans(span)):
                text = t.text[s:e]
                key = " ".join(text.lower().split())
                if key in seen:
                    continue
                seen.add(key)
                n = self.tokens.count(text)
                cands.append(_Cand((t.position, s), text, t, n, self._relevance(t, text, n)))
                owner.append(ti)
        if not cands:
            return []
        # A sentence's vector: its turn's embedding, its turn's words and its own words,
        # weighted MODEL_SHARE / TURN_WORDS_SHARE / the rest (cosine of two such vectors
        # is the weighted sum of the three cosines; a turn without an embedding still
        # compares by words).
        model = self._model_vectors(live)
        turn_lex = _lex_vectors([t.current_text() for t in live])
        lex = _lex_vectors([c.text for c in cands])
        own_share = 1 - MODEL_SHARE - TURN_WORDS_SHARE
        parts = [math.sqrt(TURN_WORDS_SHARE) * turn_lex[owner], math.sqrt(own_share) * lex]
        if model is not None:
            parts.insert(0, math.sqrt(MODEL_SHARE) * model[owner])
        vecs = np.concatenate(parts, axis=1)
        vecs = _normalize(vecs)
        centroid = vecs.mean(axis=0)
        norm = float(np.linalg.norm(centroid))
        centrality = row_dots(vecs, centroid / norm) if norm > 0 else np.zeros(len(cands), dtype=np.float32)
        rel = np.array([c.relevance for c in cands], dtype=np.float64) + CENTRALITY_WEIGHT * centrality
        # Filler and chitchat compete only when nothing else is left.
        eligible = np.array([c.relevance >= 0 for c in cands])
        if not eligible.any():
            eligible[:] = True
        lo, hi = float(rel.min()), float(rel.max())
        reln = (rel - lo) / (hi - lo) if hi > lo else np.ones_like(rel)
        cand_tokens = np.array([c.tokens for c in cands])
        max_sim = np.zeros(len(cands))  # similarity to the selection, clipped at 0
        alive = eligible.copy()
        packer = Packer(self.tokens, target_tokens)
        while alive.any() and packer.remaining > 0:
            score = self.mmr_lambda * reln - (1 - self.mmr_lambda) * max_sim
            score[~alive] = -np.inf
            i = int(np.argmax(score))
            alive[i] = False
            c = cands[i]
            sentence = Sentence(c.text, (c.turn.position,), "current", c.turn.intent)
            if not packer.offer(c.order, sentence, c.tokens):
                continue
            max_sim = np.maximum(max_sim, np.einsum("ij,j->i", vecs, vecs[i]))
            alive &= cand_tokens <= packer.remaining + Packer.NEAR
        if not packer.items:
            best = int(np.argmax(np.where(eligible, rel, -np.inf)))
            cut = self._truncate(cands[best].text, target_tokens)
            if not cut:
                return []
            c = cands[best]
            return [Sentence(cut, (c.turn.position,), "current", c.turn.intent)]
        return packer.sentences()

    def _truncate(self, text: str, target_tokens: int) -> str:
        """The longest word prefix of `text` within the target (still a substring)."""
        ends = [m.end() for m in _WORD_SPAN.finditer(text)]
        lo, hi, best = 0, len(ends) - 1, ""
        while lo <= hi:
            mid = (lo + hi) // 2
            piece = text[: ends[mid]]
            if self.tokens.count(piece) <= target_tokens:
                best, lo = piece, mid + 1
            else:
                hi = mid - 1
        return best


# ----------------------------------------------------------------------------------
# LLM (OpenAI-compatible chat completions)

# the thread that makes one request, so that `timeout_s` bounds the whole of it
REQUEST_THREAD_NAME = "tiermem-llm-request"
RETRY_BACKOFF_MAX_S = 30.0  # the longest wait between two attempts of one request
_DELTA_SECONDS = re.compile(r"[0-9]+")  # Retry-After's delay form (its other is an HTTP date)


def retry_after_s(value: str | None, now: float) -> float | None:
    """Seconds an HTTP Retry-After header asks a client to wait, from `now` (unix s):
    its delay form or its date form; None when absent or unreadable. Unbounded: the
    caller caps it."""
    text = (value or "").strip()
    if _DELTA_SECONDS.fullmatch(text):
        return float(text)  # float: a number of any length reads (as inf past the range)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        return None
    return max(0.0, when.timestamp() - now)
ERROR_BODY_CHARS = 200  # of an endpoint's error body, kept with the view's refresh error
# of an error answer's body, read: its head is all the error keeps (ERROR_BODY_CHARS, up
# to 4 bytes each in UTF-8, more where echoed keys are replaced by a shorter mark), and a
# proxy's 5xx page larger than an answer may be is still that status, retried, not "too large"
ERROR_BODY_READ_BYTES = 4096
# what the answer may come as: asked with Accept-Encoding, any other refused unread (a
# compressed answer is decoded a whole network read at a time, before the size cap can
# count it: 32 KB of zstd held 1 GiB of zeros)
IDENTITY = "identity"
ANSWER_HEAD_CHARS = 120  # of an answer with no usable line, kept likewise
# An answer is read up to what the requested max_tokens can take: each token as wide as
# JSON writes one (a BPE token holds up to ~16 characters, a non-ASCII one escaped as
# \uXXXX is 6 bytes a character), plus the envelope (ids, usage, a refusal, an error
# object). Past it the endpoint ignored max_tokens, and the rest is not held in memory.
ANSWER_BYTES_PER_TOKEN = 16 * 6
ANSWER_ENVELOPE_BYTES = 64 * 1024


def answer_bytes_limit(max_tokens: int) -> int:
    """The most bytes of an answer (or error body) read for a request of `max_tokens`."""
    return ANSWER_ENVELOPE_BYTES + ANSWER_BYTES_PER_TOKEN * max_tokens


class _AnswerTooLarge(Exception):
    """Raised by the request's worker when the answer passes its limit."""


class _AnswerEncoded(Exception):
    """Raised by the request's worker when the answer comes with a Content-Encoding."""


@dataclass(frozen=True)
class _Answer:
    """What one request got: its status, body (an error's cut to ERROR_BODY_READ_BYTES:
    `cut`) and Retry-After header."""

    status: int
    body: bytes
    retry_after: str | None
    cut: bool = False
_REFS = re.compile(r"\[\s*(#?\d+(?:\s*,\s*#?\d+)*)\s*\]\s*[.]?\s*$")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
SYSTEM_PROMPT = (
    "You maintain the memory of a long conversation. Each input turn starts with its number, like [#12]. "
    "Write a summary as short lines, one fact, instruction, constraint, decision or open question per line. "
    "Every line MUST end with the numbers of the turns it comes from, like [#12] or [#12,#15]. "
    "Keep the user's instructions, constraints, corrections, names and decisions; leave out chit-chat. "
    "When a later turn corrects an earlier one, state only the corrected value. "
    "At most {lines} lines, about {tokens} tokens in all. No preamble, no headings."
)


def parse_lines(content: str, valid: set[int]) -> list[tuple[str, tuple[int, ...]]]:
    """Lines of an LLM answer with their position refs; lines without a valid ref are
    dropped, invalid refs are removed from a line that has a valid one."""
    out: list[tuple[str, tuple[int, ...]]] = []
    for raw in content.splitlines():
        line = _BULLET.sub("", raw.strip())
        m = _REFS.search(line)
        if not m:
            continue
        refs = sorted({int(r.strip().lstrip("#")) for r in m.group(1).split(",")} & valid)
        text = line[: m.start()].strip().rstrip(" -—:")
        if refs and text and _HAS_WORD.search(text):
            out.append((text, tuple(refs)))
    return out


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """`url` without its userinfo, and that userinfo as a (user, password) pair for basic
    auth (percent-decoded, as httpx read it from the URL), or None when it has none. The
    request then goes to a URL that holds no password: httpx logs each request's URL at
    INFO ("HTTP Request: POST http://user:PW@host/..."), and a --debug log carried it."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    host = parts.netloc.rpartition("@")[2]
    bare = urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    user, password = urllib.parse.unquote(parts.username or ""), urllib.parse.unquote(parts.password or "")
    # an empty userinfo ("http://@host") sent no Authorization (httpx's rule): none still
    return bare, ((user, password) if user or password else None)


class LLMSummarizer:
    """Abstractive summaries from an OpenAI-compatible `/chat/completions` endpoint.

    Input turns are numbered by log position; the model is asked for one line per
    fact ending in position refs ("[#12,#15]"), which become the sentences'
    provenance. Lines without a valid ref are dropped; the result is cut to the token
    target line by line. A request times out `timeout_s` after it starts, however the
    endpoint trickles its answer (so one call takes at most `call_bound_s`:
    (retries + 1) * timeout_s plus the backoff between attempts); timeouts, connection
    errors, 429 and 5xx are retried `retries` times with exponential backoff; other
    failures (and an answer with no usable line) raise SummarizerError, whose
    `retry_after_s` is the endpoint's last Retry-After, when an error answer gave one
    (the view's backoff honours it; the retries within a call do not). The API key
    is read from the environment variable `api_key_env` at call time (none is sent if
    it is unset, for local servers), and is in no error: an endpoint that echoes it has
    it replaced. What the endpoint answered (an error body, an unusable answer's head)
    may quote the turns: it is the error's `excerpt`, never its message. An answer is
    read up to `answer_bytes_limit(max_tokens)` bytes; a longer one (the endpoint
    ignored max_tokens) raises SummarizerError without being held whole. An error
    answer's body is read up to ERROR_BODY_READ_BYTES, whatever its size (its status
    decides the retry). The bytes counted are those that came: the request accepts no
    Content-Encoding (`Accept-Encoding: identity`), and an answer that has one raises
    SummarizerError unread, not retried.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 30.0,
        retries: int = 2,
        *,
        tokens: TokenCounter | None = None,
        backoff_s: float = 0.5,
        max_turn_chars: int = 4000,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not base_url or not model:
            raise ValueError("LLMSummarizer needs base_url and model")
        if retries < 0 or timeout_s <= 0:
            raise ValueError("retries must be >= 0 and timeout_s > 0")
        self.base_url, self._auth = split_userinfo(base_url.rstrip("/"))
        self.model = model
        self.api_key_env = api_key_env
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.tokens: TokenCounter = tokens if tokens is not None else BpeTokenCounter()
        self.backoff_s = backoff_s
        self.max_turn_chars = max_turn_chars
        self.sleep = sleep
        self.name = f"llm:{model}"

    def _prompt(self, turns: Sequence[SourceTurn], target_tokens: int) -> list[dict[str, str]]:
        lines = []
        for t in turns:
            text = " ".join(t.current_text().split())
            if len(text) > self.max_turn_chars:
                half = self.max_turn_chars // 2
                text = text[:half] + " … " + text[-half:]
            lines.append(f"[#{t.position}] {t.role}: {text}")
        max_lines = max(1, target_tokens // 12)
        return [
            {"role": "system", "content": SYSTEM_PROMPT.format(lines=max_lines, tokens=target_tokens)},
            {"role": "user", "content": "\n".join(lines)},
        ]

    @property
    def call_bound_s(self) -> float:
        """The most seconds one `summarize` call takes: every attempt runs to its
        timeout, with the backoff before each retry (a view's lease lasts this long past
        VIEW_CLAIM_TTL_S, so no other process starts the same paid refresh meanwhile)."""
        waits = sum(self._backoff(attempt) for attempt in range(1, self.retries + 1))
        return (self.retries + 1) * self.timeout_s + waits

    def _backoff(self, attempt: int) -> float:
        """Seconds slept before retry `attempt` (1 for the first retry)."""
        return min(self.backoff_s * 2 ** (attempt - 1), RETRY_BACKOFF_MAX_S)

    def _key(self) -> str | None:
        """The API key, from the environment at call time."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def _unkeyed(self, text: str, *, cut: bool = False) -> str:
        """`text` with the API key replaced (an endpoint may echo the Authorization
        header); before any cut, so no prefix of the key is left either. `cut`: the text
        was cut where it was read (an error body past ERROR_BODY_READ_BYTES), so a key it
        ends inside has its head dropped too."""
        key = self._key()
        if not key:
            return text
        text = text.replace(key, REDACTED)
        if cut:
            for n in range(min(len(key) - 1, len(text)), 0, -1):
                if text.endswith(key[:n]):
                    return text[:-n]
        return text

    def max_tokens(self, target_tokens: int) -> int:
        """The completion tokens a request for a summary of `target_tokens` asks for
        (room for lines that are cut to the target afterwards)."""
        return max(64, 2 * target_tokens + 32)

    def _exchange(self, url: str, payload: dict[str, Any], headers: dict[str, str]) -> _Answer:
        """One request. Raises httpx's errors, `httpx.TimeoutException` when the whole
        exchange takes longer than `timeout_s`, `_AnswerTooLarge` when a 200 answer's body
        passes `answer_bytes_limit(payload["max_tokens"])` (an error's is read up to
        ERROR_BODY_READ_BYTES and cut there), and `_AnswerEncoded` for a body with a
        Content-Encoding (the request asks for none): the bytes counted are the bytes
        that came, never a decoder's output.

        httpx's timeouts bound each connect, write and read, not the request: an endpoint
        that sends a byte now and then never trips them. So a worker thread makes the
        request, and one that is not done by the deadline is abandoned; closing its
        client makes it fail at its next read (it holds no lock of ours meanwhile)."""
        import httpx  # here: only the LLM summarizer talks HTTP, and importing it costs every start

        limit = answer_bytes_limit(int(payload["max_tokens"]))
        client = httpx.Client(timeout=httpx.Timeout(self.timeout_s))
        done: list[_Answer | Exception] = []

        def run() -> None:
            try:
                with client.stream("POST", url, json=payload, headers=headers, auth=self._auth) as resp:
                    encoding = resp.headers.get("content-encoding", "").strip().lower()
                    if encoding not in ("", IDENTITY):
                        raise _AnswerEncoded(encoding)
                    ok = resp.status_code == 200
                    cap = limit if ok else ERROR_BODY_READ_BYTES
                    body = bytearray()
                    cut = False
                    for chunk in resp.iter_raw():
                        body += chunk
                        if len(body) > cap:
                            if ok:
                                raise _AnswerTooLarge(limit)
                            del body[cap:]
                            cut = True
                            break
                    done.append(_Answer(resp.status_code, bytes(body), resp.headers.get("retry-after"), cut))
            except Exception as exc:  # handed to the caller's thread, which raises it
                done.append(exc)

        worker = threading.Thread(target=run, name=REQUEST_THREAD_NAME, daemon=True)
        try:
            worker.start()
            worker.join(self.timeout_s)
        finally:
            client.close()
        if not done:
            raise httpx.TimeoutException(f"no complete answer within {self.timeout_s} s")
        result = done[0]
        if isinstance(result, Exception):
            raise result
        return result

    def _post(self, payload: dict[str, Any]) -> str:
        headers = {"Content-Type": "application/json", "Accept-Encoding": IDENTITY}
        key = self._key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        import httpx  # here: only the LLM summarizer talks HTTP, and importing it costs every start

        url = f"{self.base_url}/chat/completions"
        last = "no attempt"
        wait: float | None = None  # the endpoint's last Retry-After, for the view's backoff
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(self._backoff(attempt))
            try:
                answer = self._exchange(url, payload, headers)
            except httpx.TimeoutException as exc:
                last = f"timeout after {self.timeout_s} s ({type(exc).__name__})"
                continue
            except httpx.TransportError as exc:
                last = f"transport error: {self._unkeyed(str(exc))}"
                continue
            except _AnswerTooLarge as exc:
                # not retried: an endpoint that ignores max_tokens does so again
                raise SummarizerError(self.name, f"answer over {exc.args[0]} bytes (max_tokens "
                                      f"{payload['max_tokens']}): the endpoint ignored max_tokens") from None
            except _AnswerEncoded as exc:
                # not retried: the endpoint (or a proxy before it) ignored Accept-Encoding
                raise SummarizerError(self.name, f"answer sent with Content-Encoding {exc.args[0][:40]!r} although "
                                      f"only {IDENTITY!r} was accepted: refused unread") from None
            status, body, retry_after = answer.status, answer.body, answer.retry_after
            if status != 200:
                wait = retry_after_s(retry_after, time.time())
            if status == 429 or status >= 500:
                last = f"HTTP {status}"
                continue
            if status != 200:
                # the body may echo the prompt or the key: an excerpt, never the message
                raise SummarizerError(self.name, f"HTTP {status}",
                                      self._unkeyed(body.decode("utf-8", "replace"), cut=answer.cut)[:ERROR_BODY_CHARS],
                                      retry_after_s=wait)
            try:
                content = json.loads(body)["choices"][0]["message"]["content"]
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise SummarizerError(self.name, f"malformed completion: {exc!r}") from None
            if not isinstance(content, str):
                raise SummarizerError(self.name, "completion has no text content")
            return content
        raise SummarizerError(self.name, f"{last} ({self.retries + 1} attempts)", retry_after_s=wait)

    def summarize(self, turns: Sequence[SourceTurn], *, target_tokens: int) -> list[Sentence]:
        live = [t for t in turns if t.superseded_by is None and t.text.strip()]
        if not live or target_tokens <= 0:
            return []
        payload = {
            "model": self.model,
            "messages": self._prompt(live, target_tokens),
            "temperature": 0,
            "max_tokens": self.max_tokens(target_tokens),
        }
        content = self._post(payload)
        parsed = parse_lines(content, {t.position for t in live})
        if not parsed:
            raise SummarizerError(self.name, "no line with valid turn refs in the answer",
                                  repr(self._unkeyed(content)[:ANSWER_HEAD_CHARS]))
        by_pos = {t.position: t for t in live}
        out: list[Sentence] = []
        for text, refs in parsed:
            label = by_pos[refs[0]].intent
            trial = [*out, Sentence(text, refs, "current", label)]
            if self.tokens.count(render(trial)) > target_tokens:
                break
            out = trial
        if not out:
            raise SummarizerError(self.name, "no line fits the token target")
        return out


def build_summarizer(
    kind: str,
    *,
    tokens: TokenCounter,
    embedder: Embedder | None = None,
    llm_base_url: str | None = None,
    llm_model: str | None = None,
    llm_api_key_env: str = "OPENAI_API_KEY",
    llm_timeout_s: float = 30.0,
) -> Summarizer:
    """The summarizer a configuration names ('extractive' or 'llm')."""
    if kind == "extractive":
        return ExtractiveSummarizer(tokens, embedder)
    if kind == "llm":
        if not llm_base_url or not llm_model:
            raise ValueError("summarizer 'llm' needs llm_base_url and llm_model")
        return LLMSummarizer(llm_base_url, llm_model, llm_api_key_env, llm_timeout_s, tokens=tokens)
    raise ValueError(f"unknown summarizer {kind!r}; use 'extractive' or 'llm'")

