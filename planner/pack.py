"""Packing one context's candidates under its room: each slice up to its cap, in an order
that keeps the stable layers stable, then the leftovers to the per-turn part.

Invariants:
- Packing estimates (each line's tokens, a share of a session heading); the rendered
  result is counted exactly afterwards (planner.build), and `drop_one` removes the
  lowest-value item until it fits; `top_up` spends what the exact count left over.
- The stable layers (pinned, summary, tail) are sized by the budget alone; leftovers go
  to the retrieved slice only, so the stable layers' bytes do not depend on the query.
  One exception, for a context planned anew (one that starts an epoch; with epochs off or
  under `retrieved_placement="before_tail"` every call; under
  `system_messages="before_latest"` one with no previous tail start to keep): room that
  the retrieved slice left unused grows the tail backwards (`grow_tail`) up to the
  caller's fill target, so the context is long enough to be cached from its next call on.
- The current tool loop (the tail units after the latest user message, a pending round
  included, when one of them calls a tool or answers one; a plain last reply is no loop)
  is kept like the latest user message (`take_loop`): newest first, up to the
  room the pinned block left, past the tail's share. It counts against that share where
  it fits in it (the tail is then chosen as it always was); the older tail gives way to
  it, and an older round of the loop that does not fit whole ends it (contiguous, as the
  tail; the newest of them named in `plan.left_out`). The latest round (the newest tool-call message, its
  results, anything after them; or the round whose results the latest user message came
  with, no reply between: `loop_after`) is always shown (`fit_round`): where it does not fit whole
  the pins and the whole older tail, older rounds of the loop included, give way, then its
  tool outputs are trimmed to the largest allowance, one for all, at which it fits;
  `drop_one` never drops it (older rounds, oldest first, it does), so a latest round that
  fits not even at ROUND_MIN_RESULT_TOKENS an output is BudgetTooSmall. A long agent loop
  at a fixed budget so runs on with its recent rounds. A round the question came after
  (`loop_after != latest_user`: not the model's pending loop, maybe a run that ended
  before its reply was stored) is the exception: the pins never give way to it (only the
  older tail), it keeps room beside itself for an opening user message (`opening`:
  Anthropic's form adds one before a context that starts with the assistant), one too
  large for the room the pins leave is left out (`leave_unanswered`), and `drop_one`
  drops it before any pin or tail turn, packing again without it (`refill`).
- The tail is contiguous (an older turn never jumps a gap) and starts on a grid
  (`stable_tail`), so consecutive contexts share it as a byte-identical prefix. One
  exception: on the default layout the part `grow_tail` adds passes over a unit that
  holds a pin of the pinned block (that block shows it, earlier in the context), so the
  grown tail may have a gap there, and only there (the pin's unit: its turn, or the
  tool round holding it, passed over whole).
- A turn is shown verbatim once: a pin the tail shows, or a retrieved turn the tail or
  the pinned block shows, is withdrawn from its other slice, and its tokens go back; a
  pin the pinned block shows is not grown into the tail (`grow_tail`).
- At least the highest-priority pin fits (a constraint left out is an answer gone wrong),
  unless the model's pending tool round needs the room (`fit_round`: without its results
  the model calls its tools again, each call paid); a round the question came after never
  takes a pin's room.
- A retrieved turn may be shown as a query-focused excerpt (planner.excerpt; off by
  default): LEFTOVER only in the room the whole lines left (`take_excerpts`, then
  `top_up`'s second pass), so no turn that fits whole gives way to an excerpt; INLINE in
  rank order as `take` meets a turn that does not fit (lower-ranked whole lines may then
  not fit); with EXCERPT_LONG_TOKENS a long line is offered as its excerpt in the first
  pass. A turn is shown once, whole or as excerpt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tiermem.planner import excerpt
from tiermem.planner.candidates import PLAN_LEFT_OUT_PER_SLICE, Candidate
from tiermem.planner.plan import SLICES, Plan, PlanItem
from tiermem.planner.render import HEADING_SHARE_TOKENS, LINE_SEP_TOKENS
from tiermem.tiers.formats import call_ids, result_id
from tiermem.tiers.tokens import TokenCounter
from tiermem.tiers.turncache import TurnTable

if TYPE_CHECKING:
    from tiermem.tiers.models import TurnRow

PACKED_SLICES = tuple(s for s in SLICES if s != "system")  # the system prompt is fixed, not packed
# The tail's start moves on a grid of its nominal share divided by this (half a share),
# so it stays put for several turns and then jumps by about half a share.
TAIL_GRID_PARTS = 2
# before_latest: the kept tail may grow to this many times its share before it is
# re-anchored (the memory message gets what it leaves; its turns stay a cached prefix)
TAIL_GROWTH = 3
# before_latest: a tail anchored anew grows into free room (`grow_tail`) only up to this
# many shares, so one share of appends still fits TAIL_GROWTH before it is re-anchored
# (grown to TAIL_GROWTH, the next call's first append would move its start at once)
KEPT_FILL_SHARES = TAIL_GROWTH - 1
DROPPED = "dropped to meet the exact budget"
# A tool output of the latest round is trimmed no further than this many tokens (its head
# and tail, planner.render's marker between them naming where the whole text is): a round
# that does not fit with its outputs trimmed this far is the budget's error (BudgetTooSmall)
ROUND_MIN_RESULT_TOKENS = 16
ROUND_TRIMMED = ("the latest tool round: its outputs trimmed to {limit} tokens each (the room it had, "
                 "shared among them) so that the model is shown the results of the calls it made")
# A round the latest user message came after, no reply between (`loop_after`), that does
# not fit even at ROUND_MIN_RESULT_TOKENS an output: left out, the question sent as before.
# Not the model's own pending loop: an agent's run that ended before its reply was stored
# (a crash, a turn limit, a stop) leaves the same rows, and the user's next, unrelated
# question must not be refused for a round of a run that is over
ROUND_UNANSWERED = ("the tool round before the latest user message, which no reply answered (results sent "
                    "with the question, or a run that ended before its reply was stored)")
ROUND_UNANSWERED_LEFT_OUT = (f"{ROUND_UNANSWERED}: it does not fit the room even with its outputs trimmed to "
                             f"{ROUND_MIN_RESULT_TOKENS} tokens each, so the question is sent without it")
# The same round dropped by the exact count (`drop_one`): the context is packed again as
# if it had been left out from the start, so what gave way to it comes back
ROUND_UNANSWERED_DROPPED = (f"{DROPPED}: {ROUND_UNANSWERED}; the context was packed again without it, "
                            "so the question is sent without it")
GAVE_WAY = ("gave way to the latest tool round (the model's latest tool calls and their results, "
            "which it must be shown or it calls the tools again)")
# A round trims its outputs to the largest allowance that fits, found by bisection: each try
# re-renders the round's outputs, so this bounds the work on a round of many outputs
ROUND_TRIM_TRIES = 12


class Packing:
    """One call's packing: each slice's chosen candidates, what is left of its pool (best
    first; the tail newest first), the tokens each slice uses and the room left."""

    def __init__(self, conv: str, pools: dict[str, list[Candidate]], header: dict[str, int], room: int,
                 tokens: TokenCounter) -> None:
        self.conv = conv
        self.pools = pools
        self.header = header  # what a slice's first line costs on top of itself (its block header)
        self.tokens = tokens
        self.chosen: dict[str, list[Candidate]] = {s: [] for s in PACKED_SLICES}
        self.used = {s: 0 for s in PACKED_SLICES}
        self.remaining = room
        self.room = room  # the room for the slices, as the call began (excerpt.INLINE_MAX_ROOM_TOKENS)
        # what may be presented as current right now (an epoch's pinned block and summary
        # lines are checked against these before it is extended)
        self.pin_current = {c.position for c in pools["pinned"] if c.current}
        self.summary_current = {c.text for c in pools["summary"]}
        # before_latest: how many tail units the previous call's tail start kept (None: not
        # kept, or none to keep), and why it was not kept ("" when it was, or there was
        # none): the plan's cache report says which
        self.kept_units: int | None = None
        self.kept_miss = ""
        # the latest user message's position (fill's `latest_user`)
        self.latest_user: int | None = None
        # the tail units after this position are the current loop (`loop_after`: after the
        # latest user message, or from the round whose results it came with); its latest
        # round (`round_units`) drop_one never drops
        self.loop_after: int | None = None
        # the allowance fit_round trimmed the latest round's outputs to (None: shown as trimmed usually)
        self.round_trim: int | None = None
        # the pins and older tail units fit_round released for the latest round (their left_out reason)
        self.gave_way: set[tuple[str, int]] = set()
        # the units of a round the question came after (`loop_after`) left out as too large
        # even at the least trim (their left_out reason, ROUND_UNANSWERED_LEFT_OUT)
        self.unanswered_left_out: set[tuple[str, int]] = set()
        # the same, dropped by the exact count (`drop_one`, ROUND_UNANSWERED_DROPPED): a
        # packing again (`refill`) treats the round as an older tail unit from the start
        self.unanswered_dropped: set[tuple[str, int]] = set()
        # what `fill` began with (its arguments, the pools, plan.left_out's length): `refill`
        self._start: tuple[Any, ...] | None = None
        self._filled: set[int] = set()
        # what an opening user message costs (adapters.anthropic `opening_tokens`): a round
        # the question came after keeps room for it beside itself, as it may open the context
        self.opening = 0

    def fill(self, caps: dict[str, int], plan: Plan, tail_rows: list[TurnRow], table: TurnTable,
             tail_anchor: int, fill_to: int = 0, *, kept_from: int | None = None,
             held_back: frozenset[int] = frozenset(), leftovers: bool = True,
             latest_user: int | None = None, memory_last: bool = False,
             tail_first: Callable[[Candidate], int] | None = None,
             retrim: Callable[[Candidate, int], Candidate] | None = None) -> None:
        """Each slice up to its cap, then the leftovers to the per-turn part; then, when
        the slices use less than `fill_to` tokens of the room, older tail turns up to it
        (`grow_tail`). `memory_last` (system_messages="before_latest"): `kept_from` is the
        previous call's tail start, kept while the tail from there still fits TAIL_GROWTH
        times its share; a tail anchored anew grows to at most KEPT_FILL_SHARES shares, and
        a pin it grows over leaves the memory message's pinned block. `latest_user`: the latest
        user message's position; the tail units after it (the current tool loop) are kept
        up to the room left (`take_loop`), not only the tail's share. `leftovers=False` (a
        narrow retrieval): the retrieved slice keeps to its cap. `tail_first` (a recall in
        a session resumed after the cache expired, planner.build): the tail grows before
        the retrieved slice takes its room, until the layers before it reach `fill_to`
        on their own, measured by `tail_first` (a unit's tokens as the provider caches
        them), the unit that crosses it included. `retrim`: a tail unit anew, its tool outputs
        trimmed to a given number of tokens (`take_loop`'s latest round)."""
        if self._start is None:
            self._start = ({s: list(v) for s, v in self.pools.items()}, dict(caps), len(plan.left_out),
                           self.remaining, (plan, tail_rows, table, tail_anchor, fill_to),
                           dict(kept_from=kept_from, held_back=held_back, leftovers=leftovers,
                                latest_user=latest_user, memory_last=memory_last, tail_first=tail_first,
                                retrim=retrim))
        self.latest_user = latest_user
        self.loop_after = (latest_user if self.unanswered_dropped
                           else loop_after(self.pools["tail"], latest_user))
        if self.pools["pinned"]:
            # at least the highest-priority pin fits (a constraint left out is an answer
            # gone wrong): still a function of the pins and the budget, not of the class
            caps["pinned"] = max(caps["pinned"], self.pools["pinned"][0].tokens + self.header["pinned"])
            plan.shares["pinned"] = caps["pinned"]
        self.take("pinned", caps["pinned"])
        # cap and grid from the budget, not from what is left after this turn's latest
        # message: both must not move from one turn to the next
        kept = None
        if kept_from is not None:
            kept, self.kept_miss = kept_tail(self.pools["tail"], kept_from,
                                             min(self.remaining - caps["summary"], TAIL_GROWTH * caps["tail"]),
                                             latest_user)
            self.kept_units = None if kept is None else len(kept)
        self.chosen["tail"] = kept or stable_tail(self.pools["tail"], tail_rows, min(caps["tail"], self.remaining),
                                                  max(1, caps["tail"] // TAIL_GRID_PARTS), table, tail_anchor)
        self.used["tail"] = sum(c.tokens for c in self.chosen["tail"])
        self.remaining -= self.used["tail"]
        self.take_loop(self.loop_after, retrim)
        # a pinned turn that the tail shows verbatim is not repeated in the pinned block
        self.withdraw("pinned", {p for c in self.chosen["tail"] for p in c.group})
        self.take("pinned", caps["pinned"])  # the room a pin in the tail freed goes to the next pin
        self.take("summary", caps["summary"])
        if tail_first is not None:
            have = sum(tail_first(c) for s in ("pinned", "summary", "tail") for c in self.chosen[s])
            self.grow_tail(fill_to - have, held_back, size=tail_first)
        self.withdraw("retrieved", self.shown_verbatim())
        self.take("retrieved", caps["retrieved"])
        # leftovers go to the per-turn part only: the stable layers keep their sizes, so
        # their bytes do not depend on what this query retrieved. (Non-recall classes only
        # retrieve what is clearly related, so most of their room stays free: it is what
        # an epoch grows into.)
        if leftovers:  # a narrow retrieval keeps to its cap: the room is what the epoch grows into
            self.take("retrieved", self.used["retrieved"] + self.remaining)
            self.take_excerpts("retrieved", self.used["retrieved"] + self.remaining)
        extra = min(self.remaining, fill_to - sum(self.used.values()))
        if memory_last:
            extra = min(extra, KEPT_FILL_SHARES * caps["tail"] - self.used["tail"])
        # the default layout keeps its pins in the pinned block: that block leads the
        # context and outlives the grown turns (a middle eviction keeps the head and drops
        # them), so the grown tail passes over them instead
        self.grow_tail(extra, held_back, pins_once=memory_last)
        self._filled = {id(c) for c in self.chosen["retrieved"]}  # refill: what came after is a mark

    def take_loop(self, latest_user: int | None,
                  retrim: Callable[[Candidate, int], Candidate] | None = None) -> None:
        """The tail units after `latest_user` that the tail as chosen left out (it stops
        at its share: a tool round larger than the share left the tail empty, and the
        model called the tool again for a result it was never shown), newest first up to
        the room left, until an older round does not fit whole (it and the rounds before
        it are left out: a long loop runs on with its recent rounds). Where the latest
        round (`_round_start`) does not fit whole, `fit_round` (given `retrim`) shows it,
        its tool outputs trimmed further. With no latest user message, or when nothing
        after it calls a tool or answers one (a plain reply: a conversation, not an
        agent's loop), there is no current loop: the tail is as chosen."""
        if latest_user is None:
            return
        pool = self.pools["tail"]  # the units older than the tail, newest first
        start = _round_start([c for c in (*self.chosen["tail"], *pool) if c.position > latest_user])
        if start is None:
            return
        while pool and pool[0].position > latest_user and pool[0].tokens <= self.remaining:
            c = pool.pop(0)
            self.chosen["tail"].append(c)
            self.used["tail"] += c.tokens
            self.remaining -= c.tokens
        if pool and pool[0].position >= start and retrim is not None:  # a unit of the latest round left
            self.fit_round(start, retrim)

    def fit_round(self, start: int, retrim: Callable[[Candidate, int], Candidate]) -> None:
        """The latest round (the tail units from `start`, its tool-call message, on) does
        not fit whole: shown all the same, the older tail given way first, then its tool
        outputs trimmed further (`retrim`), to the largest allowance, the same for each
        output (a shorter one stays whole), at which the round fits the room the system
        prompt and the latest user message leave. Sent the question without it, the
        model would call the same tools again, paying for each call, until the agent's
        recursion limit. The round outranks the pinned block and every older turn, the
        older rounds of the loop included: they give way (the pins are taken again by
        `fill` in what the round leaves; the older rounds stay out, as a round that does
        not fit ends the loop in `take_loop`). Where not even ROUND_MIN_RESULT_TOKENS an
        output fits, the round is taken so all the same: the exact count then finds
        nothing to drop (`drop_one` never drops it) and the call fails with
        BudgetTooSmall naming the tokens needed, never the question alone. A round the
        question came after (`loop_after`) outranks only the older tail: the pins stay,
        the room beside them less `opening`, and one too large for it is left out."""
        pool, chosen = self.pools["tail"], self.chosen
        # the round (newest first), and the pins and older turns that give way to it
        round_ = [c for c in chosen["tail"] if c.position >= start] + [c for c in pool if c.position >= start]
        # a round the question came after, no reply between, is not the model's pending
        # loop (an agent's run that ended before its reply was stored leaves the same
        # rows): the pins never give way to it, only the older tail does
        unanswered = self.loop_after != self.latest_user
        if unanswered and (sum(retrim(c, ROUND_MIN_RESULT_TOKENS).tokens for c in round_)
                           > self.remaining + self.used["tail"]):
            # too large for the room the pins leave even at the least trim (a big call's
            # arguments, which are never trimmed, or many calls): it never refuses the
            # question, nor displaces a pin: left out, nothing given way to it
            self.leave_unanswered(round_)
            return
        older = [c for c in chosen["tail"] if c.position < start]
        self.pools["tail"] = sorted(older + [c for c in pool if c.position < start], key=lambda c: -c.position)
        released = older if unanswered else chosen["pinned"] + older
        self.gave_way = {(c.conversation_id, c.position) for c in released}
        self.remaining += self.used["tail"]
        chosen["tail"], self.used["tail"] = [], 0
        if not unanswered:
            self.pools["pinned"] = chosen["pinned"] + self.pools["pinned"]
            self.remaining += self.used["pinned"]
            chosen["pinned"], self.used["pinned"] = [], 0

        def at(limit: int) -> list[Candidate]:
            return [retrim(c, limit) for c in round_]

        # `retrim` caps an allowance at the usual trim, so no output grows past it
        lo, hi = ROUND_MIN_RESULT_TOKENS, max(ROUND_MIN_RESULT_TOKENS + 1, max(c.tokens for c in round_) + 1)
        # the highest-priority pin keeps its room beside the round (fill's rule: at least
        # that pin fits; a system prompt or a standing constraint lost for a whole agent
        # loop is an answer gone wrong), the outputs trimmed further for it; it gives way
        # only where the round does not fit beside it even at ROUND_MIN_RESULT_TOKENS an output
        top = self.pools["pinned"][0] if self.pools["pinned"] and not unanswered else None
        beside = top.tokens + self.header["pinned"] if top is not None else 0
        room = self.remaining - beside - (self.opening if unanswered else 0)
        best = round_  # as usually trimmed: with the pins and older turns gone it may fit
        if sum(c.tokens for c in best) > room:
            floor = at(lo)
            if sum(c.tokens for c in floor) > room:
                room = self.remaining  # not even the floor fits beside the pin: the pin gives way
            if sum(c.tokens for c in round_) > room:
                best = floor
            if best is floor and sum(c.tokens for c in best) <= room:
                for _ in range(ROUND_TRIM_TRIES):  # the largest allowance that fits
                    if hi - lo <= 1:
                        break
                    mid = (lo + hi) // 2
                    got = at(mid)
                    if sum(c.tokens for c in got) <= room:
                        lo, best = mid, got
                    else:
                        hi = mid
            if best is not round_:
                self.round_trim = lo
                for c in best:
                    if c.fidelity == "trimmed":
                        c.reason = ROUND_TRIMMED.format(limit=lo)
        chosen["tail"] = best
        self.used["tail"] = sum(c.tokens for c in best)
        self.remaining -= self.used["tail"]

    def leave_unanswered(self, units: Sequence[Candidate]) -> None:
        """Leave out the round the latest user message came after (`loop_after`): the
        current loop is again after that message (none), so the round's units are older
        tail units that `drop_one` may drop, named in `plan.left_out` as too large."""
        self.unanswered_left_out |= {(c.conversation_id, c.position) for c in units}
        self.loop_after = self.latest_user

    def grow_tail(self, extra: int, held_back: frozenset[int] = frozenset(), pins_once: bool = False,
                  size: Callable[[Candidate], int] | None = None) -> None:
        """Older tail units, newest first, up to `extra` tokens more, stopping before a
        unit that holds a position of `held_back` (a turn superseded wholly or in part: the
        tail shows messages raw, so an old value there would read as current) or one that
        does not fit (an older unit never jumps it). `pins_once`: a pin a grown unit shows
        leaves the pinned block, as one the chosen tail shows does
        (system_messages="before_latest", where that block is rebuilt every call anyway).
        Otherwise (the default layout) the pinned block keeps its pins, and a unit that
        holds a position of one it shows is passed over (taken out of the pool: nothing
        else in this call shows it again) and the tail grows on with the older units: a
        turn is shown verbatim once, and the grown tail has a gap only where the pinned
        block, earlier in the context, shows the turn. (Stopping at the pin instead billed
        more on the LoCoMo replays: the context came out shorter than the fill target.)
        The gap costs no reader of the tail anything: an epoch's extension appends after
        the newest turn shown, a middle eviction's rebuilt tail stops at a turn the kept
        head shows (the pinned block is in that head), and a pin unpinned since ends the
        epoch ("pin changed"), whose rebuild grows the tail over the turn again.

        A context that starts an epoch on a turn that retrieves little would otherwise be
        a few hundred tokens: below a provider's minimum cacheable prefix (1,024 tokens
        for OpenAI and most Anthropic models) every call of the epoch pays in full until
        appends grow it past that. Filling it with the turns just before the tail makes it
        cacheable from its second call and leaves the rest of the room to grow into. Only
        room nothing else wanted is used (retrieved turns were taken first), so a recall
        question's per-turn part is as large as before; a retrieved turn the grown tail
        now shows verbatim leaves the retrieved slice. `size`: `extra` is a floor measured
        by it (a unit's tokens as the provider caches them): the unit that crosses it is
        taken too, room permitting, so the tail reaches `extra` instead of stopping under it."""
        pool = self.pools["tail"]  # after stable_tail: the units older than the tail, newest first
        # the pins the pinned block shows (the default layout keeps them there)
        pinned = set() if pins_once else {p for c in self.chosen["pinned"] if c.conversation_id == self.conv
                                          for p in (c.group or [c.position])}
        grown: list[Candidate] = []
        while pool and extra > 0:
            c = pool[0]
            at = set(c.group) or {c.position}
            if at & held_back:
                break
            if at & pinned:
                pool.pop(0)  # shown in the pinned block: passed over, and not shown again
                continue
            back = self._retrieved_tokens_at(at)  # what its retrieved line gives back
            if c.tokens > self.remaining + back or (size is None and c.tokens > extra + back):
                break  # an older unit never jumps one that does not fit
            pool.pop(0)
            self.withdraw("retrieved", at)
            if pins_once:
                self.withdraw("pinned", at)
            self.remaining -= c.tokens
            self.used["tail"] += c.tokens
            extra -= (c.tokens if size is None else size(c)) - back
            grown.append(c)
        self.chosen["tail"].extend(grown)

    def _retrieved_tokens_at(self, positions: set[int]) -> int:
        return sum(c.tokens for c in self.chosen["retrieved"]
                   if c.conversation_id == self.conv and c.position in positions)

    def take(self, slice_: str, limit: int) -> None:
        """Move the pool's candidates that fit into the slice (up to `limit` tokens in it)."""
        pool = self.pools[slice_]
        chosen, used = self.chosen[slice_], self.used
        long = excerpt.EXCERPT_LONG_TOKENS if slice_ == "retrieved" else 0
        inline = (slice_ == "retrieved" and excerpt.EXCERPT == excerpt.INLINE
                  and self.room <= excerpt.INLINE_MAX_ROOM_TOKENS)
        tries = 0
        i = 0
        while i < len(pool):
            c = pool[i]
            if long and c.tokens > long and c.fidelity == "verbatim":
                short = excerpt.excerpt_of(c, None if excerpt.COMPACT else long, self.tokens,
                                           f"a long turn (over {long} tokens)")
                if short is not None:
                    c = pool[i] = short
            extra = c.tokens + (self.header[slice_] if not chosen else 0)
            room = min(limit - used[slice_], self.remaining)
            if extra > room and inline and tries < excerpt.EXCERPT_MAX_TRIES and room >= excerpt.MIN_EXCERPT_TOKENS:
                # in rank order: a turn that does not fit whole goes in as its excerpt
                # before lower-ranked turns take the room
                tries += 1
                short = excerpt.excerpt_of(c, room - (extra - c.tokens), self.tokens, "it did not fit whole")
                if short is not None:
                    c, extra = short, short.tokens + (extra - c.tokens)
            if extra <= room:
                chosen.append(c)
                used[slice_] += extra
                self.remaining -= extra
                pool.pop(i)
                continue
            if slice_ == "tail":
                break  # the tail is contiguous: an older turn cannot jump a gap
            i += 1

    def take_excerpts(self, slice_: str, limit: int) -> None:
        """The pool's turns that did not fit whole, best first, as excerpts where one fits
        the room left (up to `limit` tokens in the slice); off when excerpt.EXCERPT is 0.
        (Under INLINE the first pass already tried them; what it left, this tries again.)"""
        if not excerpt.EXCERPT:
            return
        pool, chosen, used = self.pools[slice_], self.chosen[slice_], self.used
        i = 0
        while i < min(len(pool), excerpt.EXCERPT_MAX_TRIES):
            room = min(limit - used[slice_], self.remaining) - (self.header[slice_] if not chosen else 0)
            if room < excerpt.MIN_EXCERPT_TOKENS:
                return
            short = excerpt.excerpt_of(pool[i], room, self.tokens, "it did not fit whole")
            if short is None:
                i += 1
                continue
            extra = short.tokens + (self.header[slice_] if not chosen else 0)
            chosen.append(short)
            used[slice_] += extra
            self.remaining -= extra
            pool.pop(i)

    def withdraw(self, slice_: str, positions: set[int]) -> None:
        """Take this conversation's `positions` out of a slice (chosen and pool), so a
        turn shown verbatim elsewhere is not shown twice; their tokens go back."""
        conv, chosen, used = self.conv, self.chosen, self.used
        for c in [c for c in chosen[slice_] if c.conversation_id == conv and c.position in positions]:
            chosen[slice_].remove(c)
            used[slice_] -= c.tokens
            self.remaining += c.tokens
        if not chosen[slice_] and used[slice_]:  # the block's header goes back too
            self.remaining += used[slice_]
            used[slice_] = 0
        self.pools[slice_] = [c for c in self.pools[slice_]
                              if not (c.conversation_id == conv and c.position in positions)]

    def left_out(self, shown: set[tuple[str, int]]) -> list[PlanItem]:
        """What stayed in the pools and the context does not show, up to
        PLAN_LEFT_OUT_PER_SLICE a slice, for the plan."""
        out: list[PlanItem] = []
        for s in PACKED_SLICES:
            for c in self.pools[s][:PLAN_LEFT_OUT_PER_SLICE]:
                if (c.conversation_id, c.position) in shown:
                    continue
                key = (c.conversation_id, c.position)
                why = (ROUND_UNANSWERED_DROPPED if key in self.unanswered_dropped
                       else ROUND_UNANSWERED_LEFT_OUT if key in self.unanswered_left_out
                       else GAVE_WAY if key in self.gave_way
                       else "did not fit its share of the budget: " + c.reason)
                out.append(PlanItem(s, c.conversation_id, c.group or [c.position], c.tier, c.fidelity,
                                    c.tokens, c.score, why))
        return out

    def round_units(self) -> list[Candidate]:
        """The chosen tail units of the latest tool round: after the latest user message,
        from its newest unit that holds a call or a result on (`_round_start`; none: a
        plain reply there is no loop). The older rounds of the loop are not among them."""
        lu = self.loop_after
        after = [] if lu is None else [c for c in self.chosen["tail"] if c.position > lu]
        start = _round_start(after)
        return [] if start is None else [c for c in after if c.position >= start]

    def shown_verbatim(self) -> set[int]:
        return {p for c in self.chosen["tail"] for p in c.group} | {c.position for c in self.chosen["pinned"]}

    def top_up(self, order: list[str], slack: int) -> list[tuple[str, Candidate]]:
        """Candidates (best first, slices in `order`) whose exact line cost fits `slack`."""
        chosen, pools, header = self.chosen, self.pools, self.header
        added: list[tuple[str, Candidate]] = []
        for s in order:
            headings = {c.header for c in chosen[s]}
            for c in list(pools[s]):
                cost = c.tokens + (header[s] if not chosen[s] else 0)
                if c.header:
                    cost -= HEADING_SHARE_TOKENS
                    if c.header not in headings:
                        cost += self.tokens.count(c.header) + LINE_SEP_TOKENS
                if cost <= slack:
                    chosen[s].append(c)
                    pools[s].remove(c)
                    headings.add(c.header)
                    added.append((s, c))
                    slack -= cost
            if s != "retrieved" or not excerpt.EXCERPT:
                continue
            # second pass: what did not fit whole, as an excerpt in the slack left
            for c in list(pools[s])[:excerpt.EXCERPT_MAX_TRIES]:
                if slack < excerpt.MIN_EXCERPT_TOKENS:
                    break
                fixed = header[s] if not chosen[s] else 0
                if c.header:  # excerpt_of counts a heading share, as packing does
                    fixed -= HEADING_SHARE_TOKENS
                    if c.header not in headings:
                        fixed += self.tokens.count(c.header) + LINE_SEP_TOKENS
                short = excerpt.excerpt_of(c, slack - fixed, self.tokens, "it did not fit whole")
                if short is None:
                    continue
                chosen[s].append(short)
                pools[s].remove(c)
                headings.add(c.header)
                added.append((s, short))
                slack -= short.tokens + fixed
        return added

    def drop_one(self, plan: Plan) -> bool:
        """Drop the lowest-value item: retrieved (lowest score), summary, the oldest tail
        unit but those of the latest tool round (an older round of the loop gives way,
        oldest first), then the lowest-priority pin; never a unit of the latest round
        (`round_units`: the model would call its tools again), so a latest round that does
        not fit is the budget's error; but for a round the question came after, no reply
        between (`loop_after`: not the model's pending loop), which goes before any tail
        turn or pin, the context packed again without it (`refill`: what gave way to it
        comes back): the question is then sent without it, never refused for it."""
        chosen = self.chosen
        for s in ("retrieved", "summary"):
            if chosen[s]:
                victim = min(chosen[s], key=lambda c: c.score)
                chosen[s].remove(victim)
                plan.left_out.append(victim.item(DROPPED))
                return True
        round_ = self.round_units()
        if self.loop_after != self.latest_user and round_:
            # a round the question came after (not the model's pending loop) goes before
            # any pin or tail turn, and what gave way to it comes back: packed again as if
            # it had been left out from the start (`refill`; a packing `fill` never ran, as
            # a unit test's, drops its units alone)
            if self._start is not None:
                self.refill(round_)
                return True
            self.unanswered_dropped |= {(c.conversation_id, c.position) for c in round_}
            for c in round_:
                chosen["tail"].remove(c)
                plan.left_out.append(c.item(ROUND_UNANSWERED_DROPPED))
            self.loop_after = self.latest_user
            return True
        loop = {id(c) for c in round_}
        older = [c for c in chosen["tail"] if id(c) not in loop]
        if older:
            victim = min(older, key=lambda c: c.position)
            chosen["tail"].remove(victim)
            key = (victim.conversation_id, victim.position)
            plan.left_out.append(victim.item(ROUND_UNANSWERED_DROPPED if key in self.unanswered_dropped else DROPPED))
            return True
        if chosen["pinned"]:
            victim = min(chosen["pinned"], key=lambda c: (c.score, c.position))
            chosen["pinned"].remove(victim)
            plan.left_out.append(victim.item(DROPPED))
            return True
        return False

    def refill(self, round_: Sequence[Candidate]) -> None:
        """Pack again from `fill`'s start, the round the question came after (`round_`,
        `loop_after`) an older tail unit from the start (no current loop, as before
        ac765c3): what gave way to it (older tail turns) comes back. The marks added to
        the retrieved slice after `fill` (planner.marks) are added again; what drop_one
        dropped before is packed anew (plan.left_out back to its length at the start)."""
        assert self._start is not None
        pools0, caps0, left0, remaining0, args, kwargs = self._start
        plan = args[0]
        added = [c for c in self.chosen["retrieved"] if id(c) not in self._filled]  # marks.take's
        self.unanswered_dropped |= {(c.conversation_id, c.position) for c in round_}
        # in place: the caller (planner.build `_fit`) holds these dicts
        self.pools.update({s: list(v) for s, v in pools0.items()})
        self.chosen.update({s: [] for s in PACKED_SLICES})
        self.used.update({s: 0 for s in PACKED_SLICES})
        self.remaining = remaining0
        self.round_trim, self.gave_way, self.unanswered_left_out = None, set(), set()
        del plan.left_out[left0:]
        self.fill(dict(caps0), *args, **kwargs)
        if added:
            cost = sum(c.tokens for c in added) + (self.header["retrieved"] if not self.chosen["retrieved"] else 0)
            self.chosen["retrieved"].extend(added)
            self.used["retrieved"] += cost
            self.remaining -= cost


def kept_tail(pool: list[Candidate], start: int, cap: int, latest_user: int | None = None
              ) -> tuple[list[Candidate] | None, str]:
    """The tail from `start` to now, when it is still contiguous from there (nothing
    retracted or cleared at its start) and fits `cap`; else None (re-anchor it) and why,
    for the plan's cache report. A `start` that is still the latest user message with
    nothing after it (the previous call showed no turn before it: a small budget, the
    same call again) keeps no unit: [] (the pool never holds the latest; the caller's
    stable tail may still choose older turns, which is not keeping it)."""
    units = sorted((c for c in pool if c.position >= start), key=lambda c: c.position)
    if start == latest_user and not units:
        return [], ""
    if not units or units[0].position != start:
        return None, (f"the turn #{start} the previous call's turns began with is no longer a turn of "
                      "the tail (retracted, cleared or superseded)")
    size = sum(c.tokens for c in units)
    if size > cap:
        return None, (f"the turns from #{start} grew to {size} tokens, past the {cap} they may take "
                      f"({TAIL_GROWTH} times the tail's share, or the room the pins and summary leave)")
    for c in units:
        pool.remove(c)
    return sorted(units, key=lambda c: -c.position), ""


def stable_tail(pool: list[Candidate], rows: list[TurnRow], cap: int, grid: int, table: TurnTable,
                anchor: int) -> list[Candidate]:
    """The recent tail, with a start that stays put for several turns (taken out of
    `pool`, newest first); `anchor` <= 1: the plain newest-first tail.

    Starts may only fall where the conversation's running token count crosses a
    multiple of `grid` (half the tail's nominal share, fixed by the budget). The tail
    starts at the earliest such point from which it fits `cap`: it grows by appends,
    and when it no longer fits, its start jumps forward by about half a share. Between
    jumps consecutive contexts share the whole tail as a byte-identical prefix. Falls
    back to the plain newest-first tail when no grid point fits (a huge last turn).
    """
    if not pool or cap <= 0:
        return []
    if anchor <= 1 or not rows:
        return newest_first(pool, cap)
    before = table.tokens_before(rows[0].position)
    cum: dict[int, int] = {}
    for r in rows:
        cum[r.position] = before
        before += r.tokens
    units = sorted(pool, key=lambda c: c.position)  # oldest first
    suffix = 0
    best: int | None = None
    for i in range(len(units) - 1, -1, -1):
        suffix += units[i].tokens
        if suffix > cap:
            break
        p = units[i].position
        prev = cum.get(p - 1)
        if p in cum and (prev is None or cum[p] // grid != prev // grid or p == 0):
            best = i
    if best is None:
        return newest_first(pool, cap)
    chosen = units[best:]
    for c in chosen:
        pool.remove(c)
    return sorted(chosen, key=lambda c: -c.position)


def newest_first(pool: list[Candidate], cap: int) -> list[Candidate]:
    """The newest units that fit `cap`, taken out of `pool` (newest first)."""
    out: list[Candidate] = []
    used = 0
    for c in list(pool):  # pool is newest first; contiguous, so stop at the first misfit
        if used + c.tokens > cap:
            break
        out.append(c)
        used += c.tokens
        pool.remove(c)
    return out


def loop_after(units: Sequence[Candidate], latest_user: int | None) -> int | None:
    """The position after which the tail units are the current tool loop: the latest user
    message's, except where that message is the newest (nothing after it) and the newest
    unit before it ends with a tool result, a round whose results no assistant message
    has answered: then just before that round, which is the latest round. Anthropic's form
    sends a question with the results of the calls before it (one user message, its
    `tool_result` blocks, then its text: stored as the `tool` rows, then a user row), and
    a user who writes right after a round's results in the chat form does the same; sent
    the question without those results, the model calls the tools again."""
    if latest_user is None or any(c.position > latest_user for c in units):
        return latest_user
    before = [c for c in units if c.position < latest_user]
    if not before:
        return latest_user
    newest = max(before, key=lambda c: c.position)
    msgs = (newest.body or {}).get("messages", ())
    if msgs and result_id(msgs[-1]) is not None:
        return newest.position - 1
    return latest_user


def _round_start(after: Sequence[Candidate]) -> int | None:
    """The position the latest tool round starts at among the tail units `after` the
    latest user message: its newest unit holding a tool call or a tool result (a call and
    its results are one unit), the units after it (a reply) part of that round too; None
    when none holds one (no agent's loop)."""
    return max((c.position for c in after if _tool_unit(c)), default=None)


def _tool_unit(c: Candidate) -> bool:
    """Whether a tail unit holds a tool call or a tool result (an agent's loop)."""
    return any(call_ids(b) or result_id(b) is not None for b in (c.body or {}).get("messages", ()))
