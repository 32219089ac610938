"""Evicting from the middle: when an epoch's room is used up, keep its head and rebuild
only what follows (docs/design.md, "evict from the middle").

A new epoch rebuilds the whole context: a provider's prompt cache then serves only the
caller's system prompt and the stable layers, and everything after them (about half the
budget at the epoch start fill) is billed again in full. Instead, the previous context's
head (the system prompt, the pinned block, the summary and the turns that follow them,
the fewest that reach the configured minimum cacheable prefix, `MIDDLE_MIN_KEPT_TOKENS`
by default) stays byte for byte, a prefix the cache still
holds across the restart; after it come the newest turns (at least the ones that
arrived since, older ones up to `MIDDLE_TAIL_SHARE` of the budget), this call's
retrieved turns
and the latest user message. The turns between the head and the new tail leave the
context (they stay in the log, retrievable). The next restart keeps the same head, so
its cost is only the rebuilt part.

When it applies (`evict`): on a new user message, when the extension ran out of room and
a head long enough to be cacheable ends within `MIDDLE_KEEP_SHARE` of the budget; a recall (NEEDS_ROOM_CLASSES) still
gets a new epoch when the room after the head cannot show `need_share` of its retrieved
turns' tokens. (The bound, evals.bound.best_middle, found keeping 0.5-0.56 of the
budget and rebuilding 0.1 cheapest; tiermem's own replays, with retrieval, bill less
rebuilding 0.05 and restarting at 0.7: see the constants.)

Invariants: every current pin stays shown (when only the leaving turns show one, the
planner puts it in a late-pin block after the head, planner.late_pins, or starts a new
epoch that rebuilds the pinned block); the head is a prefix of the previous context (so everything the previous
call checked of it, pins and summary lines current, holds) and never splits a tool call
from its results or holds the previous latest user message; the result is counted
exactly and stays within the budget; no I/O beyond what the planner already read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tiermem.planner.cache_rules import CACHEABLE_MIN_TOKENS, rendered_length
from tiermem.planner.candidates import Candidate
from tiermem.planner.epoch import Segment
from tiermem.planner.plan import MAX_BREAKPOINTS, Breakpoint
from tiermem.tiers.formats import result_id
from tiermem.tiers.tokens import REPLY_PRIMING_TOKENS, TokenCounter, message_tokens, messages_tokens

# the head kept across the restart: the fewest leading messages that reach this many
# tokens as the provider caches them (rendered: planner.cache_rules.rendered_length, the
# providers' minimum cacheable prefix; a shorter head is never cached, so a new epoch is
# as cheap, and every token past it is read back at every call; the planner passes the
# configured one, pricing.min_prefix_tokens, this by default), and none when that takes
# more than MIDDLE_KEEP_SHARE of the budget (at a small budget the head would crowd out
# the rest). It was 1,040 stored tokens (messages_tokens), about 1,060-1,090 rendered on
# LoCoMo's short turns, 40-60 tokens a call billed in full past OpenAI's 128-token step.
MIDDLE_MIN_KEPT_TOKENS = CACHEABLE_MIN_TOKENS
MIDDLE_KEEP_SHARE = 0.6
# The turns rebuilt after the head besides what arrived since: older ones up to this
# share of the budget (the previous user message when it fits). Every token of it is
# billed in full at each eviction and read back at every call after, and by the cost
# model a smaller rebuilt tail is always cheaper. On the four LoCoMo dev replays
# (evals.decompose), at the 0.8 cap: the rebuilds were 1.5-3.1 points of cached full
# context's bill at 0.1, 0.3-0.7 at 0.05 (tiermem 34.2/39.8/23.4/27.3 ->
# 31.6/37.3/21.9/25.9%); rebuilding only what arrived since, 28.8% mean against 29.2%;
# always keeping the previous user message, however long, 0.5 points more. What is left
# is the recent chat the model reads after the head, so it is not zero.
MIDDLE_TAIL_SHARE = 0.05
# An extension on a new user message that would pass this share of the budget evicts
# instead: a long context is read back at every call (a tenth of its tokens each time),
# and a restart costs only the rebuilt part. The cheaper the rebuild, the sooner it pays
# (a restart every k calls costs rebuild/k + read_ratio x growth x k/2 a call): with the
# 0.05 tail, 0.7 bills least of 0.65/0.7/0.8/0.9 on the four dev replays (mean
# 28.9/28.7/29.2/29.9% under OpenAI's rules; with the 0.1 tail 0.8 was best: 0.7 32.9%).
MIDDLE_CAP_SHARE = 0.7


@dataclass(frozen=True)
class Eviction:
    segments: list[Segment]
    total: int
    reason: str


def _as_planned(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return msgs


class _PrefixTokens:
    """`messages_tokens` of growing prefixes, each message counted once: the leading
    messages equal to the previous prefix's keep their counts (a conversion of one more
    segment rarely changes what came before; where it does, the changed ones are counted
    again). `head_cut` counts every prefix, converted: counted afresh each time, a
    30-message head took 1.5 ms p50 under "responses" (conv-26 at 2,000), 0.8 ms so."""

    def __init__(self, tokens: TokenCounter) -> None:
        self.tokens = tokens
        self.msgs: list[dict[str, Any]] = []
        self.cum = [0]  # cum[i]: tokens of the first i messages, without the reply priming
        self.shown = [0]  # shown[i]: the first i messages as rendered (cache_rules.rendered_length)

    def total(self, msgs: list[dict[str, Any]]) -> int:
        same = 0
        for a, b in zip(self.msgs, msgs, strict=False):
            if a != b:
                break
            same += 1
        del self.cum[same + 1:]
        del self.shown[same + 1:]
        for m in msgs[same:]:
            self.cum.append(self.cum[-1] + message_tokens(self.tokens, m))
            self.shown.append(self.shown[-1] + rendered_length(self.tokens, m))
        self.msgs = msgs
        return self.cum[-1] + REPLY_PRIMING_TOKENS if msgs else 0

    def rendered(self) -> int:
        """The last prefix `total` counted, in rendered tokens (what a provider caches)."""
        return self.shown[-1]


def head_cut(segments: Sequence[Segment], tokens: TokenCounter, budget: int,
             sent: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = _as_planned,
             min_kept: int = MIDDLE_MIN_KEPT_TOKENS) -> int | None:
    """How many leading segments stay: the fewest whose rendered tokens reach
    `min_kept` (the provider's minimum cacheable prefix as configured,
    `pricing.min_prefix_tokens`; MIDDLE_MIN_KEPT_TOKENS by default: a head past it, and no
    longer: every call reads it back; a shorter head the provider never caches, so a
    model with a 2,048-token minimum kept 1,024 for nothing), stopping before the latest user
    message and never inside a tool unit (a result would be cut from its call, a parallel
    call from the round it belongs to); None when no
    such head stays within `MIDDLE_KEEP_SHARE`. The same prefix gives the same head, so
    a later restart keeps what an earlier one kept. Tokens are counted on the head as
    `sent` returns it (render.out: a conversion, a fold), since that is what the provider
    caches: a Responses input message carries no `name`, so a head of 1,040 stored tokens
    of named LoCoMo turns was 963 sent, under the minimum, and never read back."""
    counted = _PrefixTokens(tokens)
    for k in range(1, len(segments) + 1):
        if segments[k - 1].kind == "latest":
            return None
        kept = counted.total(sent([g.message for g in segments[:k]]))
        if kept > MIDDLE_KEEP_SHARE * budget:
            return None
        nxt = segments[k] if k < len(segments) else None
        # never inside a unit: a tool result (of any kind), or a unit's later message (a
        # tail segment without items: a parallel call, the call after its reasoning item)
        inside = nxt is not None and (result_id(nxt.message) is not None or (nxt.kind == "tail" and not nxt.items))
        if counted.rendered() >= min_kept and not inside:
            return k
    return None


def rebuilt_tail(recent: Sequence[Candidate], required: set[int], shown: set[int], budget: int,
                 reason: str, held_back: frozenset[int] = frozenset()) -> list[Segment]:
    """The newest turns after the head, in log order: every unit holding a `required`
    position (what arrived since), then older ones newest first while they fit
    `MIDDLE_TAIL_SHARE` of the budget, stopping before one the head shows or one that
    holds a position of `held_back` (superseded wholly or in part: the tail shows turns
    raw, so an old value would read as current, as planner.pack.Packing.grow_tail does).
    `recent` newest first."""
    room = MIDDLE_TAIL_SHARE * budget
    out: list[Candidate] = []
    used = 0
    for c in recent:
        positions = set(c.group or [c.position])
        if positions & shown:
            break  # the head shows it and everything older: the new tail starts after
        if positions & held_back and not positions & required:
            break
        if positions & required or used + c.tokens <= room:
            out.append(c)
            used += c.tokens
        else:
            break
    segs: list[Segment] = []
    for c in sorted(out, key=lambda c: c.position):
        assert c.body is not None
        c.reason = reason
        for i, body in enumerate(c.body["messages"]):
            segs.append(Segment("tail", body, (c.item(),) if i == 0 else ()))
    return segs


def evict(head: list[Segment], tail: list[Segment], latest: Segment, after: list[Segment], need: list[Candidate],
          fit: Callable[[list[dict[str, Any]], int, list[Candidate]], list[Candidate]],
          block: Callable[[list[Candidate]], Segment], tokens: TokenCounter, budget: int,
          min_need_tokens: float, cached: int | None = None) -> Eviction | None:
    """The evicted context: `head`, the rebuilt `tail`, as many of `need` (this call's
    retrieved turns the head does not show) as `fit` finds room for, `latest` and
    `after`; None when it cannot hold `min_need_tokens` of them or passes the budget.
    `cached`: how many of `head`'s messages the previous context sent as they are (all
    of them when None; a late-pin block placed anew after the kept head is not), which
    the reason names as the cached prefix, counted as planner.plan.CacheReport counts
    its shared prefix (each message's tokens, no reply priming)."""
    fixed = [*head, *tail, latest, *after]
    base = messages_tokens(tokens, [g.message for g in fixed])
    if base > budget:
        return None
    fits = fit([g.message for g in fixed], base, need)
    if sum(c.tokens for c in fits) < min_need_tokens:
        return None
    segs = [*head, *tail, *([block(fits)] if fits else []), latest, *after]
    total = messages_tokens(tokens, [g.message for g in segs])
    if total > budget:
        return None
    same = len(head) if cached is None else cached
    kept = sum(message_tokens(tokens, g.message) for g in head[:same])
    reason = (f"evicts from the middle: the first {same} message(s) ({kept} tokens) stay as the cached "
              f"prefix, {len(tail)} newest message(s) and {len(fits)} retrieved turn(s) follow them")
    return Eviction(segs, total, reason)


def kept_head(evicted: int, prev: Sequence[Segment], prev_head: int, segments: Sequence[Segment]) -> int:
    """The head this context keeps: a middle eviction's own, else the previous context's
    while it is still this one's prefix (an append keeps it; a rewind into it ends it)."""
    if evicted:
        return evicted
    if prev_head and min(len(segments), len(prev)) >= prev_head and all(
            a.message == b.message for a, b in zip(prev[:prev_head], segments[:prev_head], strict=True)):
        return prev_head
    return 0


def with_head(marks: Sequence[Breakpoint], head: int, tokens_each: Sequence[int], layer: str = "head"
              ) -> list[Breakpoint]:
    """`marks` and a breakpoint after the kept head (Anthropic-style caching reads only
    lengths an earlier request marked: the next restart reads the head there), latest
    marks kept first when there are too many; `layer`: what the mark says ends there."""
    if head <= 0 or any(b.index == head - 1 for b in marks):
        return list(marks)
    out = sorted([*marks, Breakpoint(head - 1, layer, sum(tokens_each[:head]))], key=lambda b: b.index)
    return out[-MAX_BREAKPOINTS:]
