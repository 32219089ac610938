"""Prompt-caching rules of the providers tiermem is billed by, in one place: the cost
replay (`tiermem.evals.cost`, which bills whole conversations with them) and the planner
(`Plan.cache`'s `openai_cached_tokens` and `anthropic_cached_tokens`: what each provider
is expected to serve from its cache for this call's request against the previous call's)
import them from here; neither keeps a copy.

Requests are counted on the rendered token sequence, not on whole messages (`Renderer`:
per message a start marker, the role, a separator, the text's real tokenizer ids, an end
marker; then the assistant header the provider appends):

- OpenAI (automatic caching): the cached part is the longest common token prefix with an
  earlier request still cached, counted only from `min_prefix` (1,024) tokens and then in
  `granularity` (128) token steps; the last token is always computed (`openai_cached`);
- Anthropic (explicit `cache_control` breakpoints, at most 4): a request reads the
  longest prefix an earlier request wrote at one of its breakpoints, when that point is
  at most `lookback_blocks` (20) messages before one of this request's breakpoints;
  a prefix shorter than `min_prefix` is neither written nor read (`anthropic_marks`,
  `anthropic_readable`).

A cached prefix lives `ttl_s` after the last request that read or wrote it (`alive`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from tiermem.tiers.models import message_text

ANTHROPIC_TTL_S = 300.0  # the 5-minute cache (a 1-hour one costs 2x to write: pass ttl_s and write_ratio)
OPENAI_TTL_S = 3600.0  # 5-10 minutes idle, up to an hour off-peak: the upper end, kindest to full context
# Chat-format markers: ids outside every vocabulary, so they only match each other.
START, SEP, END, NAME = -1, -2, -3, -4


class CacheRules(BaseModel):
    """One provider's prompt-caching rules and prices."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    provider: Literal["openai", "anthropic"]
    input_per_mtok: float = Field(ge=0, description="USD per million uncached input tokens")
    read_ratio: float = Field(0.1, ge=0, le=1, description="cached read price / input price")
    write_ratio: float = Field(1.0, ge=1, description="cache write price / input price (Anthropic: 1.25)")
    min_prefix: int = Field(1024, ge=0, description="shortest cacheable prefix, tokens")
    granularity: int = Field(1, ge=1, description="cached tokens count in steps of this many past min_prefix")
    max_breakpoints: int = Field(4, ge=1, description="cache_control markers per request (Anthropic)")
    lookback_blocks: int = Field(20, ge=1, description="messages before a breakpoint a hit is looked for")
    ttl_s: float | None = Field(ANTHROPIC_TTL_S, gt=0, description=(
        "seconds a cached prefix lives after the last request that read or wrote it; None: never expires"))


PROVIDERS: dict[str, CacheRules] = {
    # GPT-5-class pricing: cached input at a tenth; caching from 1,024 tokens in 128-token steps
    "openai": CacheRules(provider="openai", input_per_mtok=1.25, read_ratio=0.1, min_prefix=1024, granularity=128,
                         ttl_s=OPENAI_TTL_S),
    # Claude Sonnet-class: reads at 0.1x, 5-minute writes at 1.25x, 1,024-token minimum
    # (Haiku: 2,048; some newer models 4,096: pass min_prefix)
    "anthropic": CacheRules(provider="anthropic", input_per_mtok=3.0, read_ratio=0.1, write_ratio=1.25,
                            min_prefix=1024, granularity=1, max_breakpoints=4, ttl_s=ANTHROPIC_TTL_S),
}

# The shortest prefix every provider above caches (rendered tokens): a context shorter
# than this is billed in full at its next call, one at least this long is read back.
CACHEABLE_MIN_TOKENS = max(r.min_prefix for r in PROVIDERS.values())


def alive(rules: CacheRules, touched: float | None, at: float | None) -> bool:
    """Whether a prefix last read or written at `touched` is still cached at `at` (no
    time on either side, or no TTL: it is)."""
    return rules.ttl_s is None or touched is None or at is None or at - touched <= rules.ttl_s


def canonical(message: dict[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, separators=(",", ":"))



def common_prefix_ids(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two token id arrays."""
    n = min(a.shape[0], b.shape[0])
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.shape[0] else n


def rendered(counter: Any, m: dict[str, Any]) -> np.ndarray:
    """One message's ids as a provider sees them: a start marker, the role (and name), a
    separator, the text's tokenizer ids, an end marker."""
    ids = [START, *counter.encode(str(m.get("role") or ""))]
    if m.get("name"):
        ids += [NAME, *counter.encode(str(m["name"]))]
    ids += [SEP, *counter.encode(message_text(m)), END]
    return np.array(ids, dtype=np.int64)


def rendered_length(counter: Any, m: dict[str, Any]) -> int:
    """`len(rendered(counter, m))` from token counts (which a counter may remember), no ids made."""
    n = 3 + counter.count(str(m.get("role") or "")) + counter.count(message_text(m))
    return n + 1 + counter.count(str(m["name"])) if m.get("name") else n


def priming(counter: Any) -> np.ndarray:
    """The assistant header a provider appends after the messages."""
    return np.array([START, *counter.encode("assistant"), SEP], dtype=np.int64)


def request_lcp(counter: Any, prev: Sequence[dict[str, Any]], cur: Sequence[dict[str, Any]]) -> int:
    """The longest common token prefix of two requests (`Renderer.render`'s ids, the
    priming included), as `common_prefix_ids` of both renderings counts it, rendering only
    the first messages that differ (the leading equal ones are counted, not rendered)."""
    n = 0
    for i in range(max(len(prev), len(cur)) + 1):
        a = prev[i] if i < len(prev) else None
        b = cur[i] if i < len(cur) else None
        if a is not None and b is not None and a == b:
            n += rendered_length(counter, a)
            continue
        ra = rendered(counter, a) if a is not None else priming(counter)
        rb = rendered(counter, b) if b is not None else priming(counter)
        k = common_prefix_ids(ra, rb)
        n += k
        if k < min(ra.shape[0], rb.shape[0]) or ra.shape[0] != rb.shape[0] or a is None or b is None:
            return n
    return n


class Renderer:
    """Messages to the token ids a provider sees, message by message (remembered: a
    replay renders the same messages again and again)."""

    def __init__(self, counter: Any) -> None:
        self.counter = counter
        self._memo: dict[str, np.ndarray] = {}
        self.priming = priming(counter)

    def message(self, m: dict[str, Any]) -> np.ndarray:
        key = canonical(m)
        got = self._memo.get(key)
        if got is None:
            got = self._memo[key] = rendered(self.counter, m)
        return got

    def render(self, messages: Sequence[dict[str, Any]]) -> tuple[np.ndarray, list[int]]:
        """The whole request's ids, and the offset where each message ends."""
        parts = [self.message(m) for m in messages]
        ends = np.cumsum([p.shape[0] for p in parts]).tolist() if parts else []
        return np.concatenate([*parts, self.priming]), [int(e) for e in ends]


def openai_cached(rules: CacheRules, lcp: int, tokens: int) -> int:
    """The tokens an automatic (OpenAI-style) cache serves of a request of `tokens`
    tokens whose longest prefix shared with a cached request is `lcp` tokens: none under
    `min_prefix`, then in `granularity` steps; the last token is always computed."""
    lcp = min(lcp, tokens - 1)
    if lcp < rules.min_prefix:
        return 0
    return rules.min_prefix + ((lcp - rules.min_prefix) // rules.granularity) * rules.granularity


def anthropic_marks(rules: CacheRules, ends: Sequence[int], breakpoints: Sequence[int]) -> list[int]:
    """Where a request with breakpoints after the messages `breakpoints` (indexes; `ends`:
    where each message ends, tokens) writes: the last `max_breakpoints` of those ends,
    each at least `min_prefix` long, ascending."""
    marks = sorted({ends[i] for i in breakpoints if 0 <= i < len(ends)})[-rules.max_breakpoints:]
    return [m for m in marks if m >= rules.min_prefix]


def anthropic_readable(rules: CacheRules, length: int, lcp: int, ends: Sequence[int], marks: Sequence[int]) -> bool:
    """Whether a request (its messages ending at `ends`, its breakpoints at `marks`) can
    read a prefix of `length` tokens that an earlier request wrote and shares `lcp`
    tokens with: it is within the shared prefix, and at most `lookback_blocks` messages
    before one of this request's breakpoints (expiry is `alive`'s)."""
    return length <= lcp and any(length <= m and sum(1 for e in ends if length < e <= m) <= rules.lookback_blocks
                                 for m in marks)
