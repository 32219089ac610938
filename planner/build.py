"""The per-turn query planner: which slice of the past to load, at what fidelity.

Invariants:
- The budget is hard: the returned messages, counted exactly with the configured
  tokenizer (`tiers.tokens.messages_tokens`), never exceed it. Items are estimated while
  packing, then the rendered result is counted exactly and trimmed until it fits.
- The latest user message is always present verbatim; if it alone does not fit, the
  call fails with `BudgetTooSmall` unless the caller opted into truncating it (checked
  before the turn table's first read where the message's stored count says so: a refusal
  need not pay reading a conversation of long turns, `refuse_unfit`). The turns
  after it (the current tool loop, a pending round included) are kept too, in every
  setting: newest first, up to the room the pinned block leaves (not capped at the
  tail's share), until an older round does not fit whole (it and the rounds before it
  are left out: a long loop runs on with its recent rounds; planner.pack.Packing.take_loop).
  The latest round (the model's latest tool-call message and its results; or the round
  whose results the latest user message came with, no reply between, as Anthropic's form
  sends a question: planner.pack `loop_after`) is always
  sent: where it does not fit whole the pins and older turns, older rounds included,
  give way, then its tool outputs are trimmed further, one allowance shared among them
  (`fit_round`), and where not even the least trim fits the call fails with
  `BudgetTooSmall` naming the round: never the question without it (the model would call
  its tools again). A round the question came after is the exception: not the model's
  pending loop (an agent's run that ended before its reply was stored leaves the same
  rows), it never refuses the question: where not even the least trim fits, it is left
  out, named in `plan.left_out`, and the question is sent as without it. The tail's rows
  are read back as far as that round's call for it (after a clear, never past it).
- An assistant message with tool calls is never separated from its tool results.
- Order is prefix-stable, what changes least first: system, pinned, summary, the recent
  tail, then the per-turn part: the retrieved turns, then the latest user message
  (`retrieved_placement="before_tail"` puts the retrieved turns before the tail, without
  epochs; the default is docs/design.md invariant 6's order).
  The stable layers are sized by the budget alone (`layer_shares`, the same for every
  query class); what a class needs more of goes into the per-turn part.
- Within an epoch the context is append-only (planner.epoch): the previous call's
  context stays byte for byte, the turns that arrived since and this query's retrieved
  turns not yet shown are appended. When the room runs out, the retrieved blocks of
  earlier calls give way newest first (a rewind: the prefix before them still caches);
  on a new user message whose context would pass 70% of the budget or not fit, the
  previous context's head stays and only the newest turns are rebuilt after it
  (planner.middle, "evict from the middle"); a pin whose turn the context no longer shows
  goes into a late-pin block after the kept context or head, before the per-turn part
  (planner.late_pins; in a tool loop no such place is left: a new epoch); when
  that is not enough, a pin or summary line shown as current stops being current, late
  pins are due to fold into the pinned block,
  or the caller's budget, system prompt or time zone changes, or the previous call came
  longer ago than a provider keeps a prompt cache (`cache_ttl_s`, by the created_at of the
  newest log message each call read, one more than MAX_STAMP_AHEAD_S ahead of the wall
  clock counting as the wall clock: an extension would be all misses), a new epoch
  rebuilds the context (under `system_messages="before_latest"`, the previous call's turns
  are then not kept either, for the same reason).
  Under a conversion (`context_format`, `system_messages="merge"`) the epoch is extended
  on the stored form and kept only where the converted previous request stays the prefix
  of the converted new one (what the extension keeps of it, message for message): a fold
  whose merged system text takes a new block, or a call joining the assistant message
  before it, changes an earlier message, and a new epoch says so.
  The plan reports which (`plan.cache`, whose shared prefix is counted on the returned
  messages, after any conversion, as the previous call's were) and where the stable
  prefix ends (`plan.breakpoints`, indexes of the returned messages, after any conversion).
- Only a recall (NEEDS_ROOM_CLASSES) takes the room left, rewinds earlier blocks or ends
  an epoch for its retrieved turns; any other turn retrieves nothing when it asks nothing
  and points to nothing said before (planner.classify.tells_only), else clearly related
  turns up to NARROW_RETRIEVED_SHARE of the budget, appended within an epoch as far as
  they fit.
- Superseded constraints are never presented as current: they are left out, and the
  plan says which turn superseded them; so is a summary line of a view built before the
  correction (a superseded statement is cut out of its line), and a supersession by a
  popped turn counts as absent (tiers.statements.Hidden). A superseded turn that is shown is marked, with
  its validity interval (valid from its own time until the superseding turn's), in the
  line and in the plan item's reason (the recent tail shows turns as they were said: in
  its item's reason, and by a mark in the retrieved block, planner.marks, whatever the
  length of the log: a whole log that fits the budget is marked as a long one is; an
  extension appends a mark only for a correction that is new; `plan.left_out` does not
  list it); a question about the past (`about_past`) ranks superseded turns up instead of down.
- A query whose vector cannot be computed (`embed` raises `EmbeddingUnavailable`: the
  embedding model cannot be loaded) still gets its context, ranked by keywords (BM25)
  only and classified by the rules; the plan says so (`plan.tiers["embedder"]` is
  "degraded", the error's type ends `plan.retrieval`: never its message, which names the
  server's model path, as the plan goes to tenants). Any other error of `embed` is raised
  (Memory raises EmbeddingUnavailable only for `tiers.embed_onnx.model_unavailable_errors`:
  a bug of the embedder or its caller is not hidden behind keyword ranking).
- A query planned with namespace recall off (the call's `namespace_recall=False`, such as
  a LangGraph adapter's conversation per thread id, or the config's) says so in
  `plan.retrieval` ("this conversation only: ..."), before the embedder's note.

`Planner.build` runs the steps in order, each in its own home: the fixed part (the
caller's system message and the latest user message, here), the candidates of each slice
(planner.candidates), packing them under the room (planner.pack), rendering and the
exact count (planner.render), then the epoch: extend the previous context or start anew
(here, with planner.epoch).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from tiermem.planner import epoch_policy, late_pins, marks, middle, query_text
from tiermem.planner.cache_rules import (
    CACHEABLE_MIN_TOKENS,
    PROVIDERS,
    alive,
    anthropic_marks,
    anthropic_readable,
    openai_cached,
    priming,
    rendered_length,
    request_lcp,
)
from tiermem.planner.candidates import (
    RECALL_CLASSES,
    STRONG_COSINE,
    STRONG_KEYWORD_SHARE,
    Candidate,
    Candidates,
    tier_of,
)
from tiermem.planner.classify import QueryClassifier, tells_only
from tiermem.planner.epoch import RAW_KINDS, EpochCache, EpochKey, EpochState, EpochStore, Segment, key_change
from tiermem.planner.pack import PACKED_SLICES, Packing
from tiermem.planner.plan import CacheReport, Context, Plan, PlanItem, ViewStaleness, sent_slice_tokens
from tiermem.planner.render import (
    BLOCK_SLICES,
    HEADING_SHARE_TOKENS,
    LINE_SEP_TOKENS,
    Renderer,
    breakpoints,
    conversion_break,
    converted_breakpoints,
    fresh_segments,
    open_call_items,
    open_calls,
    reused_prefix,
    shown,
)
from tiermem.planner.statements import StatementView
from tiermem.planner.timeline import told
from tiermem.tiers.errors import BudgetTooSmall, EmbeddingUnavailable, ValidationError
from tiermem.tiers.formats import canonical_role, hidden_positions, wire_body
from tiermem.tiers.keys import turn_fingerprint
from tiermem.tiers.models import StoredMessage, message_text
from tiermem.tiers.statements import hidden_many, read_hidden
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import REPLY_PRIMING_TOKENS, TokenCounter, message_tokens, messages_tokens
from tiermem.tiers.turncache import TurnCache, TurnTable
from tiermem.tiers.zones import UTC_NAME, Zone, optional_timezone
from tiermem.tiers.zones import zone as zone_named

if TYPE_CHECKING:
    from tiermem.tiers.models import TurnRow

TOP_UP_ROUNDS = 2
STABLE_SLICES = ("pinned", "summary", "tail")  # sized by the budget alone (settings.layers)
DEFAULT_LAYER_SHARES = {"pinned": 0.1, "summary": 0.1, "tail": 0.1}
# Extending an epoch may leave out the lowest-scored of this call's retrieved turns for
# room, as long as what it shows holds at least this share of their tokens (of those the
# read of TYPICAL_LINE_TOKENS lines chose: not `Candidate.fill_only`); below it a rewind or
# a new epoch gives the call its whole room.
EXTEND_MIN_NEED_SHARE = 0.8
# The classes whose retrieved turns are the answer (a recall, or the newest turns for
# "what did I just say?"): only they may rewind earlier blocks or start an epoch for room.
NEEDS_ROOM_CLASSES = RECALL_CLASSES | {"recent_recall"}
# The other classes bring back only clearly related turns, and at most this share of the
# budget of them a call (no leftovers, no top-up): each line appended within an epoch is
# paid in full once and later makes the epoch end or rewind sooner. (Chosen on the cost
# replays of conv-26, conv-30 and conv-41 from 0.05 / 0.1 / 0.2 / uncapped; see README.)
NARROW_RETRIEVED_SHARE = 0.1
# A recall class's retrieved turns take all the room the stable layers leave (leftovers in
# Packing.fill): no share sizes them, and the config refuses one (tiermem.config
# ROOM_CLASSES). Packing still takes them in two greedy passes, the first up to these
# shares of the room (the per-class defaults from when they were settings), so contexts
# stay byte for byte as before. (Two passes differ from one only where a turn over the first
# pass's room is passed over, or excerpted, and lower-ranked ones go first: against one pass,
# 2 of 15 recall contexts in the check that found this, by 8 tokens.)
RECALL_FIRST_PASS_SHARE = {"recent_recall": 0.15, "targeted_recall": 0.7, "temporal": 0.7, "summarize": 0.1}
# A context that starts an epoch fills up to this share of the budget with the turns
# just before the tail when nothing else wants the room (planner.pack.Packing.grow_tail):
# big enough to pass a provider's minimum cacheable prefix (1,024 tokens) at a 2,000-token
# budget even when the last turn does not fit (0.52 left 1,019-1,024 rendered tokens on
# 4 of 19 new epochs of conv-41/42, so their next call was not cached: 0.54 bills 0.2-0.8
# points less on 3 of the 4 dev replays; 0.6 and 0.7 measured worse on conv-26), small
# enough to leave room for the appends of an epoch.
EPOCH_START_FILL_SHARE = 0.54
# Except where the provider's cache has expired (`cache_ttl_s`: a session resumed after a
# gap): the epoch's first call is billed in full whatever it holds, and only its cacheable
# part is worth paying for, so it is filled past the providers' minimum cacheable prefix
# (planner.cache_rules.CACHEABLE_MIN_TOKENS) by the one unit that crosses it, and no
# further; a recall fills its stable layers that far before its retrieved turns take the
# room after them, so a later middle eviction has a cacheable head to keep (planner.middle)
# instead of a new epoch. (On the four LoCoMo dev replays at 2,000 under expiry, with the
# kept head counted as rendered too, planner.middle: conv-26 / 30 / 41 / 42 billed 22.59 /
# 25.94 / 14.19 / 17.54% of cached full context under OpenAI's rules filled to the share,
# 21.68 / 24.78 / 13.73 / 16.99% so; a fixed 32-token margin past the minimum billed more on
# conv-26 / 41 / 42, and on conv-30 held out.)
# Rounds of growing a resumed session's first context to the cacheable minimum
# (`_fill_cacheable`): each grows the tail by the shortfall, the crossing unit included,
# so one is almost always enough; the bound keeps a pathological count from looping
FILL_CACHEABLE_ROUNDS = 3
# Rounds of trimming a tool output further for a new epoch's reserve (`_shortened`): the
# allowance falls by what is still over, so a second is rarely needed (decoding and
# encoding again may merge or split a token at the cut)
RETRIM_ROUNDS = 3
# How long the planner assumes a provider keeps a prompt cache (PlannerSettings.cache_ttl_s):
# a call more than this after the previous one (by the log's created_at) starts a new epoch,
# as every token of an extension would be a miss anyway. An hour, the longest common
# retention (OpenAI's upper end; Anthropic's default is 5 minutes, its extended one an
# hour): a restart never throws away a cache that could still be warm at either provider.
DEFAULT_CACHE_TTL_S = 3600.0
# A message stamped more than this ahead of the wall clock (time.time() at the context call
# that reads it) counts as that wall clock on the epoch clock (`_log_time`): it is no clock
# at all (a wrong date, milliseconds stored as seconds, a year typo), and taken as it is it
# would hold the conversation's clock (which never goes backwards) ahead for years, so no
# later real gap past cache_ttl_s would be seen. A day: wider than any honest offset (a
# local time read as UTC is at most 14 h ahead, UTC+14; an unsynced server, minutes), which
# keeps measuring gaps between its own stamps as before; a stamp within it may still hold
# the clock ahead, for at most this long. Replays stamp the past: never affected.
MAX_STAMP_AHEAD_S = 86_400.0
# A rewind on a new user message that would keep less than this share of the budget as
# the cached prefix starts a new epoch instead: a prefix that short is below the
# providers' minimum cacheable length anyway, and a new epoch is filled
# (EPOCH_START_FILL_SHARE) so it caches at once. (Another query on the same log, as in
# the standard LoCoMo eval, still rewinds: nothing was appended to cache.)
REWIND_MIN_KEPT_SHARE = 0.5
# Truncating the latest user message leaves this many tokens spare at first (a cut
# token sequence can decode to text that encodes longer); the exact count then cuts more.
# The tail's rows are read back, past the scan, as far as the latest tool round's call and
# the assistant message before it (the round before, named where it gives way): this many
# assistant messages before the newest tool result (_round_call_read)
ROUNDS_READ = 2
TRUNCATION_MARGIN_TOKENS = 1
ALWAYS_KEPT_SCORE = 1.0  # the plan's score of the system prompt and the latest user message
MS_PER_S = 1000.0
TIMING_DECIMALS = 3  # plan.timings_ms: milliseconds rounded to microseconds


@dataclass(frozen=True)
class HotView:
    """What the hot tier answered: payloads of hot turns and which are pinned."""

    payloads: dict[int, str]
    pinned: dict[int, int]  # position -> priority
    degraded: bool = False
    rebuilt: bool = False
    overflow_tokens: int = 0


@dataclass(frozen=True)
class SummaryBlock:
    """A warm view to show in the summary slice, with its staleness."""

    kind: str
    version: int
    start: int
    end: int
    lines: list[tuple[str, tuple[int, ...]]]  # sentence, source positions
    turns_behind: int
    seconds_behind: float
    over_budget: bool
    tier: str = "warm"
    # per line, the (position, start) of the statements of its cited turns already
    # recorded as superseded when it was written (tiers.warm `Sentence.seen_superseded`):
    # what tells a reworded line written before a correction from one written after it,
    # whatever the correction's position. None where not kept (a fold's lines): a
    # correction past `end` is then taken as later than the line
    seen_superseded: list[tuple[tuple[int, int], ...]] | None = None
    # a caller's checkpoint without per-line sources: its one line is a text that stands
    # in for every position from `start` to `end`, not only the one its line cites
    # (planner.candidates `summary`: what a correction after `end` superseded in it)
    whole: bool = False


@dataclass
class PlannerSettings:
    shares: dict[str, dict[str, float]]
    retrieval_k: int = 20
    tool_trim_tokens: int = 400
    tail_anchor: int = 8
    namespace_recall: bool = True
    retrieved_placement: str = "before_latest"  # or "before_tail" (retrieved before the tail, no epochs)
    system_messages: str = "as_is"  # or "merge" (one leading system message) or "before_latest" (memory last)
    context_format: str = "as_stored"  # or "chat" / "responses": convert every message to that family
    # the stable layers' budget shares, the same for every query class
    layers: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_LAYER_SHARES))
    epochs: bool = True  # append-only contexts within an epoch (planner.epoch)
    evict_middle: bool = True  # a used-up epoch keeps its head and rebuilds the rest (planner.middle)
    timezone: str = UTC_NAME  # the user's calendar: days and shown times (Config.timezone, tiers.zones)
    # the provider's cache lifetime assumed (DEFAULT_CACHE_TTL_S); None or 0: never expires
    cache_ttl_s: float | None = DEFAULT_CACHE_TTL_S
    # the provider/model's shortest cacheable prefix, rendered tokens (Config.pricing
    # min_prefix_tokens): a session resumed after its cache expired is filled just past it
    # (`_resumed`); None, not known (Claude Haiku's is 2,048, some models' 4,096): filled
    # to EPOCH_START_FILL_SHARE as any epoch start, never below it
    cache_min_prefix: int | None = None

    @property
    def zone(self) -> Zone:
        return zone_named(self.timezone)

@dataclass(frozen=True)
class _Extension:
    """The previous context extended within its epoch."""

    segments: list[Segment]
    total: int
    reason: str
    head: int = 0  # a middle eviction's kept head (planner.middle)


@dataclass(frozen=True)
class _Fixed:
    """The fixed part of one context: the caller's system message, and the latest user
    message with the tail rows read to find it; `room` is what is left for the slices."""

    messages: list[dict[str, Any]]
    tail_rows: list[TurnRow]
    tail_msgs: dict[int, StoredMessage]
    hidden: set[int]  # positions control rows hide (and the control rows themselves)
    latest_user: int | None
    latest_body: dict[str, Any] | None
    latest_truncated: bool
    room: int


@dataclass
class _Call:
    """One `build` call's inputs and results so far, as its steps share them."""

    conv: str
    namespace: str
    query: str | None
    budget: int
    system: str | None
    hot: HotView
    summaries: Sequence[SummaryBlock]
    namespace_recall: bool
    table: TurnTable
    plan: Plan
    t0: float
    timings: dict[str, float] = field(default_factory=dict)
    record: bool = True  # False: a what-if plan (a recall eval's, the inspector's), the epoch is not advanced
    timezone: str = UTC_NAME  # the user's calendar for this call (its days, shown dates)
    kept_from: int | None = None  # before_latest: where the previous call's turns began, kept
    # the previous call's state, read once per call so every step sees the same one
    # (Planner._previous), and why there is none when the store knows
    prev: EpochState | None = None
    prev_why: str = ""
    # the wall clock at the call, read once: the bound on how far ahead a message's stamp
    # may move the epoch clock (MAX_STAMP_AHEAD_S)
    wall: float = field(default_factory=time.time)
    # tokens the caller sends after this context (a message the log does not hold yet: a
    # streamed Agents run's question): `budget` is what they leave, the epoch is keyed by
    # the budget given (budget + pending), so a call with one extends an epoch as the call
    # whose latest message the log holds does (planner.epoch: a changed budget is a new one)
    pending: int = 0

    @property
    def zone(self) -> Zone:
        return zone_named(self.timezone)

    def mark(self, step: str) -> None:
        """Record when `step` ended, in milliseconds since the call began."""
        self.timings[step] = (time.perf_counter() - self.t0) * MS_PER_S


# Anthropic prefixes an epoch state keeps (EpochState.cached), the longest: a request writes
# at most 4, and one read back is at most 20 messages before one of its own (lookback)
MAX_CACHED_PREFIXES = 16


class Planner:
    """Plans each turn's context of a conversation (`build`); keeps, between calls, the
    previous context of each conversation (its epoch) and its pin candidates."""

    def __init__(
        self,
        cold: ColdLog,
        tokens: TokenCounter,
        embed: Callable[[list[str]], np.ndarray] | None,
        settings: PlannerSettings,
        classifier: QueryClassifier | None = None,
        turns: TurnCache | None = None,
        epochs: EpochStore | None = None,
    ) -> None:
        """`epochs`: where the previous contexts are kept (planner.epoch; default: this
        process's own `EpochCache`)."""
        self.cold = cold
        self.turns = turns if turns is not None else TurnCache(cold, derive=told, zone=settings.timezone)
        self.tokens = tokens
        self.embed = embed
        self.settings = settings
        self.classifier = classifier or QueryClassifier()
        self.statements = StatementView(cold)  # turns current in part (planner/statements.py)
        self.render = Renderer(tokens, settings, self.statements)
        self.candidates = Candidates(cold, self.turns, tokens, settings, self.render, self.statements)
        self._epochs: EpochStore = epochs if epochs is not None else EpochCache()

    def forget(self, conv: str) -> None:
        """Drop what is kept between calls for a conversation key (it was erased)."""
        self.candidates.forget(conv)
        self.statements.forget(conv)
        self._epochs.drop(conv)  # the previous context's messages are kept for the epoch

    def forget_local(self, convs: Sequence[str] | None) -> None:
        """Drop what this process keeps of these conversation keys (erased, perhaps by
        another process, which deleted the shared epoch states): their pin candidates,
        statements and epoch states, and every epoch state that shows their turns.
        None: of every conversation (`Memory._drop_copies`)."""
        for conv in convs if convs is not None else [None]:
            self.candidates.forget(conv)
            self.statements.forget(conv)
        self._epochs.drop_local(convs)

    # -- the plan --------------------------------------------------------------------------

    def build(
        self,
        conversation_id: str,
        query: str | None,
        budget: int,
        *,
        namespace: str,
        system: str | None = None,
        hot: HotView | None = None,
        summaries: Sequence[SummaryBlock] = (),
        namespace_recall: bool = True,
        truncate_latest: bool = False,
        table: TurnTable | None = None,
        record: bool = True,
        timezone: str | None = None,
        started: float | None = None,
        stages: Mapping[str, float] | None = None,
        pending_tokens: int = 0,
        preview: bool = False,
    ) -> Context:
        """`table`: the conversation's turn table when the caller just read it (in this
        call's zone: `TurnCache.get`). `record=False` (a what-if plan, e.g. the inspector's):
        the epoch is not advanced, so the agent's next call is compared with its own
        previous context, not with this one. `timezone`: the user's IANA zone for this call
        (None: the settings'), the calendar of the days turns tell of and the query names and
        the clock of the dates shown. `started` (a `time.perf_counter()`) and `stages`: when
        the caller's call began and the stages it ran before this one (cumulative ms since
        `started`, in order: Memory's turn table, inline catch-up, hot and warm reads), so
        that `plan.timings_ms` times the whole call; without them, from this call's start.
        `pending_tokens`: what the caller sends after the context (a message not in the log
        yet, `Memory.context`): the context is planned under `budget` less them (the plan's
        budget), its epoch keyed by `budget`. `preview=True`: planned as a recorded call is,
        the epoch not advanced (`record` is then ignored): what the agent's next recorded
        call gets, shown without changing it."""
        t0 = started if started is not None else time.perf_counter()
        self.statements.begin()
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ValidationError("budget", "must be a positive integer number of tokens")
        if isinstance(pending_tokens, bool) or not isinstance(pending_tokens, int) or not 0 <= pending_tokens < budget:
            raise ValidationError("pending_tokens", f"must be an integer within 0..{budget - 1} tokens (under the budget)")
        budget -= pending_tokens
        tz_name = optional_timezone(timezone) or self.settings.timezone
        conv = conversation_id
        if table is None and not self.turns.holds(conv):  # a caller that read the table made it (Memory)
            self.refuse_unfit(conv, budget, system=system, truncate_latest=truncate_latest, pending=pending_tokens)
        table = table if table is not None else self.turns.get(conv, tz_name)
        turns_ms = (time.perf_counter() - t0) * MS_PER_S
        hot = hot or HotView({}, {}, degraded=True)
        plan = Plan(conv, query, "default", "", budget)
        plan.degraded = hot.degraded
        plan.tiers = {"cold": "ok", "hot": "degraded" if hot.degraded else ("rebuilt" if hot.rebuilt else "ok"),
                      "warm": "ok" if summaries else "unused"}
        # the caller's stages first (its "turns" when it read the table); "turns" here when not
        timings = dict(stages or {})
        timings.setdefault("turns", turns_ms)
        call = _Call(conv, namespace, query, budget, system, hot, summaries, namespace_recall, table, plan, t0,
                     timings, record and not preview, tz_name, pending=pending_tokens)
        fixed = self._fixed(call, truncate_latest)
        call.mark("fixed")
        pools, caps = self._candidates(call, fixed)
        packing = Packing(conv, pools, self._block_headers(), fixed.room, self.tokens)
        packing.opening = self._opening_tokens()
        call.prev, call.prev_why = self._previous(conv)
        call.kept_from = self._memory_last_start(call, fixed, self._epoch_key(call))
        # a context planned anew is filled (older tail turns, room nothing else wanted) to
        # EPOCH_START_FILL_SHARE of the budget, so it is cacheable at once: one that starts
        # an epoch, and every call where none is extended (context_epochs=false, before_tail);
        # under a conversion, of the tokens sent (_fill_as_sent).
        # system_messages="before_latest" keeps its own tail start: only a tail anchored
        # anew grows, and only as far as its next calls can keep it (pack.KEPT_FILL_SHARES)
        memory_last = self.settings.system_messages == "before_latest"
        fill_to = (int(call.budget * EPOCH_START_FILL_SHARE) - (call.budget - fixed.room)
                   if not memory_last or call.kept_from is None else 0)
        # a session resumed after the provider's cache expired: filled only past the
        # cacheable minimum (EPOCH_START_FILL_SHARE's note); a recall's stable layers first
        resumed = self._resumed(call, fixed)
        recall_first = resumed and plan.query_class in NEEDS_ROOM_CLASSES
        if resumed:  # grown after packing, as rendered (_fill_cacheable); a recall's layers first
            fill_to = (self._min_prefix() - sum(rendered_length(self.tokens, m) for m in fixed.messages)
                       if recall_first else 0)
        held_back = (frozenset({r.position for r in fixed.tail_rows if r.superseded_by is not None}
                               | self.statements.positions(conv)) if fill_to > 0 or resumed else frozenset())
        encoded: dict[int, list[int]] = {}  # the latest round's outputs, encoded once (_retrim)
        packing.fill(caps, plan, fixed.tail_rows, table, self.settings.tail_anchor, fill_to,
                     kept_from=call.kept_from, held_back=held_back,
                     leftovers=plan.query_class in NEEDS_ROOM_CLASSES, latest_user=fixed.latest_user,
                     memory_last=memory_last, tail_first=self._cached_size if recall_first else None,
                     retrim=lambda c, limit: self._retrim(call, fixed, c, limit, encoded))
        # a superseded turn the tail shows raw is marked in the retrieved block (planner.marks)
        marks.take(packing, marks.for_tail(self.candidates, conv, packing, fixed.tail_rows, call.zone))
        call.mark("pack")
        messages, kinds, where, total = self._fit(call, fixed, packing)
        if fill_to > 0 and not memory_last and self.render.converting():
            messages, kinds, where, total = self._fill_as_sent(call, fixed, packing, held_back,
                                                               (messages, kinds, where, total))
        if resumed:
            messages, kinds, where, total = self._fill_cacheable(call, fixed, packing, held_back,
                                                                 (messages, kinds, where, total))
        items, latest_item = self._items(call, fixed, packing)
        segs, total = self._epoch(call, fixed, packing, fresh_segments(messages, kinds, where, items, latest_item),
                                  total, latest_item)
        call.mark("total")
        plan.tokens = total
        plan.timings_ms = {k: round(v, TIMING_DECIMALS) for k, v in call.timings.items()}
        plan.items, marked = self._superseded_tail(call, fixed, [it for g in segs for it in g.items])
        # what each slice costs as sent: a block's shared header and headings once (explain,
        # /metrics and the inspector read it; the items' own counts each include them)
        plan.slice_sent = sent_slice_tokens([(g.kind, message_tokens(self.tokens, g.message), g.items)
                                             for g in segs], total)
        on_show = shown(segs)
        # a unit the fresh grouping left out incomplete that an extension shows complete
        # (its call in the previous context): not left out
        plan.left_out = [it for it in plan.left_out if it.slice != "tail"
                         or not any((it.conversation_id, p) in on_show for p in it.positions)]
        plan.left_out.extend(packing.left_out(on_show))
        # a superseded pin the context shows (the tail as it was said, a retrieved or
        # pinned line marked) is not left out: the item that shows it says what superseded it
        marked |= {p for it in plan.items if it.conversation_id == conv and it.slice in ("pinned", "retrieved")
                   and it.fidelity in ("verbatim", "trimmed") and "superseded by #" in it.reason for p in it.positions}
        plan.left_out = [it for it in plan.left_out if it.slice != "pinned" or it.conversation_id != conv
                         or not it.positions or not set(it.positions) <= marked]
        # nothing the context shows is listed as left out: a pin the candidates cut for
        # room (candidates.pinned: "higher-priority pins fill the budget") may be the
        # latest user message, which is always sent, or a turn the tail shows
        plan.left_out = [it for it in plan.left_out if it.slice == "summary" or not it.positions
                         or not all((it.conversation_id, p) in on_show for p in it.positions)]
        for view in summaries:
            plan.views.append(ViewStaleness(view.kind, view.version, (view.start, view.end), view.turns_behind,
                                            view.seconds_behind, view.over_budget))
        planned = [g.message for g in segs]
        returned = self.render.out(planned)
        if returned != planned:  # breakpoints index what the caller receives
            plan.breakpoints = converted_breakpoints(plan.breakpoints, planned, returned, self.render.out,
                                                     self.tokens)
        if call.prev is not None and self.render.converting():
            # so does the cache report: compared as planned, a fold or conversion claimed
            # a prefix the messages sent did not share (a retrieved block merged into the
            # first message changes it)
            (plan.cache.prefix_messages, plan.cache.expected_cached_tokens,
             plan.cache.boundary) = reused_prefix(call.prev.segments, returned, self.render.out, self.tokens)
        return Context(returned, total, plan)

    def _superseded_tail(self, call: _Call, fixed: _Fixed, items: list[PlanItem]) -> tuple[list[PlanItem], set[int]]:
        """`items`, each tail item that shows a superseded turn (read past popped turns:
        tiers.statements.Hidden) with the supersession and its validity interval in its
        reason (a copy: the epoch's segments keep theirs), as the rule for a superseded
        turn that is shown has it; the tail shows turns as they were said, so only the
        reason can say it. And the positions so marked. The rows this call read answer
        for the tail's newest turns; older ones a kept epoch still shows are read in one
        statement."""
        conv = call.conv
        positions = {p for it in items if it.slice == "tail" and it.conversation_id == conv
                     and "superseded by #" not in it.reason for p in it.positions}
        if not positions:
            return items, set()
        rows = {r.position: r for r in fixed.tail_rows if r.position in positions}
        if missing := sorted(positions - rows.keys()):
            rows.update((r.position, r) for r in self.cold.turns_at(conv, missing))
        hid = self.statements.hidden(conv)
        gone = [hid.row(r) for r in rows.values()]
        gone = [r for r in gone if r.superseded_by is not None]
        if not gone:
            return items, set()
        intervals = self.candidates.intervals(conv, gone, call.zone)
        by = {r.position: r.superseded_by for r in gone}
        out: list[PlanItem] = []
        for it in items:
            hit = [p for p in it.positions if p in by] if it.slice == "tail" and it.conversation_id == conv else []
            if hit and "superseded by #" not in it.reason:
                it = replace(it, reason=it.reason + "".join(
                    f"; #{p} superseded by #{by[p]} ({intervals[p][0]}): shown as it was said, not as a current value"
                    if len(it.positions) > 1 else
                    f"; superseded by #{by[p]} ({intervals[p][0]}): shown as it was said, not as a current value"
                    for p in hit))
            out.append(it)
        return out, set(by)

    def _fixed(self, call: _Call, truncate_latest: bool) -> _Fixed:
        """The caller's system message and the latest user message (truncated when it
        alone exceeds the budget and the caller allows it, else BudgetTooSmall)."""
        conv, budget, hot, system = call.conv, call.budget, call.hot, call.system
        fixed_msgs: list[dict[str, Any]] = []
        if system:
            fixed_msgs.append({"role": "system", "content": system})
        tail_rows = self.cold.tail_turns(conv, self.candidates.tail_scan(call.table, budget))
        top = tail_rows[-1].position if tail_rows else -1  # the newest row, hidden or not
        tail_msgs = {m.position: m for m in self.candidates.messages(conv, [r.position for r in tail_rows], hot)}
        # control rows (tiers.formats: a retraction, a clear) hide items from every slice
        # and are never sent themselves; a retraction can name an item long out of the tail
        hidden, cleared = hidden_positions(self.cold.control_rows([conv]).get(conv, []))
        # a supersession by a hidden turn (a popped correction) counts as absent for the
        # rest of this call: pins, retrieved lines, summary lines, statements
        self.statements.hide(conv, read_hidden(self.cold, conv, hidden))
        if hidden or cleared >= 0:
            tail_rows = [r for r in tail_rows if r.position > cleared and r.position not in hidden]
        latest_user = next((r.position for r in reversed(tail_rows) if r.role == "user"), None)
        if latest_user is None:  # older than the tail's rows: the newest one nothing hides
            latest_user = self.cold.latest_position(conv, "user", after=cleared, skip=hidden)
        if latest_user is not None and tail_rows:
            # the latest tool round longer than the scan (its outputs counted at their trim
            # allowance passed the budget): read back, twice the rows each time, until its
            # tool-call message is in, or its results would lose their call (left out as
            # orphans) and the round would never be shown; and the round before it, which
            # the plan names where it gives way. Not further: the older rounds of a long
            # loop give way to it (planner.pack fit_round), and reading them all would cost
            # each call of a long loop more. Positions are dense but for gaps, so `reach`
            # newest rows reach back to the user message
            lu = latest_user
            tail_rows = self._read_back(conv, hot, tail_rows, tail_msgs, tail_rows[-1].position - lu + 1,
                                        cleared, hidden,
                                        lambda rows: rows[0].position > lu and not _round_call_read(rows))
            # the latest user message the newest row, tool results right before it (the
            # results it came with: planner.pack `loop_after`): that round is the latest,
            # read back the same way until its call (the row before those results) is in,
            # and no further: never past the latest clear, whose rows are not active (the
            # round before it, which a clear leaves none of, read the whole log each call)
            tail_rows = self._read_back(conv, hot, tail_rows, tail_msgs, top - cleared, cleared, hidden,
                                        lambda rows: (rows[-1].position == lu and len(rows) > 1
                                                      and rows[-2].role == "tool" and not _results_call_read(rows)))
        if latest_user is not None and latest_user not in tail_msgs:
            tail_msgs.update({m.position: m for m in self.candidates.messages(conv, [latest_user], hot)})
        system_tokens = sum(message_tokens(self.tokens, m) for m in fixed_msgs)
        base = REPLY_PRIMING_TOKENS + system_tokens
        latest_body = (wire_body(tail_msgs[latest_user].body)
                       if latest_user is not None and latest_user in tail_msgs else None)
        self._refuse(budget, system_tokens, latest_body, truncate_latest, call.pending)
        latest_truncated = False
        if latest_body is not None and base + message_tokens(self.tokens, latest_body) > budget:
            # truncate_latest (else _refuse raised)
            latest_truncated = True
            least = message_tokens(self.tokens, {"role": "user", "content": ""}) + TRUNCATION_MARGIN_TOKENS + 1
            room = budget - base - least + 1
            ids = self.tokens.encode(message_text(latest_body))
            latest_body = {"role": "user", "content": self.tokens.decode(ids[:room])}
            while message_tokens(self.tokens, latest_body) + base > budget and room > 0:
                room -= 1
                latest_body = {"role": "user", "content": self.tokens.decode(ids[:room])}
        room = budget - base - (message_tokens(self.tokens, latest_body) if latest_body else 0)
        return _Fixed(fixed_msgs, tail_rows, tail_msgs, hidden, latest_user, latest_body, latest_truncated, room)

    def _read_back(self, conv: str, hot: HotView, rows: list[TurnRow], msgs: dict[int, StoredMessage],
                   reach: int, cleared: int, hidden: set[int],
                   more_needed: Callable[[list[TurnRow]], bool]) -> list[TurnRow]:
        """`_fixed`'s read-back of a tool round's call: while `more_needed(rows)` and fewer
        than `reach` rows were read, the newest rows again, twice as many each time, those
        after the latest clear and not hidden (`cleared`, `hidden`); the messages of the
        rows not read yet go into `msgs`. The rows as last read."""
        n = len(rows)
        while more_needed(rows) and n < reach:
            n = min(2 * n, reach)
            more = [r for r in self.cold.tail_turns(conv, n) if r.position > cleared and r.position not in hidden]
            msgs.update({m.position: m for m in self.candidates.messages(
                conv, [r.position for r in more if r.position not in msgs], hot)})
            rows = more
        return rows

    def _retrim(self, call: _Call, fixed: _Fixed, c: Candidate, limit: int,
                encoded: dict[int, list[int]] | None = None) -> Candidate:
        """Tail unit `c` anew, its tool outputs trimmed to `limit` tokens (at most the
        usual `tool_trim_tokens`): the latest round's fit (pack.Packing.fit_round), which
        tries several allowances: `encoded` keeps each output's tokens between tries."""
        msgs = [fixed.tail_msgs[p] for p in c.group]
        return self.candidates.unit(call.conv, msgs, min(limit, self.settings.tool_trim_tokens), c.reason,
                                    encoded)

    def _refuse(self, budget: int, system_tokens: int, latest_body: dict[str, Any] | None,
                truncate_latest: bool, pending: int = 0) -> None:
        """BudgetTooSmall when the fixed part cannot fit `budget` (the room: the budget given
        less the caller's `pending` tokens, which the error names as such, never the room as
        the budget): the system prompt (`system_tokens`), the reply priming and the latest
        user message (`latest_body`, its wire form; None: no user message), whole or, with
        `truncate_latest`, the least a truncated one takes. The error names each fixed part:
        a system prompt past the budget on its own is the caller's to shorten, and
        truncating cannot help it."""
        base = REPLY_PRIMING_TOKENS + system_tokens
        given = budget + pending
        if latest_body is None:
            if base > budget:
                raise BudgetTooSmall(given, base, system=system_tokens, priming=REPLY_PRIMING_TOKENS, pending=pending)
            return
        need = message_tokens(self.tokens, latest_body)
        if base + need <= budget:
            return
        least = message_tokens(self.tokens, {"role": "user", "content": ""}) + TRUNCATION_MARGIN_TOKENS + 1
        if not truncate_latest:  # `least`: the error suggests truncating only where it would fit
            raise BudgetTooSmall(given, base + need, system=system_tokens, priming=REPLY_PRIMING_TOKENS,
                                 latest=need, pending=pending, least_truncated=least)
        if budget - base - least + 1 < 1:
            raise BudgetTooSmall(given, base + least, truncated=True, system=system_tokens,
                                 priming=REPLY_PRIMING_TOKENS, latest=least, pending=pending)

    def refuse_unfit(self, conv: str, budget: int, *, system: str | None, truncate_latest: bool,
                     pending: int = 0) -> None:
        """The BudgetTooSmall `build` would raise, raised before the turn table is read (the
        first read of a conversation of long turns derives every turn's keywords and
        periods: seconds that a refusal need not pay). Callers ask only while the turn cache
        does not hold the conversation (`TurnCache.holds`): once it does, a read costs only
        the turns appended since, and the two reads here (~0.1 ms) would be paid on every
        call for nothing. Checked only where the latest user
        message's stored token count (the turn index's, taken when it was appended) says
        the fixed part may not fit; then the exact check, the very one `build` makes (the
        same message, hidden and cleared turns skipped, counted in its wire form). Where
        this check passes, `build` checks again on what it reads. `budget`: the room, the
        budget given less the caller's `pending` tokens (`build`'s `pending_tokens`)."""
        system_tokens = message_tokens(self.tokens, {"role": "system", "content": system}) if system else 0
        base = REPLY_PRIMING_TOKENS + system_tokens
        newest = self.cold.latest_position(conv, "user")
        if newest is None:  # no user message at all: the system prompt and the priming
            self._refuse(budget, system_tokens, None, truncate_latest, pending)
            return
        rows = self.cold.turns_at(conv, [newest])
        if rows and base + rows[0].tokens <= budget:
            return  # fits as far as the stored count tells: build decides on the message itself
        hidden, cleared = hidden_positions(self.cold.control_rows([conv]).get(conv, []))
        latest = (newest if newest > cleared and newest not in hidden
                  else self.cold.latest_position(conv, "user", after=cleared, skip=hidden))
        got = self.cold.get(conv, [latest]) if latest is not None else []
        self._refuse(budget, system_tokens, wire_body(got[0].body) if got else None, truncate_latest, pending)

    def _candidates(self, call: _Call, fixed: _Fixed) -> tuple[dict[str, list[Candidate]], dict[str, int]]:
        """Each slice's candidates, best first (the tail newest first), and each slice's
        cap in tokens; sets the plan's query class, retrieval mode and shares."""
        conv, query, plan, table = call.conv, call.query, call.plan, call.table
        latest_user, hidden, room = fixed.latest_user, fixed.hidden, fixed.room
        pinned = [c for c in self.candidates.pinned(conv, call.hot, plan, room, call.zone)
                  if c.position != latest_user and c.position not in hidden]
        tail = self.candidates.tail(conv, fixed.tail_rows, fixed.tail_msgs, latest_user, plan)
        taken_positions = ({latest_user} if latest_user is not None else set()) | hidden
        summary = self.candidates.summary(conv, call.summaries, hidden, plan, call.zone)
        lexical = self.candidates.lexical(conv, call.namespace, query, call.namespace_recall, table)
        call.mark("candidates")
        # The query is embedded here, on this thread. Embedding it on a worker while this
        # thread read the log measured slower on a 2-core machine (32.6 against 29.4 ms
        # p50 at 20k turns): the model and the reads contend for the GIL and for memory
        # bandwidth, so the overlap saved nothing and the handover cost.
        qvec: np.ndarray | None = None
        no_vector = ""  # why this query has no vector, when the model could not give one
        if query and query.strip() and self.embed is not None:
            try:
                qvec = self.embed([query_text.dense_text(query, table.names)])[0]
            except EmbeddingUnavailable as exc:  # a derived part: keyword ranking still answers
                plan.tiers["embedder"] = "degraded"
                # the error's type only: the plan goes to the tenant, the message names
                # the server's model path (the log and Memory.stats() keep it)
                no_vector = f"; keyword (BM25) ranking only, no query vector ({exc.error})"
        call.mark("embed")  # when the vector was there
        qclass = self.classifier.classify(query, query_vec=qvec, embed=self.embed)
        plan.query_class, plan.class_reason = qclass.name, qclass.reason
        plan.retrieval = ("none: no query" if not query or not query.strip()
                          else f"broad: a {qclass.name} turn needs the past, the best turns fill the room left"
                          if qclass.name in RECALL_CLASSES
                          else f"narrow: a {qclass.name} turn brings back only clearly related turns (cosine >= "
                               f"{STRONG_COSINE}) or turns of a period it names" if qvec is not None
                          else f"narrow: a {qclass.name} turn brings back only clearly related turns (a keyword "
                               f"match at least {STRONG_KEYWORD_SHARE} of the best one's) or turns of a period it names")
        tells = qclass.name not in NEEDS_ROOM_CLASSES and (tells_only(query) or qclass.tail_answers)
        if tells:
            plan.retrieval = (f"none: a {qclass.name} turn that asks nothing and points to nothing said before "
                              "(a remark, a request): the stable layers and the tail carry it" if not qclass.tail_answers
                              else f"none: a {qclass.name} turn about what was just said: the tail answers it")
        if not tells and query and query.strip() and not (call.namespace_recall and self.settings.namespace_recall):
            # said, or a reader takes "nothing from another session" for "nothing matched
            # there" (the LangGraph adapters turn it off for a conversation per thread id);
            # before `no_vector`, whose error type ends the retrieval line
            plan.retrieval += "; this conversation only: namespace recall is off for this call"
        plan.retrieval += no_vector
        # the stable layers are sized by the budget alone, whatever the class or this
        # turn's message: what a class needs more of goes into the per-turn part
        layers = self.settings.layers
        caps = {s: int(call.budget * layers[s]) for s in STABLE_SLICES}
        if qclass.name in NEEDS_ROOM_CLASSES:  # all the room left (Packing.fill's leftovers)
            caps["retrieved"] = int(room * RECALL_FIRST_PASS_SHARE.get(qclass.name, 1.0))
        else:
            shares = self.settings.shares.get(qclass.name) or self.settings.shares["default"]
            caps["retrieved"] = min(int(room * shares["retrieved"]), int(call.budget * NARROW_RETRIEVED_SHARE))
        plan.shares = dict(caps)
        retrieved = [] if tells else self.candidates.retrieved(
            conv, call.namespace, query, qvec, qclass.name, room, exclude=taken_positions, lexical=lexical,
            table=table, zone=call.zone)
        call.mark("retrieve")
        return {"pinned": pinned, "summary": summary, "retrieved": retrieved, "tail": tail}, caps

    def _block_headers(self) -> dict[str, int]:
        """What each slice's first line costs on top of itself: its block's header (the
        tail has none: its turns are messages of their own)."""
        header = {s: self.render.block_header_tokens(s) for s in BLOCK_SLICES}
        header["tail"] = 0
        return header

    def _fit(self, call: _Call, fixed: _Fixed, packing: Packing, limit: int | None = None
             ) -> tuple[list[dict[str, Any]], list[str], list[int | None], int]:
        """Render, count exactly, drop lowest-value items until it fits (`limit`, default
        the budget); then top up the retrieved slice with what the exact count left over.
        The messages, their layers, their log positions (None for blocks) and the exact total."""
        budget, plan, render = (call.budget if limit is None else limit), call.plan, self.render
        chosen = packing.chosen
        while True:
            messages, kinds, where = render.render(fixed.messages, chosen, fixed.latest_body, fixed.latest_user)
            total = messages_tokens(self.tokens, render.out(messages))
            if total <= budget - self._opening_room(packing, messages):
                break
            if not packing.drop_one(plan):
                pending = call.pending if limit is None else 0  # the room is the budget given less them
                # the latest tool round (never dropped: pack.Packing.drop_one; older rounds
                # were) named as the part that does not fit, where it is shown
                round_ = packing.round_units()
                raise BudgetTooSmall(budget + pending, total, truncated=fixed.latest_truncated, pending=pending,
                                     system=sum(message_tokens(self.tokens, m) for m in fixed.messages),
                                     priming=REPLY_PRIMING_TOKENS,
                                     latest=None if fixed.latest_body is None
                                     else message_tokens(self.tokens, fixed.latest_body),
                                     round_tokens=sum(c.tokens for c in round_) if round_ else None,
                                     round_trim=packing.round_trim if round_ else None)
        # packing estimated a shared session heading per line; what the exact count left
        # over goes to the next retrieved candidates, as long as the exact count still
        # fits (only retrieved: it sits last, so the slack, which varies from turn to
        # turn, never changes the cacheable prefix)
        budget -= self._opening_room(packing, messages)
        for _ in range(TOP_UP_ROUNDS if plan.query_class in NEEDS_ROOM_CLASSES else 0):
            added = packing.top_up(["retrieved"], budget - total)
            if not added:
                break
            more, more_kinds, more_where = render.render(fixed.messages, chosen, fixed.latest_body, fixed.latest_user)
            more_total = messages_tokens(self.tokens, render.out(more))
            if more_total > budget:
                for s, c in added:
                    chosen[s].remove(c)
                break
            messages, kinds, where, total = more, more_kinds, more_where, more_total
        return messages, kinds, where, total

    def _opening_room(self, packing: Packing, messages: list[dict[str, Any]]) -> int:
        """The room kept for the opening user message Anthropic's form adds before a
        context whose first turn is the assistant's (adapters.anthropic `opening_tokens`),
        where the round the question came after (pack `loop_after`) is shown and opens
        the context (the older tail gave way to it): 0 elsewhere, so every other context
        is as before."""
        if packing.loop_after == packing.latest_user or not packing.round_units():
            return 0
        # the role as the turn index reads it: a Responses item (`function_call`, no role)
        # is the model's turn, a developer message a system one (Anthropic lifts it out)
        first = next((m for m in messages if canonical_role(m) != "system"), None)
        if first is None or canonical_role(first) != "assistant":
            return 0
        return self._opening_tokens()

    def _opening_tokens(self) -> int:
        from tiermem.adapters.anthropic import CONTINUED_TEXT  # the adapter imports the planner
        return message_tokens(self.tokens, {"role": "user", "content": CONTINUED_TEXT})

    def _fill_as_sent(self, call: _Call, fixed: _Fixed, packing: Packing, held_back: frozenset[int],
                      fitted: tuple[list[dict[str, Any]], list[str], list[int | None], int]
                      ) -> tuple[list[dict[str, Any]], list[str], list[int | None], int]:
        """A conversion's context planned anew, filled to EPOCH_START_FILL_SHARE of the
        budget as sent: packing fills on the stored form, and a conversion that sends less
        (a Responses input message carries no `name`: LoCoMo's named turns lost about 7%)
        left an epoch start under the providers' 1,024-token minimum (994 of 2,000 sent),
        so the epoch's second call read nothing back. Grows the tail by the shortfall
        scaled to stored tokens and counts again; `fitted` (`_fit`'s answer) when there is
        no shortfall or nothing more grows (the fill stopped for its own reasons)."""
        messages, _, _, total = fitted
        want = int(call.budget * EPOCH_START_FILL_SHARE)
        stored = messages_tokens(self.tokens, messages)
        if total >= want or stored <= total:
            return fitted
        grown = len(packing.chosen["tail"])
        packing.grow_tail(-(-(want - total) * stored // total), held_back)
        if len(packing.chosen["tail"]) == grown:
            return fitted
        return self._fit(call, fixed, packing)

    def _fill_cacheable(self, call: _Call, fixed: _Fixed, packing: Packing, held_back: frozenset[int],
                        fitted: tuple[list[dict[str, Any]], list[str], list[int | None], int]
                        ) -> tuple[list[dict[str, Any]], list[str], list[int | None], int]:
        """A session resumed after the cache expired (`_resumed`), filled until its request
        as rendered (planner.cache_rules.rendered_length: what a provider caches, which
        the stored count only estimates) reaches CACHEABLE_MIN_TOKENS: the tail grows by
        the shortfall, the unit that crosses it included, and is counted again (at most
        FILL_CACHEABLE_ROUNDS times; `fitted` as it is when nothing more grows)."""
        for _ in range(FILL_CACHEABLE_ROUNDS):
            short = self._min_prefix() - sum(rendered_length(self.tokens, m) for m in self.render.out(fitted[0]))
            if short <= 0:
                break
            grown = len(packing.chosen["tail"])
            packing.grow_tail(short, held_back, size=self._cached_size)
            if len(packing.chosen["tail"]) == grown:
                break
            fitted = self._fit(call, fixed, packing)
        return fitted

    def _min_prefix(self) -> int:
        """The configured minimum cacheable prefix (the default rules' when none): a resumed
        session's fill reaches it (`_resumed` holds only with one), a middle eviction's head too."""
        return self.settings.cache_min_prefix or CACHEABLE_MIN_TOKENS

    def _cached_size(self, c: Candidate) -> int:
        """A packed unit's tokens as a provider caches them (rendered), its stored count
        for a block line without messages of its own."""
        body = c.body
        return sum(rendered_length(self.tokens, m) for m in body["messages"]) if body else c.tokens

    def _items(self, call: _Call, fixed: _Fixed, packing: Packing) -> tuple[list[PlanItem], PlanItem | None]:
        """The plan's items in slice order, and the latest user message's."""
        conv, latest_user, latest_body = call.conv, fixed.latest_user, fixed.latest_body
        items: list[PlanItem] = []
        if call.system:
            items.append(PlanItem("system", conv, [], "caller", "verbatim",
                                  message_tokens(self.tokens, fixed.messages[0]), ALWAYS_KEPT_SCORE,
                                  "system prompt from the caller"))
        for s in PACKED_SLICES:
            for c in packing.chosen[s]:
                items.append(c.item())
        latest_item: PlanItem | None = None
        if latest_body is not None and latest_user is not None:
            fid = "verbatim" if latest_body == wire_body(fixed.tail_msgs[latest_user].body) else "trimmed"
            latest_item = PlanItem("tail", conv, [latest_user], tier_of(latest_user, call.hot), fid,
                                   message_tokens(self.tokens, latest_body), ALWAYS_KEPT_SCORE,
                                   "the latest user message is always kept")
            items.append(latest_item)
        return items, latest_item

    @staticmethod
    def _epoch_key(call: _Call) -> EpochKey:
        """What must not change for a context to extend the previous one."""
        table = call.table
        return EpochKey(call.budget + call.pending, call.system or "",
                        (int(table.positions[0]), float(table.created[0])) if len(table) else None,
                        bool(call.namespace_recall), call.timezone)

    def _previous(self, conv: str) -> tuple[EpochState | None, str]:
        """The previous call's state if it was built from this log, and why not otherwise
        ("" when the store does not know). One index seek: the log turn at the state's
        `read_position` must be the very append it read (tiers.keys.turn_fingerprint),
        else the state is of another timeline (a backup restored) and shows turns the log
        no longer holds, or leaves out ones it does."""
        found = self._epochs.lookup(conv)
        prev = found.state
        if prev is None or prev.read_position < 0:
            return prev, found.why_none
        rows = self.cold.turns_at(conv, [prev.read_position])
        if not rows or turn_fingerprint(rows[0].content_hash, rows[0].created_at) != prev.read_tip:
            return None, (f"the previous context was built from another timeline of the log (its turn "
                          f"#{prev.read_position} is not the log's: a backup was restored)")
        return prev, ""

    def _memory_last_start(self, call: _Call, fixed: _Fixed, key: EpochKey) -> int | None:
        """Under `system_messages="before_latest"` (no epochs): where the previous call's
        turns began, when it was planned under the same key (budget, system prompt,
        incarnation) and the provider's cache may still hold them (`_expired`, as an epoch
        of the default layout), so this call can keep them as they were and only append."""
        conv, prev = call.conv, call.prev
        if self.settings.system_messages != "before_latest":
            return None
        if prev is None or key_change(prev.key, key) or self._expired(prev, call, fixed):
            return None
        starts = [p for g in prev.segments if g.kind in ("tail", "latest") for it in g.items
                  if it.conversation_id == conv for p in it.positions]
        return min(starts) if starts else None

    @staticmethod
    def _tail_kept(kept_from: int, fixed: _Fixed, packing: Packing) -> bool:
        """Under before_latest, whether this call sends the previous call's turns from
        `kept_from` as it sent them (the kept tail, none of it dropped to fit): a tail that
        starts there; or, where `kept_from` is still the latest user message with nothing
        after it (the previous call showed no turn before it), a tail of no turn again.
        It was reported as a new epoch ("epochs are off") though the same turns were sent."""
        tail = packing.chosen["tail"]
        if packing.kept_units is None or len(tail) != packing.kept_units:
            return False
        if packing.kept_units == 0:
            return kept_from == fixed.latest_user
        return min(c.position for c in tail) == kept_from

    def _epoch(self, call: _Call, fixed: _Fixed, packing: Packing, fresh: list[Segment], total: int,
               latest_item: PlanItem | None) -> tuple[list[Segment], int]:
        """The epoch: extend the previous context when it can, else this one (`fresh`,
        `total` tokens) starts a new one. Reports it in `plan.cache` and the stable
        prefix's ends in `plan.breakpoints`; keeps the context for the next call."""
        conv, plan, latest_user = call.conv, call.plan, fixed.latest_user
        chosen = packing.chosen
        segments = fresh
        key = self._epoch_key(call)
        prev = call.prev
        why_new = ((call.prev_why or "no previous context of this conversation is kept (its first, or the state "
                    "expired or was lost: a restart or another process without a shared Redis)") if prev is None
                   else key_change(prev.key, key))
        ext: _Extension | None = None
        # a new user message since the previous call (not another query on the same log):
        # a new epoch then leaves room for the next calls (planner.epoch_policy)
        moved_on = (prev is not None and latest_user is not None and prev.latest_user is not None
                    and latest_user != prev.latest_user and self.settings.epochs
                    and self.settings.retrieved_placement == "before_latest"
                    and self.settings.system_messages != "before_latest")
        excess = total - (call.budget - epoch_policy.reserve_tokens(call.budget)) if moved_on else 0
        if prev is not None and not why_new:
            why_new = self._shown_gone(conv, prev, fixed.hidden)
        if prev is not None and not why_new:
            if self.settings.system_messages == "before_latest":
                # the memory message is rebuilt every call: it keeps its own tail start
                # (_memory_last_start) instead of an epoch
                why_new = ('epochs are off (system_messages="before_latest" moves the memory blocks before the '
                           "latest user message)")
            elif self.settings.epochs and self.settings.retrieved_placement == "before_latest":
                why_new = self._expired(prev, call, fixed)
                if not why_new:
                    ext, why_new = self._extend(prev, call, fixed, packing, latest_item, excess if moved_on else None)
                if ext is not None and self.render.converting():
                    ext, why_new = self._converted(prev, ext, call.budget)
            else:
                why_new = "epochs are off (context_epochs=false or retrieved turns before the tail)"
        kept_from = call.kept_from
        if ext is not None and prev is not None:
            segments, total = ext.segments, ext.total
            plan.cache = CacheReport(prev.epoch, prev.calls + 1, False, ext.reason)
        elif prev is not None and kept_from is not None and self._tail_kept(kept_from, fixed, packing):
            plan.cache = CacheReport(prev.epoch, prev.calls + 1, False,
                                     f"before_latest: the turns from #{kept_from} are kept as the previous call "
                                     "sent them and grow by appends; the memory message is rebuilt")
        else:
            expired = (self._expired(prev, call, fixed) if prev is not None and kept_from is None
                       and self.settings.system_messages == "before_latest" and not key_change(prev.key, key)
                       else "")
            if expired:
                # before_latest: the previous call's turns were not kept as the cache has
                # expired (_memory_last_start), the default layout's reason
                why_new = expired
            elif prev is not None and kept_from is not None and not key_change(prev.key, key):
                # before_latest: the previous call's turns were not kept (the generic "epochs
                # are off" said nothing of it); say why and where the turns start now
                starts = [c.position for c in chosen["tail"]]
                miss = packing.kept_miss or (f"the turns from #{kept_from} were not all sent again (dropped "
                                             "to meet the exact budget, or the tail was chosen anew)")
                why_new = ("before_latest: the tail starts anew"
                           + (f" at #{min(starts)}" if starts else " (no turn fits)") + f": {miss}")
            plan.cache = CacheReport((prev.epoch + 1) if prev else 1, 1, True, why_new)
            if excess > 0:
                segments, total = self._leave_room(call, fixed, packing, excess, segments, total)
        messages = [g.message for g in segments]
        kinds = [g.kind for g in segments]
        items = [it for g in segments for it in g.items]
        tokens_each = [message_tokens(self.tokens, m) for m in messages]
        late_tokens = sum(t for k, t in zip(kinds, tokens_each, strict=True) if k == late_pins.KIND)
        if prev is not None and not self.render.converting():  # converted: `build` compares what was sent
            k = 0
            for a, b in zip(prev.segments, segments, strict=False):
                if a.message != b.message:
                    break
                k += 1
            plan.cache.prefix_messages = k
            plan.cache.expected_cached_tokens = sum(tokens_each[:k])
            # the layer of the previous context where it stops being reused ("" when all of it is)
            plan.cache.boundary = prev.segments[k].kind if k < len(prev.segments) else ""
        # a context that left room for appends (a new epoch's reserve) or extends one on a
        # new user message is likely the next call's prefix: its end is marked too
        plan.breakpoints = breakpoints(kinds, tokens_each, whole=excess > 0 or (moved_on and ext is not None))
        head = middle.kept_head(ext.head, prev.segments, prev.head, segments) if ext and prev else 0
        if head > 1 and kinds[head - 1] == late_pins.KIND:
            # the head ends with late pins: its bare part is marked too, so a restart whose
            # late pins changed still reads the head an earlier request wrote
            plan.breakpoints = middle.with_head(plan.breakpoints, head - 1, tokens_each)
            plan.breakpoints = middle.with_head(plan.breakpoints, head, tokens_each, late_pins.KIND)
        else:
            plan.breakpoints = middle.with_head(plan.breakpoints, head, tokens_each)
        if head and total - late_tokens > middle.MIDDLE_CAP_SHARE * call.budget:
            # past the cap the next call on a new user message evicts to the head: what
            # follows it would not be read back, and marking it would pay a cache write
            plan.breakpoints = [b for b in plan.breakpoints if b.index < head]
        last_shown = max([p for it in items if it.slice == "tail" for p in it.positions], default=-1)
        read_position = max(last_shown, fixed.tail_rows[-1].position if fixed.tail_rows else -1)
        cached = self._provider_cached(call, fixed, [g.message for g in segments], plan)
        if call.record:  # a what-if plan leaves the epoch as the agent's last call left it
            self._epochs.put(conv, EpochState(
                key, plan.cache.epoch, plan.cache.epoch_calls, tuple(segments),
                prev.pinned | late_pins.positions(segments) if ext is not None and prev is not None
                else frozenset(p for c in chosen["pinned"] if c.current for p in (c.group or [c.position])),
                prev.summary_lines if ext is not None and prev is not None
                else frozenset(c.text for c in chosen["summary"]),
                last_shown, read_position,
                latest_user if fixed.latest_body is not None else None, fixed.latest_truncated, head=head,
                late_paid=(prev.late_paid if ext is not None and prev is not None else 0)
                + late_tokens, read_tip=self._tip(conv, fixed.tail_rows, read_position),
                at=self._clock(prev, call, fixed), cached=cached))
        return segments, total

    def _resumed(self, call: _Call, fixed: _Fixed) -> bool:
        """Whether this call starts an epoch because the provider's cache has expired
        since the previous one (`_expired`), under the layout that keeps epochs (the
        default): every token of it is billed in full, whatever its size. Only where the
        provider's minimum cacheable prefix is configured (`cache_min_prefix`: filled past
        a guessed 1,024, a 2,048-token model caches nothing) and the budget holds it with
        a new epoch's reserve for appends (epoch_policy.reserve_tokens: filled to the
        whole room, the next call would start another epoch); else filled as any start."""
        need = self.settings.cache_min_prefix
        if need is None or need + epoch_policy.reserve_tokens(call.budget) > call.budget:
            return False
        return (call.prev is not None and self.settings.epochs
                and self.settings.retrieved_placement == "before_latest"
                and self.settings.system_messages != "before_latest"
                and bool(self._expired(call.prev, call, fixed)))

    @staticmethod
    def _log_time(call: _Call, fixed: _Fixed) -> float | None:
        """This call's time by the log's clock: the latest created_at of the messages it
        read (None when it read none); the latest, not the newest by position, as one
        message may be stamped by another clock (an import, a client's). A replay stamps
        its messages as they were said; in production it is about now. A stamp more than
        MAX_STAMP_AHEAD_S ahead of the wall clock at this call (`call.wall`) counts as that
        wall clock: the call's own time, the best known of when the message was read, so
        one far-future stamp moves the clock no further than now and a later real gap
        past the TTL is still seen."""
        ahead = call.wall + MAX_STAMP_AHEAD_S
        return max((t if t <= ahead else call.wall for t in (float(r.created_at) for r in fixed.tail_rows)),
                   default=None)

    @classmethod
    def _clock(cls, prev: EpochState | None, call: _Call, fixed: _Fixed) -> float | None:
        """The epoch clock after this call (EpochState.at): the later of the previous
        call's and this call's log time. It never goes backwards: a message stamped behind
        (a backdated import, a client clock behind the server's, a server stamp after a
        client's ahead of it) is assumed warm and must not pull the clock back, or the next
        call stamped normally would look like a gap past the TTL and restart the epoch at
        every such step. A skewed clock then costs one new epoch at most (its first step
        ahead), and holds the clock ahead by MAX_STAMP_AHEAD_S at most: a stamp further
        ahead of the wall clock moves it only to the call's wall clock (`_log_time`)."""
        now = cls._log_time(call, fixed)
        if prev is None or prev.at is None:
            return now
        return prev.at if now is None else max(prev.at, now)

    def _expired(self, prev: EpochState, call: _Call, fixed: _Fixed) -> str:
        """Why `prev` is not worth extending because the provider's prompt cache cannot hold
        it any more ("" when it may): this call comes more than `cache_ttl_s` after the
        previous one, by the log's clock (`_log_time` against the epoch clock `prev.at`,
        which never goes backwards: `_clock`), so every token of an extension is a miss,
        and a new epoch costs nothing more and is smaller and fresher (it starts filled to
        EPOCH_START_FILL_SHARE, a long-running one sits near its cap). Unknown times (a
        state written before they were kept, a call that read no turn) and times behind the
        clock assume the cache is warm. A call with no new message (a retry) measures no
        gap: the log's clock has not moved."""
        ttl = self.settings.cache_ttl_s
        now = self._log_time(call, fixed)
        if not ttl or now is None or prev.at is None:
            return ""
        gap = now - prev.at
        if gap <= ttl:
            return ""
        return (f"the provider's cache has expired ({gap:,.0f} s since the previous call > "
                f"cache_ttl_s = {ttl:,.0f} s)")

    def _provider_cached(self, call: _Call, fixed: _Fixed, messages: list[dict[str, Any]],
                         plan: Plan) -> tuple[tuple[int, float | None], ...]:
        """`plan.cache`'s tokens each provider is expected to serve from its prompt cache for
        this request (`messages` as planned, `plan.breakpoints` in them; both as returned
        once converted) against the previous call's (`openai_cached_tokens`,
        `anthropic_cached_tokens`), by the rules the cost replay bills by
        (planner.cache_rules.PROVIDERS): the requests' longest common rendered-token
        prefix, none past a provider's TTL by the log's clock (`_log_time`; the epoch
        clock `prev.at` for the previous request, EpochState.cached's times for
        Anthropic's prefixes); OpenAI's from its minimum in its steps, Anthropic's the
        longest prefix it holds (written at a breakpoint of the previous request, or of an
        earlier one and shared since: EpochState.cached) that this request reads back.
        Returns the prefixes Anthropic holds after this request, for the next call. Only
        prefixes of the previous request are looked at (a provider may hold an older
        request's that shares more: after a rewind)."""
        prev = call.prev
        now = self._log_time(call, fixed)
        returned = self.render.out(messages)
        marks_at = [b.index for b in plan.breakpoints]
        if returned != messages:  # converted: the marks as they land in the request returned
            marks_at = [b.index for b in converted_breakpoints(plan.breakpoints, messages, returned, self.render.out,
                                                               self.tokens)]
        openai, anthropic = PROVIDERS["openai"], PROVIDERS["anthropic"]
        ends = np.cumsum([rendered_length(self.tokens, m) for m in returned]).tolist()
        marks = anthropic_marks(anthropic, ends, marks_at)
        held: dict[int, float | None] = {}
        if prev is not None:
            lcp = request_lcp(self.tokens, self.render.out([g.message for g in prev.segments]), returned)
            if alive(openai, prev.at, now):
                n = (ends[-1] if ends else 0) + len(priming(self.tokens))
                plan.cache.openai_cached_tokens = openai_cached(openai, lcp, n)
            # what the provider holds of this request: the prefixes it shares, still alive
            held = {n: t for n, t in prev.cached if n <= lcp and alive(anthropic, t, now)}
            read = max((n for n in held if anthropic_readable(anthropic, n, lcp, ends, marks)), default=0)
            plan.cache.anthropic_cached_tokens = read
            if read:
                held[read] = now  # a read refreshes it
        held.update(dict.fromkeys(marks, now))  # what this request writes
        return tuple(sorted(held.items())[-MAX_CACHED_PREFIXES:])

    def _tip(self, conv: str, rows: Sequence[TurnRow], position: int) -> str:
        """The log's fingerprint of the turn at `position` ("" for none), from the rows this
        call read when they hold it (they do: it is the newest tail row or before it)."""
        if position < 0:
            return ""
        row = next((r for r in reversed(rows) if r.position == position), None)
        if row is None:
            found = self.cold.turns_at(conv, [position])
            row = found[0] if found else None
        return turn_fingerprint(row.content_hash, row.created_at) if row is not None else ""

    def _shown_gone(self, conv: str, prev: EpochState, hidden: set[int]) -> str:
        """Why `prev` must not be extended because it shows what may no longer be sent
        ("" when it need not end): an item a control row hides now (a pop after the
        context showed it: `hidden`, this conversation's), or turns of another
        conversation (namespace recall) that was erased or pruned, or whose control
        rows hide them now, or that it showed as current and that conversation
        superseded since, or showed marked and that are current again (`_others_superseded`).
        Whichever process erased or retracted."""
        # every item, not `shown()`'s verbatim turns: a summary line or an excerpt drawn
        # from a retracted item repeats its text too
        showed = {(it.conversation_id, p) for g in prev.segments for it in g.items for p in it.positions}
        retracted = {p for c, p in showed if c == conv} & hidden
        if retracted:
            # an edit retracts too (the LangChain adapters': the edited item and those after
            # it, appended again after its new version), and the context shows the old text
            return (f"{len(retracted)} item(s) it showed were retracted since "
                    "(popped, or edited: a new version replaced it)")
        others = sorted({c for c, _p in showed if c != conv})
        if not others:
            return ""
        live = self.cold.names_of(others)
        gone = [k for k in others if k not in live]
        if gone:
            return f"{len(gone)} other conversation(s) it showed turns of were erased or pruned"
        hidden_there = {c: hidden_positions(rows)[0] for c, rows in self.cold.control_rows(others).items()}
        hid = sum(1 for c, ps in hidden_there.items() for p in ps if (c, p) in showed)
        if hid:
            return f"{hid} item(s) of other conversations it showed were retracted since"
        return self._others_superseded(conv, prev, hidden_there, live)

    def _others_superseded(self, conv: str, prev: EpochState, hidden: Mapping[str, set[int]],
                           names: Mapping[str, str]) -> str:
        """Why `prev` must not be extended ("" when it need not end): a turn of another
        conversation it retrieved (namespace recall) that it showed as current and that
        conversation superseded since (a rebuild marks it), or that it showed marked and
        is current again (its correction popped: `hidden`, what each one's control rows
        hide now), as for this conversation's retrieved turns (`_extend`); `names`: their
        ids, by key (the reason names a conversation so, never by its key). One read of
        the turn rows for every conversation (tiers.store `turns_at_many`)."""
        shown: dict[tuple[str, int], bool] = {}  # (key, position) -> shown marked superseded
        for g in prev.segments:
            if g.kind == "retrieved":
                for it in g.items:
                    if it.conversation_id != conv:
                        shown.update({(it.conversation_id, p): ", superseded by #" in it.reason for p in it.positions})
        if not shown:
            return ""
        hid_keys = [(c, p) for c, ps in hidden.items() for p in sorted(ps)]
        rows = {(r.conversation_id, r.position): r for r in self.cold.turns_at_many([*shown, *hid_keys])}
        hid = hidden_many(self.cold, hidden, rows, shown)
        for key, marked in shown.items():
            r = rows.get(key)
            if r is None:
                continue  # not indexed (salvaged): shown as it was
            gone = (hid[key[0]].row(r) if key[0] in hid else r).superseded_by is not None
            if gone and not marked:
                return f"a shown turn of another conversation was superseded there since: #{key[1]} of {names.get(key[0])}"
            if marked and not gone:
                return ("a shown turn of another conversation marked superseded is current again "
                        f"(its correction was popped): #{key[1]} of {names.get(key[0])}")
        return ""

    def _leave_room(self, call: _Call, fixed: _Fixed, packing: Packing, excess: int, segments: list[Segment],
                    total: int) -> tuple[list[Segment], int]:
        """A new epoch on a new user message (`segments`, `total` tokens), less its
        lowest-scored retrieved turns that free `excess` tokens, so the next calls can
        append (planner.epoch_policy). A turn much larger than what is still to free is
        not dropped for it: a trimmed tool output is trimmed further by that much
        (`_shortened`), another stays when fewer tokens of the next lowest-scored turns
        free it (epoch_policy.give_way). Only retrieved turns give way: when they are
        not enough, the context keeps what the stable layers hold."""
        chosen = packing.chosen["retrieved"]
        refused: set[tuple[str, int]] = set()  # shortenable by their line, not by their text
        while True:
            way = epoch_policy.give_way(chosen, excess, lambda c: _retrimmable(c) and _key(c) not in refused)
            short = self._shortened(call, way.shorten, way.by) if way.shorten is not None else None
            if way.shorten is None or short is not None:
                break
            refused.add(_key(way.shorten))
        if not way.gone and short is None:
            return segments, total
        for c in way.gone:
            chosen.remove(c)
        packing.pools["retrieved"] = epoch_policy.ranked(packing.pools["retrieved"], way.gone)
        freed = sum(c.tokens for c in way.gone)
        if way.shorten is not None and short is not None:
            chosen[chosen.index(way.shorten)] = short
            freed += way.shorten.tokens - short.tokens
        reserve = epoch_policy.reserve_tokens(call.budget)
        # the limit never asks more of the exact count than the retrieved turns freed
        limit = max(call.budget - reserve, total - freed)
        if way.shorten is not None and short is not None:
            # packing's count is an estimate (a heading shared by the lines left out stays):
            # what the exact count is still over comes off the shortened turn too, or the
            # fit would drop the lowest-scored turn left, this one, whole
            for _ in range(RETRIM_ROUNDS):
                messages, _kinds, _where = self.render.render(fixed.messages, packing.chosen, fixed.latest_body,
                                                              fixed.latest_user)
                over = messages_tokens(self.tokens, self.render.out(messages)) - limit
                again = self._shortened(call, way.shorten, way.shorten.tokens - short.tokens + over) if over > 0 else None
                if again is None:
                    break
                chosen[chosen.index(short)] = short = again
        messages, kinds, where, total = self._fit(call, fixed, packing, limit=limit)
        what = [f"{len(way.gone)} lowest-scored turn(s) left out"] if way.gone else []
        if way.shorten is not None and short is not None and short in chosen:
            what.append(f"a low-scored turn, #{way.shorten.position} (a tool output, {way.shorten.tokens} "
                        f"tokens), trimmed further to {short.tokens} instead of left out")
        call.plan.retrieval += (f"; a new epoch on a new user message: {' and '.join(what)} "
                                f"so {reserve} tokens stay free for the next calls to append")
        items, latest_item = self._items(call, fixed, packing)
        return fresh_segments(messages, kinds, where, items, latest_item), total

    def _shortened(self, call: _Call, c: Candidate, by: int) -> Candidate | None:
        """`c` (a retrieved tool output's line, trimmed) trimmed further, at least `by`
        tokens shorter as packed, through the Renderer's trim of the turn's text; None
        when its text no longer renders as its line (a label, another reader's form) or
        no allowance gets it that short."""
        found = self.cold.get(c.conversation_id, [c.position])
        if not found:
            return None
        m = found[0]
        allowance = self.settings.tool_trim_tokens
        if self.render.line(m, dated=False, zone=call.zone, trim_to=allowance) != (c.text, True):
            return None
        want = c.tokens - by
        allowance -= by
        for _ in range(RETRIM_ROUNDS):
            if allowance <= 0:
                return None
            line, _trimmed = self.render.line(m, dated=False, zone=call.zone, trim_to=allowance)
            cost = self.render.line_tokens(line) + HEADING_SHARE_TOKENS  # as packing counts a line
            if cost <= want:
                return replace(c, text=line, tokens=cost, reason=(
                    f"{c.reason}; trimmed further ({c.tokens} -> {cost} tokens) so a new epoch's reserve "
                    "stays free: a large turn is not left out for a few tokens"))
            allowance -= cost - want  # decode and encode again may merge or split a token
        return None

    def _extend(self, prev: EpochState, call: _Call, fixed: _Fixed, packing: Packing,
                latest_item: PlanItem | None, excess: int | None = None) -> tuple[_Extension | None, str]:
        """The previous context extended by what arrived since and what this query needs
        that it does not show, or None and why a new epoch starts.

        When the room left cannot hold that, the retrieved blocks of earlier calls give
        way, newest first (the prefix before them stays cached), before an epoch ends;
        the log turns shown stay, so the context keeps growing only by appends.

        `excess` (a new user message): what a new epoch would leave out for its reserve;
        then the extension also goes on when it shows enough of what a new epoch would
        (planner.epoch_policy: by the weight of this call's ranked turns it shows)."""
        conv, budget = call.conv, call.budget
        # the query's retrieved turns, without this packing's marks: an extension marks
        # only what its kept context does not (below)
        chosen, pin_current, summary_current = marks.without(packing.chosen), packing.pin_current, packing.summary_current
        tail_rows, tail_msgs = fixed.tail_rows, fixed.tail_msgs
        latest_user, latest_body, latest_truncated = fixed.latest_user, fixed.latest_body, fixed.latest_truncated
        if latest_user is None or latest_body is None or latest_item is None or prev.latest_user is None:
            return None, "no latest user message to extend after"
        if latest_truncated or prev.latest_truncated:
            return None, "the latest user message had to be truncated"
        at = next((i for i, g in enumerate(prev.segments) if g.kind == "latest"), None)
        if at is None:
            return None, "the previous context has no user message to extend after"
        if latest_user < prev.latest_user or (tail_rows and tail_rows[-1].position < prev.last_position):
            return None, "the log no longer extends the previous context"
        gone = prev.pinned - pin_current
        if gone:
            return None, f"pin changed: #{min(gone)} is no longer a current pin"
        if prev.summary_lines - summary_current:
            return None, "summary view refreshed: a shown line is no longer in it"
        retrieved_here = sorted({p for g in prev.segments if g.kind == "retrieved" for it in g.items
                                 if it.conversation_id == conv for p in it.positions})
        if retrieved_here:
            hid = self.statements.hidden(conv)
            gone_by = [r.position for r in self.cold.turns_at(conv, retrieved_here)
                       if hid.row(r).superseded_by is not None]
            marked = {p for g in prev.segments if g.kind == "retrieved" for it in g.items
                      if "superseded by" in it.reason for p in it.positions}
            late = [p for p in gone_by if p not in marked]
            if late:
                # shown before its correction arrived, unmarked: a rebuild marks it
                return None, f"a shown turn was superseded since: #{late[0]}"
            marked_here = {p for g in prev.segments if g.kind == "retrieved" for it in g.items
                           if it.conversation_id == conv and ", superseded by #" in it.reason for p in it.positions}
            revived = sorted(marked_here - set(gone_by))
            if revived:
                # shown marked superseded, and the correction was popped since: current again
                return None, f"a shown turn marked superseded is current again (its correction was popped): #{revived[0]}"
        # a shown turn of which a statement was superseded since (planner/statements.py);
        # the previous user message is a raw tail turn now, followed by what corrects it,
        # as a rebuild's tail would show it (planner.epoch.RAW_KINDS). A turn shown by a
        # mark alone is shown raw: a new mark follows (planner.marks.for_segments)
        shown_lines = {p for g in prev.segments if g.kind not in RAW_KINDS for it in g.items
                       if it.conversation_id == conv and not marks.is_mark(it) for p in it.positions} | set(prev.pinned)
        part_late = sorted(p for p in shown_lines
                           if any(x.by > prev.read_position for x in self.statements.parts(conv, p)))
        if part_late:
            return None, f"a shown turn was superseded in part since: #{part_late[0]}"
        # what arrived since the previous call read the log; a turn it left out for room is
        # not new (appending it would change an unchanged call's context, and when it does
        # not fit, rewind or end the epoch, whose rebuild leaves it out again: the same
        # call alternating between two contexts); once something new arrives, it is
        # appended too, so the raw tail stays contiguous (planner.epoch)
        anything_new = any(r.position > prev.read_position for r in tail_rows)
        new_rows = [r for r in tail_rows if r.position > prev.last_position] if anything_new else []
        if new_rows and (not tail_rows or tail_rows[0].position > prev.last_position + 1):
            return None, "more turns arrived than the tail can show"
        new_positions = {r.position for r in new_rows}
        shown_here = {p for c, p in shown(prev.segments) if c == conv} | new_positions
        fresh_pins = {p for c in chosen["pinned"] if c.current for p in (c.group or [c.position])} - shown_here
        shown_late: list[Segment] = []  # pins made after their turn left the context (planner.late_pins)
        if fresh_pins:
            shown_late = [late_pins.segment(late_pins.unshown(chosen["pinned"], conv, shown_here),
                                      f"pinned after its turn left the context: shown late in epoch {prev.epoch}")]
            if not late_pins.fits([*prev.segments, *shown_late], self.tokens, budget):
                return None, (f"pin changed: #{min(fresh_pins)} is pinned now and not shown (the late pins would "
                              f"pass {late_pins.LATE_PINS_SHARE:.0%} of the budget: the pinned block takes them)")
        epoch = prev.epoch
        before: list[Segment] = []  # new turns before this call's user message, then after it
        after: list[Segment] = []
        # results of calls the previous context left waiting (the agent was mid-loop)
        # continue its last unit; anything else after such a call would leave it
        # unanswered mid-context, which both APIs refuse: a rebuild leaves it out
        arrived, grouping = self.candidates.tail_units(conv, new_rows, tail_msgs, latest_user,
                                                        open_calls=open_calls([g.message for g in prev.segments]),
                                                        call_items=open_call_items([g.message for g in prev.segments]))
        if grouping.interrupted:
            return None, "a tool call it showed was never answered: a later message followed it without its result"
        for c in sorted(arrived, key=lambda c: c.position):
            assert c.body is not None
            c.reason = f"arrived since the previous call; appended within epoch {epoch}"
            for i, body in enumerate(c.body["messages"]):
                (before if c.position < latest_user else after).append(
                    Segment("tail", body, (c.item(),) if i == 0 else ()))
        latest = Segment("latest", latest_body, (latest_item,))
        # head: what stays as it was (its earlier retrieved blocks may give way); then
        # this call's retrieved turns; then `rest`
        tool_loop = False
        if latest_user != prev.latest_user:  # a new user message: the old one is a tail turn now
            old = prev.segments[at]
            it = old.items[0]
            head = [*prev.segments[:at], Segment("tail", old.message, (PlanItem(
                it.slice, it.conversation_id, it.positions, it.tier, it.fidelity, it.tokens, it.score,
                "an earlier user message, kept in place"),)), *prev.segments[at + 1:], *before, *shown_late]
            rest = [latest, *after]
        elif new_rows:  # the same user message, more turns after it (a tool loop): append
            if shown_late:
                # the late-pin block belongs before the per-turn part (docs/design.md,
                # invariant 6), but the latest user message and its replies are already
                # in the prefix, and a block after them could also cut a pending call from
                # its result: only a rebuild puts the pin where it belongs
                return None, (f"pin changed: #{min(fresh_pins)} is pinned now and not shown; in a tool loop a "
                              "late-pin block would follow the latest user message: the pinned block takes it")
            head, rest = [*prev.segments, *before, *after], []
            # the same question was retrieved for already, and the newest tool result
            # must stay last for the model to answer it: no retrieved block after it
            tool_loop = True
        else:
            # the same log asked again (another query for this turn): its user message and
            # what follows it move after this call's retrieved turns
            head, rest = [*prev.segments[:at], *shown_late], list(prev.segments[at:])
        read = [] if tool_loop else chosen["retrieved"]
        # the query's needs: what the read of TYPICAL_LINE_TOKENS lines chose. A short-line
        # conversation's longer read (fill_only) fills a new context's room; counted here,
        # it made an epoch that extended end for room ("room used up", CI on 857ad95)
        wanted = [c for c in read if not c.fill_only]
        wanted_tokens = sum(c.tokens for c in wanted)
        # a turn that is not a recall (small talk, a remark, a question about now) is
        # answered by the tail: its clearly related turns are appended as far as they fit,
        # and never rewind an earlier block or end the epoch for room
        min_share = EXTEND_MIN_NEED_SHARE if call.plan.query_class in NEEDS_ROOM_CLASSES else 0.0
        # what a new epoch would show is weighed on all it would choose
        ranking = epoch_policy.ranked(read, packing.pools["retrieved"]) if excess is not None and wanted else []
        worth = epoch_policy.new_epoch_value(ranking, read, excess or 0, _retrimmable) if ranking else 0.0
        by_value = False
        dropped = 0
        cut: int | None = None
        fits: list[Candidate] = []
        while True:
            on_show = shown(head + rest) | {(conv, p) for p in new_positions}
            need = [c for c in wanted if (c.conversation_id, c.position) not in on_show]
            fixed_part = [g.message for g in head + rest]
            fixed_total = messages_tokens(self.tokens, fixed_part)
            if fixed_total <= budget:
                fits = self._fit_need(fixed_part, fixed_total, need, budget, conv)
                kept_tokens = wanted_tokens - sum(c.tokens for c in need) + sum(c.tokens for c in fits)
                if len(fits) == len(need) or kept_tokens >= min_share * wanted_tokens:
                    break
                if ranking and epoch_policy.enough(
                        epoch_policy.value(ranking, on_show | {(c.conversation_id, c.position) for c in fits}), worth):
                    by_value = True
                    break
            blocks = [i for i, g in enumerate(head) if g.kind == "retrieved"]
            if not blocks:
                over = fixed_total + sum(c.tokens for c in need)
                mid, fold = self._middle(prev, call, fixed, at, before, [latest, *after], wanted, min_share,
                                         chosen["pinned"])
                if mid is not None or fold:
                    return mid, fold
                return None, (f"room used up: {len(before) + len(after)} new message(s) and {len(need)} retrieved "
                              f"turn(s) would make about {over} of {budget} tokens")
            cut = blocks[-1] if cut is None else min(cut, blocks[-1])
            kept = messages_tokens(self.tokens, [g.message for g in head[:cut]])
            if latest_user != prev.latest_user and kept < REWIND_MIN_KEPT_SHARE * budget:
                mid, fold = self._middle(prev, call, fixed, at, before, [latest, *after], wanted, min_share,
                                         chosen["pinned"])
                if mid is not None or fold:
                    return mid, fold
                return None, (f"room used up: a rewind to message {cut} would keep only {kept} of {budget} "
                              "tokens as the cached prefix")
            del head[blocks[-1]]
            dropped += 1
        segs = list(head)
        # a turn the context shows raw that was superseded since (the correction is new),
        # or whose mark a rewind dropped, is marked with this call's retrieved turns, ahead
        # of them for the room (planner.marks)
        new_marks = marks.for_segments(self.candidates, conv, head + rest, new_positions, tail_rows, call.zone)
        if new_marks:
            fits = self._fit_need(fixed_part, fixed_total, [*new_marks, *fits], budget, conv)
        if fits:
            segs.append(Segment("retrieved", self.render.block("retrieved", fits, conv), tuple(c.item() for c in fits)))
        segs.extend(rest)
        appended = before + after
        total = messages_tokens(self.tokens, [g.message for g in segs])
        if total > budget:  # _fit_need counted exactly; this guards the invariant
            return None, f"room used up: {total} of {budget} tokens"
        reason = (f"extends the previous context: {len(appended)} new message(s), {len(fits)} retrieved turn(s)"
                  + (f", {len(wanted) - len(need)} more already shown" if len(wanted) > len(need) else "")
                  + (f", {len(need) - len(fits)} left out for room" if len(need) > len(fits) else "")
                  + (f" (it shows at least {epoch_policy.EXTEND_MIN_VALUE_SHARE:.0%} of the ranked turns' weight "
                     "that a new epoch would)" if by_value else "")
                  + (f"; pin(s) {', '.join(f'#{p}' for p in sorted(fresh_pins))} made since shown late, after it"
                     if shown_late else ""))
        if dropped:
            reason = (f"rewinds to message {cut}: the retrieved turns of {dropped} earlier call(s) give way; "
                      + reason)
        # long enough to read back dear: evict before it fills (late pins not counted: a
        # restart keeps them, so evicting sooner for them would only rebuild more often)
        # An epoch's first call already past the cap (a recall whose retrieved turns took the
        # room, after a tail grown to the cacheable minimum at a resumed session) is extended
        # while it fits: evicting at its first extension keeps only the head before those
        # turns, so the follow-up question loses the evidence it most likely asks about,
        # paid in full one call ago; it evicts when the room is used up (above)
        capped = prev.calls > 1 or prev.head > 0
        if capped and total - late_pins.tokens_in(segs, self.tokens) > middle.MIDDLE_CAP_SHARE * budget:
            mid, fold = self._middle(prev, call, fixed, at, before, [latest, *after], wanted, min_share,
                                     chosen["pinned"])
            if mid is not None or fold:
                return mid, fold
        return _Extension(segs, total, reason), ""

    def _converted(self, prev: EpochState, ext: _Extension, budget: int) -> tuple[_Extension | None, str]:
        """An extension planned on the stored form, kept under a conversion
        (`context_format`, `system_messages="merge"`) only where the conversion keeps the
        prefix it keeps as the previous call sent it (render.conversion_break), and only
        within the budget counted on the messages returned (a conversion may split a
        message into several items, each with its overhead); its total is that count.
        Else None and why a new epoch starts."""
        changed = conversion_break(prev.segments, ext.segments, self.render.out)
        if changed:
            return None, (f"the conversion ({self.render.describe_conversion()}) changed an earlier message: "
                          f"{changed} of the previous request is not the same once this context is converted")
        total = messages_tokens(self.tokens, self.render.out([g.message for g in ext.segments]))
        if total > budget:
            return None, f"room used up: {total} of {budget} tokens once converted"
        return replace(ext, total=total), ""

    def _middle(self, prev: EpochState, call: _Call, fixed: _Fixed, at: int, before: list[Segment],
                rest: list[Segment], wanted: list[Candidate], min_share: float,
                pins: list[Candidate]) -> tuple[_Extension | None, str]:
        """On a new user message whose extension ran out of room: the previous context's
        head kept, the newest turns rebuilt after it (planner.middle), or None; and why a
        new epoch must start now instead ("" when none must: late pins to fold).

        A current pin shown only by the turns that would leave (a pin made while its turn
        sat in the tail) is shown again in a late-pin block right after the head, which
        later restarts keep byte for byte (planner.late_pins: so it is read back, not
        re-billed at every eviction as when such pins were rebuilt with the tail, which
        measured dearer than a new epoch); when the late pins would pass their share of
        the budget, or have been read back about as much as a fold costs, a new epoch
        folds them into the pinned block instead."""
        conv, budget, latest_user = call.conv, call.budget, fixed.latest_user
        if latest_user is None or latest_user == prev.latest_user or not self.settings.evict_middle:
            return None, ""
        # the head reaches the configured minimum (a shorter one the provider never caches)
        cut = middle.head_cut(prev.segments[:at], self.tokens, budget, self.render.out, self._min_prefix())
        if cut is None:
            return None, ""
        head = list(prev.segments[:cut])
        on_head = {p for c, p in shown(head) if c == conv}
        # through the latest user message (skipped, it is placed apart): a call before it
        # without its result is unanswered mid-context, not the pending round at the end
        recent = sorted(self.candidates.tail(conv, [r for r in fixed.tail_rows if r.position <= latest_user],
                                             fixed.tail_msgs, latest_user), key=lambda c: -c.position)
        required = {p for g in before for it in g.items for p in it.positions}
        held_back = frozenset({r.position for r in fixed.tail_rows if r.superseded_by is not None}
                              | self.statements.positions(conv))
        tail = middle.rebuilt_tail(recent, required, on_head, budget,
                                   f"newest turn, rebuilt after the kept head in epoch {prev.epoch}", held_back)
        on_show = on_head | {p for c, p in shown(tail) if c == conv}
        # current pins only the leaving turns show: one late-pin block right after the
        # head, part of the head later restarts keep (planner.late_pins)
        unshown = late_pins.unshown(pins, conv, on_show)
        late = [late_pins.segment(unshown, f"pinned while its turn was shown: kept after the head in epoch "
                                           f"{prev.epoch}")] if unshown else []
        if late and (not late_pins.fits(late, self.tokens, budget)
                     or late_pins.fold_due(prev.late_paid, int(budget * EPOCH_START_FILL_SHARE))):
            # a new epoch folds them into the pinned block: cheaper from here on than
            # reading them back after the head at every call
            return None, (f"pin changed: {len(unshown)} late pin(s) fold into the pinned block "
                          f"({prev.late_paid} late-pin tokens sent in this epoch)")
        # the leading messages sent as the previous call sent them: the kept head, and a
        # late-pin block only when a previous restart placed it as it is
        cached = cut
        if late and late[0].message == (prev.segments[cut].message if cut < len(prev.segments) else None):
            late = [prev.segments[cut]]  # the block a previous restart placed: byte for byte, read back
            cached += 1
        head = [*head, *late]
        on_show |= {p for c, p in shown(late) if c == conv}
        need = [c for c in wanted if c.conversation_id != conv or c.position not in on_show]
        min_tokens = min_share * sum(c.tokens for c in wanted) - sum(c.tokens for c in wanted if c not in need)
        # a superseded turn the kept head shows raw whose mark left with the evicted part
        # is marked again, ahead of the retrieved turns (planner.marks; the rebuilt tail
        # stops before a superseded turn)
        need = [*marks.for_segments(self.candidates, conv, [*head, *tail], (), fixed.tail_rows, call.zone), *need]
        got = middle.evict(head, tail, rest[0], rest[1:], need,
                           lambda msgs, base, todo: self._fit_need(msgs, base, todo, budget, conv),
                           lambda fits: Segment("retrieved", self.render.block("retrieved", fits, conv),
                                                tuple(c.item() for c in fits)),
                           self.tokens, budget, min_tokens, cached)
        if got is None:
            return None, ""
        reason = got.reason + (f"; {len(unshown)} pin(s) its leaving turns showed follow the head" if late else "")
        return _Extension(got.segments, got.total, reason, len(head)), ""

    def _fit_need(self, fixed_part: list[dict[str, Any]], base: int, need: list[Candidate], budget: int,
                  conv: str) -> list[Candidate]:
        """The best of `need` (score order) whose block fits beside `fixed_part` (`base`
        tokens), counted exactly."""
        if not need:
            return []
        ranked = sorted(need, key=lambda c: (-c.score, *c.tie_order()))
        room = budget - base
        out: list[Candidate] = []
        est = self.render.block_header_tokens("retrieved")
        headings: set[str] = set()
        for c in ranked:
            cost = c.tokens
            if c.header:  # a heading is paid once per session shown, not a share per line
                cost += -HEADING_SHARE_TOKENS + (0 if c.header in headings
                                                 else self.tokens.count(c.header) + LINE_SEP_TOKENS)
            if est + cost <= room:
                out.append(c)
                headings.add(c.header)
                est += cost
        while out and base + message_tokens(self.tokens, self.render.block("retrieved", out, conv)) > budget:
            out.pop()  # the estimate shared a heading a line; the exact count decides
        return out


def _results_call_read(rows: list[TurnRow]) -> bool:
    """Whether the tail rows `rows` (oldest first, the latest user message last) hold the
    row before the tool results that precede that message: their call, which a result
    is never sent without (`_fixed` reads back until it is in)."""
    i = len(rows) - 2
    while i >= 0 and rows[i].role == "tool":
        i -= 1
    return i >= 0


def _round_call_read(rows: list[TurnRow]) -> bool:
    """Whether the tail rows `rows` (oldest first) hold the latest tool round's call and
    the assistant message before it: no tool result among them, or two assistant messages
    before the newest one (a call's results follow it directly, so the nearest such
    message is that call; the one before it ends the round before, which the plan then
    names where it gives way, `plan.left_out`)."""
    newest = max((r.position for r in rows if r.role == "tool"), default=None)
    return newest is None or sum(r.role == "assistant" and r.position < newest for r in rows) >= ROUNDS_READ


def _key(c: Candidate) -> tuple[str, int]:
    return c.conversation_id, c.position


def _retrimmable(c: Candidate) -> bool:
    """Whether `c` is a retrieved tool output's line that its trim cut (planner.render:
    its marker says so), which a smaller allowance can shorten."""
    return c.slice == "retrieved" and c.fidelity == "trimmed" and "[... trimmed " in c.text
