"""Where a cost replay's bill goes: tiermem's billed tokens split by cause (issue 22).

The replay (`evals.cost`) bills each request on its rendered token ids. This module
takes the same ids and the same provider caches and splits every request's bill, token
by token, into causes, so that the parts sum exactly to the method's bill under each
provider's rules:

- ``cached_reads``: the prefix a cache served, at `read_ratio` (the price of keeping a
  context at all);
- ``short_prefix``: tokens shared with a recent request but billed in full because the
  shared prefix is shorter than the provider's minimum (1,024 tokens: the start of a
  conversation, before any policy has that much to cache);
- ``step_loss``: tokens shared with a recent request, past the minimum, billed in full
  anyway: OpenAI's 128-token steps; under Anthropic's rules, a shared prefix that no
  earlier breakpoint wrote (or past the look-back);
- ``expired``: tokens a cache would have served had every build been inside its TTL, but
  that expired first (`CacheRules.ttl_s`: the build came too long after the last request
  that read or wrote them, e.g. a LoCoMo session days after the previous one);
- every other uncached token by what it is and why it was sent again:
  ``new_messages`` (log messages that arrived since the previous build, and the
  assistant header the provider appends: no policy avoids them, evals.floor), and for
  the rest by this call's cache event: ``retrieved_appended`` (a retrieved block sent
  after a kept prefix: an extension or a middle eviction), ``middle_eviction`` (the
  turns rebuilt after the kept head), ``rewind`` (what an extension sends again after
  earlier retrieved blocks gave way), ``new_epoch`` (a full rebuild for room or any other
  reason), ``pin_change`` and ``view_refresh`` (full rebuilds for those reasons;
  ``pin_change`` also holds the late-pin blocks sent instead, planner.late_pins);
  ``first`` for the very first request;
- ``cache_writes`` (Anthropic): the write premium (`write_ratio - 1`) on the tokens
  written; their base price stays with their cause.

Per cause the retrieved tokens in it are counted too (``retrieved_in``), so a rebuild's
own retrieval shows; ``reads_beyond_min`` says how much of ``cached_reads`` is for
cached prefixes past the minimum (what a smaller context could save: a cached request
reads at least `min_prefix` tokens).

Invariants: pure arithmetic on the replay's ids; the same caches (`OpenAICache`,
`AnthropicCache`) bill them, so each provider's parts sum to its bill (a test asserts it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tiermem.evals.cost import (
    PROVIDERS,
    RECENT_REQUESTS,
    Renderer,
    canonical,
    common_prefix_ids,
    epoch_category,
)
from tiermem.planner import late_pins
from tiermem.planner.render import HEADERS
from tiermem.tiers.models import message_text

CAUSES = ("new_messages", "retrieved_appended", "short_prefix", "step_loss", "expired", "new_epoch", "middle_eviction",
          "pin_change", "view_refresh", "rewind", "first", "cached_reads", "cache_writes")
STABLE_HEADERS = (HEADERS["pinned"], HEADERS["summary"])
# a new epoch's reason (evals.cost.epoch_category) -> its cause
EPOCH_CAUSES = {"pin changed": "pin_change", "summary view refreshed": "view_refresh"}
MIDDLE_REASON = "evicts from the middle"
REWIND_REASON = "rewinds to message"


def event_of(first: bool, new_epoch: bool | None, reason: str) -> str:
    """The cause of a request's re-sent tokens, from its plan's cache report."""
    if first:
        return "first"
    if new_epoch:
        return EPOCH_CAUSES.get(epoch_category(reason), "new_epoch")
    if reason.startswith(MIDDLE_REASON):
        return "middle_eviction"
    if reason.startswith(REWIND_REASON):
        return "rewind"
    return "extension"


def message_kind(m: dict[str, Any], new: set[str]) -> str:
    """"new" (a log message since the previous build), "retrieved", "stable" (the pinned
    or summary block), "late_pin" (a late-pin block, planner.late_pins) or "old" (a turn
    sent before)."""
    if canonical(m) in new:
        return "new"
    if m.get("role") == "system":
        text = message_text(m)
        if text.startswith(late_pins.HEADER):
            return "late_pin"
        return "stable" if text.startswith(STABLE_HEADERS) else "retrieved"
    return "old"


@dataclass
class Decomposition:
    """Billed tokens per cause and provider over one replay."""

    renderer: Renderer
    parts: dict[str, dict[str, float]] = field(
        default_factory=lambda: {p: dict.fromkeys(CAUSES, 0.0) for p in PROVIDERS})
    retrieved_in: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0))
    reads_beyond_min: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PROVIDERS, 0.0))
    events: dict[str, int] = field(default_factory=dict)
    # OpenAI-billed tokens of retrieved blocks by the query class's rule that asked for them
    retrieved_by: dict[str, float] = field(default_factory=dict)
    _recent: list[np.ndarray] = field(default_factory=list)

    def add(self, messages: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]], *, cached_openai: int,
            read_anthropic: int, written_anthropic: int, new_epoch: bool | None, reason: str,
            asked_by: str = "", expired_openai: int = 0, expired_anthropic: int = 0) -> dict[str, dict[str, float]]:
        """One request: its messages, the log messages that arrived since the previous
        build, what each provider's cache served and wrote (evals.cost.MethodSeries), and
        its plan's cache report; `asked_by`: what asked for its retrieval (the query
        class and its rule), to count its retrieved tokens under. Returns this request's
        own parts per provider (the causes it billed), for the replay's trace.
        `expired_*`: the tokens each cache would have served inside the TTL beyond what
        it served (evals.cost.MethodSeries' other assumption)."""
        ids, ends = self.renderer.render(messages)
        n = int(ids.shape[0])
        first = not self._recent
        lcp = max((common_prefix_ids(ids, prev) for prev in self._recent), default=0)
        lcp = min(lcp, n - 1) if n else 0  # as OpenAICache: the last token is always computed
        self._recent.append(ids)
        del self._recent[:-RECENT_REQUESTS]
        event = event_of(first, new_epoch, reason)
        self.events[event] = self.events.get(event, 0) + 1
        fresh = {canonical(m) for m in new}
        kinds = [message_kind(m, fresh) for m in messages]
        starts = [0, *ends[:-1]] if ends else []
        mine: dict[str, dict[str, float]] = {}
        for p, read, extra, expired in (("openai", cached_openai, 0.0, expired_openai),
                                        ("anthropic", read_anthropic,
                                         (PROVIDERS["anthropic"].write_ratio - 1.0) * written_anthropic,
                                         expired_anthropic)):
            rules = PROVIDERS[p]
            out = mine[p] = dict.fromkeys(CAUSES, 0.0)
            out["cached_reads"] += read * rules.read_ratio
            if read:
                self.reads_beyond_min[p] += max(0, read - rules.min_prefix) * rules.read_ratio
            shared = max(lcp, read)
            gone = min(max(0, expired), shared - read)  # shared, and cached had the TTL not passed
            out["expired"] += gone
            out["short_prefix" if not read and shared < rules.min_prefix else "step_loss"] += shared - read - gone
            out["cache_writes"] += extra
            for kind, a, b in [*zip(kinds, starts, ends, strict=True), ("new", ends[-1] if ends else 0, n)]:
                got = max(0, b - max(a, shared))
                if not got:
                    continue
                cause = self._cause(kind, event)
                out[cause] += got
                if p == "openai" and kind == "retrieved":
                    self.retrieved_in[cause] += got
                    self.retrieved_by[asked_by] = self.retrieved_by.get(asked_by, 0) + got
            for k, v in out.items():
                self.parts[p][k] += v
        return {p: {k: round(v, 1) for k, v in parts.items() if v} for p, parts in mine.items()}

    @staticmethod
    def _cause(kind: str, event: str) -> str:
        if kind == "new" or event == "first":
            return "new_messages" if kind == "new" else "first"
        if kind == "late_pin" and event in ("extension", "middle_eviction"):
            return "pin_change"  # a pin shown late instead of a rebuild: what the pin change cost
        if event in ("extension", "middle_eviction") and kind == "retrieved":
            return "retrieved_appended"
        if event == "extension":
            return "rewind"  # an extension re-sends nothing old unless earlier blocks gave way
        return event

    def summary(self, full: dict[str, float] | None = None) -> dict[str, Any]:
        """Per provider: billed tokens per cause and their sum; with `full` (cached full
        context's bill per provider), each cause as a share of it, in points."""
        out: dict[str, Any] = {"events": dict(sorted(self.events.items())),
                               "retrieved_tokens_in": {k: v for k, v in self.retrieved_in.items() if v},
                               "retrieved_tokens_by": dict(sorted(self.retrieved_by.items(), key=lambda kv: -kv[1]))}
        for p, parts in self.parts.items():
            out[p] = {k: round(v, 1) for k, v in parts.items()}
            out[f"{p}_total"] = round(sum(parts.values()), 1)
            out[f"{p}_reads_beyond_min"] = round(self.reads_beyond_min[p], 1)
            if full and full.get(p):
                out[f"{p}_points_vs_full"] = {k: round(100 * v / full[p], 2) for k, v in parts.items()}
        return out
