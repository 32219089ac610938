"""Late pins: a pin whose turn the context no longer shows, shown without a rebuild (issue 22).

Every current pin the pinned block holds stays in the context: in the epoch's pinned
block, or as a turn the tail shows (pins past the pinned share, `layer_shares.pinned`, are
left out and listed in `plan.left_out`; the top-priority pin always fits). A turn can become a pin after it left the context (the load-bearing label comes a
few turns late, after a middle eviction dropped the turn), and a middle eviction can drop
the only turn that shows a pin made while it sat in the tail. Both used to end the epoch:
the pinned block was rebuilt and everything after it with it (about 1,000 tokens billed
in full at a 2,000-token budget), or the context grew to the budget without evicting
(every call reading back up to twice the minimum cached prefix) until it did.

Instead such pins are shown in a late-pin block, a system message with its own header
(`HEADER`), placed where nothing cached moves:

- within an epoch (an extension), appended after the kept context, before this call's
  retrieved turns and user message: the previous context stays the prefix; in a tool
  loop (the same user message, its replies appended) that user message is already in
  the prefix, so no place before the per-turn part is left: a new epoch's pinned block
  takes the pin instead;
- on a middle eviction (planner.middle), one block of every current pin that neither the
  kept head nor the rebuilt tail shows, right after the head; it counts as part of the
  head (marked for caching with it), and the same pins render the same bytes, so a later
  restart reads it back instead of paying for it again;
- the next new epoch folds them into the pinned block.

Invariants: the late-pin blocks of a context hold at most `LATE_PINS_SHARE` of the budget
(past it, a new epoch folds them into the pinned block, reported as "pin changed"); their
pins are presented as current and checked as the pinned block's are (the epoch's
`pinned` set holds them, so one that stops being current ends the epoch: the prefix
boundary then moves to the pinned block); the budget stays hard (the callers count the
result exactly). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tiermem.planner.candidates import Candidate
from tiermem.planner.epoch import Segment
from tiermem.tiers.tokens import TokenCounter, message_tokens

KIND = "late_pinned"  # the segment kind (planner.plan.LAYERS) of a late-pin block
HEADER = "Also pinned since (standing instructions and facts, current values):"
# The late-pin blocks of one context hold at most this share of the budget (half the
# pinned layer's, planner.build.DEFAULT_LAYER_SHARES): each is read back at every later
# call of the epoch, so past it a new epoch folds them into the pinned block. (Chosen on
# the cost replays from 0.03 / 0.05 / 0.075 / 0.1, three conversations at a time: see the
# README.)
LATE_PINS_SHARE = 0.05
# A late-pin block after the head is read back at every call, a fold is paid once: the
# new epoch that puts the pins in the pinned block (inside the head, which reaches the
# minimum cacheable prefix anyway) bills about one epoch-start context in full. Like
# renting against buying, a middle eviction folds once the late pins read back so far
# (their tokens summed over the epoch's calls, at READ_PRICE_SHARE) reach LATE_FOLD_RATIO
# times that: never more than twice the cheaper of the two. (Chosen on the cost replays,
# see the README.)
READ_PRICE_SHARE = 0.1  # a cached token's price as a share of an input token's (OpenAI, Anthropic)
LATE_FOLD_RATIO = 1.0


def unshown(pins: Sequence[Candidate], conv: str, on_show: Iterable[int]) -> list[Candidate]:
    """This conversation's current pin candidates (the pinned slice's, chosen) of which a
    position is not in `on_show`, in log order (a caller pin superseded since is not
    current: the next epoch's pinned block shows it, marked)."""
    seen = set(on_show)
    return sorted((c for c in pins if c.conversation_id == conv and c.current
                   and any(p not in seen for p in c.group or [c.position])),
                  key=lambda c: c.position)


def block(cands: Sequence[Candidate]) -> dict[str, Any]:
    """The late-pin block: its header, then the pins' lines in log order (the lines the
    pinned block shows them with)."""
    return {"role": "system", "content": "\n".join([HEADER, *(c.text for c in sorted(cands, key=lambda c: c.position))])}


def segment(cands: Sequence[Candidate], why: str) -> Segment:
    """The late-pin block as a segment, its items saying `why` it is there."""
    return Segment(KIND, block(cands), tuple(c.item(f"{c.reason}; {why}") for c in
                                             sorted(cands, key=lambda c: c.position)))


def tokens_in(segments: Sequence[Segment], tokens: TokenCounter) -> int:
    """The tokens of the late-pin blocks among `segments`."""
    return sum(message_tokens(tokens, g.message) for g in segments if g.kind == KIND)


def positions(segments: Sequence[Segment]) -> frozenset[int]:
    """The log positions the late-pin blocks among `segments` show (presented as current)."""
    return frozenset(p for g in segments if g.kind == KIND for it in g.items for p in it.positions)


def fits(segments: Sequence[Segment], tokens: TokenCounter, budget: int) -> bool:
    """Whether the late-pin blocks among `segments` stay within their share of the budget."""
    return tokens_in(segments, tokens) <= LATE_PINS_SHARE * budget


def fold_due(paid: int, rebuild_tokens: int) -> bool:
    """Whether late pins whose blocks were sent `paid` tokens in all (over the epoch's
    calls) have cost, read back, what a fold into the pinned block costs once (a rebuilt
    context of `rebuild_tokens`)."""
    return paid * READ_PRICE_SHARE >= LATE_FOLD_RATIO * rebuild_tokens
