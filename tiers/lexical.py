"""An in-memory keyword index of one conversation, scored with BM25 like FTS5's `bm25()`.

The planner ranks every turn of a conversation against each query and needs the best
keyword matches among them. FTS5 computes `bm25()` for every row that matches any query
word, through its auxiliary-function API: in a 10k-turn conversation a ten-word query
matches most turns, and that ranking alone cost 12-34 ms per query. This index keeps the
same information (which turns hold which terms, how often, how long each turn is) as
postings arrays beside the turn cache's vectors, and scores a query with a few numpy
operations over the postings of its terms (under a millisecond at 10k turns).

Invariants:
- Derived, never authoritative: built from the text the FTS index holds
  (`messages_fts.text`, read with the turn facts) and never written anywhere. FTS5 stays
  the cold tier's keyword search (the API's search, namespace recall); this index serves
  only the planner's scoring of its own conversation.
- The same words as FTS5's `porter unicode61 remove_diacritics 2` tokenizer: runs of
  letters and digits, lower-cased, diacritics removed, ASCII words Porter-stemmed (the
  original Porter algorithm, as FTS5's). The query drops the same stopwords as
  `tiers.cold.fts_query` and keeps at most as many terms.
- The same formula as FTS5's `bm25()` (k1 = 1.2, b = 0.75, idf floored at 1e-6, lower is
  better), with one deliberate difference: document counts, frequencies and the average
  length are this conversation's, not the whole database's, so a word common in one
  conversation counts as common there whatever the others say.
- Append-only, like the log: a turn is added once, in log order, and postings only grow.
  A reader scores the first `n` turns (its snapshot); one lock guards the arrays.
- The words, the counts, the formula and the top-k (`query_words_terms`,
  `term_counts`, `total_length`, `bm25_top`) are public and shared with the SQLite
  store's `search_bm25`, which ranks FTS5's matches with them over its scope's own
  statistics: one tokenizer and one formula, never a second copy.
- The stems remembered per word are found again only in the memo scope they were
  computed in (`tiers.memo`), so no caller's latency says which words another wrote.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain, pairwise
from typing import Any

import numpy as np

from tiermem.tiers.memo import ScopedMemo
from tiermem.tiers.search import MAX_FTS_TERMS, STOPWORDS

BM25_K1 = 1.2  # FTS5's constants
BM25_B = 0.75
IDF_FLOOR = 1e-6  # FTS5 floors a non-positive idf (a word in over half the turns) to this
# distinct words whose stems are remembered, each scope counting as tiers.memo's
# SCOPE_ENTRIES words: ~32 MB at most for words of up to ~10 letters however they spread
# over scopes (measured peaks: 32 MB in one scope, 29 MB in one-word scopes, which took
# 88 MB before scopes counted); a longer word costs its length twice more (word and term)
MAX_STEM_MEMO = 200_000
MAX_TERM_COUNT = 65_535  # a term's count within one turn is stored in 16 bits

# What the index holds in memory, for the turn cache's bound (turn_cache_mb): fitted to
# tracemalloc over support-chat indexes of 300, 2,000 and 20,000 turns (the former 6 and 120
# counted about half: 6.9 MB counted, 13.2 MB held at 20,000 turns; scale review 2026-12-07).
# A posting is a 4-byte turn index and a 2-byte count in arrays grown ~1/16 ahead, ~10 bytes;
# a vocabulary entry is its str, dict slot, term id int, two list slots and two array
# objects (64 bytes each, with a few spare rows), ~270 bytes
POSTING_BYTES = 10
VOCAB_ENTRY_BYTES = 270
LENGTH_BYTES = 4  # a turn's term total, one int32
_TOKEN = re.compile(r"[^\W_]+")  # unicode61's token characters: letters and digits
# The same split of ASCII text, 5x faster than the regex: every byte that is not a
# letter or digit becomes a space, then bytes.split (search_bm25 splits every match)
_ASCII_SPACES = bytes(b if chr(b).isascii() and chr(b).isalnum() else 0x20 for b in range(256))
_lock = threading.Lock()
# lower-cased word -> term (folded, stemmed), found again only in the memo scope it was
# stemmed in (tiers.memo: a word another tenant wrote is never stemmed faster)
_terms: ScopedMemo[str, str] = ScopedMemo(MAX_STEM_MEMO)
_porter: Any = None


def bm25_idf(total: int, df: int) -> float:
    """A term's BM25 idf among `total` documents, `df` of which hold it, floored as FTS5
    floors it (IDF_FLOOR for a word in over half of them)."""
    idf = math.log((total - df + 0.5) / (df + 0.5))
    return idf if idf > 0.0 else IDF_FLOOR


def _term(word: str) -> str:
    """The term of a lower-cased word: diacritics removed, then (ASCII letters only, as
    FTS5's porter tokenizer) Porter-stemmed. Remembered: a conversation repeats words."""
    got = _terms.get(word, None)
    if got is not None:
        return got
    global _porter
    folded = word if word.isascii() else "".join(
        ch for ch in unicodedata.normalize("NFKD", word) if not unicodedata.combining(ch))
    with _lock:  # snowball stemmers keep state between calls
        if folded.isascii() and folded.isalpha() and len(folded) > 2:
            if _porter is None:
                import snowballstemmer

                _porter = snowballstemmer.stemmer("porter")
            term = str(_porter.stemWord(folded))
        else:
            term = folded
    _terms.put(word, term)
    return term


def forget_terms() -> None:
    """Forget the remembered words (and so the texts they came from), of every scope: an
    erasure leaves no copy of erased text in this process."""
    _terms.clear()


def _stems(words: Iterable[Any]) -> dict[Any, str]:
    """Each of the distinct `words` (lower-cased, str or ASCII bytes, as `_words` gives
    them) -> its term, stemmed or found in the memo once each: a 1 MB turn holds ~185k
    words but far fewer distinct ones, and a lookup per word through the memo (`_term`)
    cost ~0.7 s of CPU per MB (the reviewer's 10 x 1 MB turns: 13 s for the first plan)."""
    memo = _terms.table()  # the scope's own words, looked up once per text
    out: dict[Any, str] = {}
    hits = 0
    for w in words:
        key = w.decode("ascii") if isinstance(w, bytes) else w
        got = memo.get(key)
        if got is None:
            got = _term(key)
        else:
            hits += 1
        out[w] = got
    _terms.hits += hits
    return out


def doc_terms(text: str) -> list[str]:
    """A turn's terms, as the index counts them, in text order."""
    words = _words(text)
    return list(map(_stems(set(words)).__getitem__, words))


def doc_term_counts(text: str) -> Counter[str]:
    """`Counter(doc_terms(text))`, terms in the order they first occur, counted as words
    first (C speed) and then merged by term: what the index adds per turn."""
    words = Counter(_words(text))
    out: Counter[str] = Counter()
    for w, term in _stems(words).items():
        out[term] += words[w]
    return out


def _words(text: str) -> list[str] | list[bytes]:
    """The lower-cased words `doc_terms` stems, unstemmed; as bytes for ASCII text."""
    low = text.lower()
    if low.isascii():
        return low.encode("ascii").translate(_ASCII_SPACES).split()
    return _TOKEN.findall(low)


def total_length(texts: Iterable[str]) -> int:
    """How many terms `doc_terms` finds in all of `texts` together (no stemming needed to
    count them: one pass over the texts joined by a separator)."""
    return len(_words("\n".join(texts)))


class _WordSlots(dict[Any, int]):
    """word (str, or bytes of ASCII) -> the index of its term among `terms`, -1 if none:
    a dict that stems a word the first time it is asked for."""

    def __init__(self, terms: Sequence[str]) -> None:
        super().__init__()
        self._slot = {t: i for i, t in enumerate(terms)}

    def __missing__(self, word: Any) -> int:
        i = self[word] = self._slot.get(_term(word.decode("ascii") if isinstance(word, bytes) else word), -1)
        return i


def term_counts(texts: Sequence[str | None], terms: Sequence[str]
                ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """What a LexicalIndex of `texts` would hold for `terms` (index terms, distinct):
    each text's length in terms and, per term, the texts holding it (indexes, ascending)
    and its count in each (both empty for a term none holds). Counted as `doc_terms`
    counts, but each distinct word is stemmed once per call and the rest is bulk work:
    one split per text, then numpy over every word at once."""
    n = len(texts)
    per_text = [_words(t) if t else [] for t in texts]
    lengths = np.fromiter(map(len, per_text), dtype=np.int64, count=n)
    flat: list[Any] = list(chain.from_iterable(per_text))
    # each word's term slot (-1: none of them), each distinct word stemmed once
    slots = np.fromiter(map(_WordSlots(terms).__getitem__, flat), dtype=np.int64, count=len(flat))
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))
    doc = np.repeat(np.arange(n, dtype=np.int64), lengths)
    held = slots >= 0
    # one key per (term, text): sorted by term, then text; its count is the term's count there
    keys, counts = np.unique(slots[held] * n + doc[held], return_counts=True)
    bounds = np.searchsorted(keys, np.arange(len(terms) + 1, dtype=np.int64) * n)
    out = [(keys[a:b] % n, counts[a:b].astype(np.float64)) if b > a else empty
           for a, b in pairwise(bounds)]
    return lengths.astype(np.float64), out


def query_words_terms(query: str) -> list[tuple[str, str]]:
    """A query's distinct terms, stopwords left out, at most MAX_FTS_TERMS, each with the
    first word of the query that gave it: (word, term). A word is one token (letters and
    digits, lower-cased, unstemmed), so quoted it is a one-token FTS5 string that FTS5's
    tokenizer turns into the same term; a `\\w+` word with an underscore would be a
    phrase there instead."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for w in _TOKEN.findall(query.lower()):
        if w in STOPWORDS:
            continue
        t = _term(w)
        if t not in seen:
            seen.add(t)
            out.append((w, t))
            if len(out) >= MAX_FTS_TERMS:
                break
    return out


def query_terms(query: str) -> list[str]:
    """A query's distinct terms, stopwords left out, at most MAX_FTS_TERMS."""
    return [t for _w, t in query_words_terms(query)]


def bm25_top(total: int, avgdl: float, lengths: np.ndarray,
             postings: Sequence[tuple[np.ndarray, np.ndarray]], k: int,
             dfs: Sequence[int] | None = None) -> list[tuple[int, float]]:
    """FTS5's `bm25()` over documents 0..len(lengths)-1 (each one's length in terms):
    `postings` holds, per query term, the documents holding it (every one of the
    collection that does, so that their count is the term's document frequency) and its
    count in each. `total` documents of mean length `avgdl` make the collection the idf
    and the length norm are computed in; documents holding no term need not be among
    `lengths`. The k best: (document, bm25), best first, bm25 negative (lower is
    better); ties go to the lower document. `dfs`: each term's document frequency, when
    `postings` hold only some of the documents that hold it (a search that read part of
    its matches)."""
    n = lengths.shape[0]
    if not postings or k < 1 or n == 0:
        return []
    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * lengths / (avgdl or 1.0))
    score = np.zeros(n, dtype=np.float64)
    matched = np.zeros(n, dtype=bool)
    for t, (docs_t, tf) in enumerate(postings):
        df = docs_t.shape[0] if dfs is None else dfs[t]
        idf = bm25_idf(total, df)
        score[docs_t] += idf * tf * (BM25_K1 + 1.0) / (tf + norm[docs_t])
        matched[docs_t] = True
    hits = np.flatnonzero(matched)
    if hits.shape[0] > k:
        # the k best, then any documents tied with the k-th (the tie-break needs them all)
        kth = -np.partition(-score[hits], k - 1)[k - 1]
        hits = hits[score[hits] >= kth]
    order = np.lexsort((hits, -score[hits]))[:k]
    return [(int(hits[i]), -float(score[hits[i]])) for i in order]


class LexicalIndex:
    """Postings of one conversation's turns; turn i is the i-th turn added."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._vocab: dict[str, int] = {}
        self._docs: list[array[int]] = []  # per term: turn indexes holding it, ascending
        self._counts: list[array[int]] = []  # per term: its count in each of those turns
        self._lengths: array[int] = array("i")  # terms per turn
        self._postings = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def nbytes(self) -> int:
        return self._postings * POSTING_BYTES + len(self._lengths) * LENGTH_BYTES + len(self._vocab) * VOCAB_ENTRY_BYTES

    def add(self, text: str | None) -> None:
        """Append the next turn (None: a turn without text, which matches nothing)."""
        self.add_many([text])

    def add_many(self, texts: list[str | None]) -> None:
        """Append turns in log order."""
        counted = [doc_term_counts(t) if t else Counter() for t in texts]
        with self._lock:
            vocab, docs, counts = self._vocab, self._docs, self._counts
            for c in counted:
                doc = len(self._lengths)
                for t, k in c.items():
                    tid = vocab.get(t)
                    if tid is None:
                        tid = vocab[t] = len(docs)
                        docs.append(array("i"))
                        counts.append(array("H"))
                    docs[tid].append(doc)
                    counts[tid].append(k if k < MAX_TERM_COUNT else MAX_TERM_COUNT)
                self._postings += len(c)
                self._lengths.append(c.total())

    def postings(self, terms: list[str], n: int | None = None
                 ) -> tuple[int, np.ndarray, list[tuple[str, np.ndarray, np.ndarray]]]:
        """Over the first `n` turns (all by default): how many there are, each one's length
        in terms, and for each of `terms` (already index terms: `query_terms`, `doc_terms`)
        that occurs there, the turns holding it and its count in each (copies)."""
        out: list[tuple[str, np.ndarray, np.ndarray]] = []
        with self._lock:
            total = len(self._lengths) if n is None else min(n, len(self._lengths))
            if total == 0:
                return 0, np.zeros(0), out
            # copies, made under the lock: a buffer view held past it would stop the
            # arrays from growing
            lengths = np.frombuffer(self._lengths, dtype=np.int32)[:total].astype(np.float64)
            for t in terms:
                tid = self._vocab.get(t)
                if tid is None:
                    continue
                docs = np.frombuffer(self._docs[tid], dtype=np.int32)
                cut = int(np.searchsorted(docs, total))
                if cut:
                    out.append((t, docs[:cut].astype(np.int64),
                                np.frombuffer(self._counts[tid], dtype=np.uint16)[:cut].astype(np.float64)))
                del docs
        return total, lengths, out

    def search(self, query: str, k: int, n: int | None = None) -> list[tuple[int, float]]:
        """The k best matches among the first `n` turns (all by default): (turn index,
        bm25), best first, bm25 negative like FTS5's (lower is better); ties go to the
        earlier turn."""
        return self.search_terms(query_terms(query), k, n)

    def search_terms(self, terms: list[str], k: int, n: int | None = None) -> list[tuple[int, float]]:
        """`search` for index terms given directly (`doc_terms` of a turn, say)."""
        if not terms or k < 1:
            return []
        total, lengths, found = self.postings(terms, n)
        postings = [(d, tf) for _t, d, tf in found]
        if not postings:
            return []
        return bm25_top(total, float(lengths.mean()) or 1.0, lengths, postings, k)
