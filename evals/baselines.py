"""The methods the evals compare, and the plumbing they share.

Every method answers one question about one conversation with a list of OpenAI-format
messages, the log positions it included verbatim, and their token count, all under the
same budget and the same accounting (`tiers.tokens.messages_tokens`: per-message
overhead plus reply priming, counted with the configured BPE tokenizer):

- `full_context`: the whole conversation, no budget (the upper bound; its tokens are
  what a "send everything" agent pays).
- `tail`: tail truncation (scrollback): the most recent turns that fit.
- `dense_topk`: vec0 KNN over the conversation's turns (`ColdStore.search_dense`).
- `bm25_topk`: FTS5 bm25 (`ColdStore.search_bm25`).
- `hybrid_topk`: both fused by reciprocal rank (`ColdStore.search`), without the planner.

The three retrieval baselines pack their hits greedily in rank order: a hit that fits
the remaining budget is taken, one that does not is skipped (a later, shorter hit may
still fit), and the chosen turns are presented in log order. Baselines present turns as
stored (no session dates, no summaries): they are what a plain top-k memory would send.

`tiermem_context` is the system under test: `Memory.context()` with the planner.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tiermem.config import Config
from tiermem.memory import Memory, open_with_fallback
from tiermem.tiers.embed import Embedder, query_embedding
from tiermem.tiers.models import StoredMessage, message_text
from tiermem.tiers.statements import remaining_text
from tiermem.tiers.tokens import REPLY_PRIMING_TOKENS, message_tokens, messages_tokens

BASELINES: tuple[str, ...] = ("full_context", "tail", "dense_topk", "bm25_topk", "hybrid_topk")
TIERMEM = "tiermem"
METHODS: tuple[str, ...] = (TIERMEM, *BASELINES)
INCLUDED_FIDELITIES = frozenset({"verbatim", "trimmed"})
MAX_KNN = 4096  # vec0's k limit

stderr = Console(stderr=True)


# ---------------------------------------------------------------------------------------
# What a method returns


@dataclass
class MethodOutput:
    """One method's context for one question."""

    messages: list[dict[str, Any]]
    positions: set[int]  # log positions included verbatim or trimmed
    tokens: int
    # positions of plan items whose reason says "superseded" (tiermem only; see pressure.py)
    superseded_positions: set[int] = field(default_factory=set)
    claimed_trimmed: set[int] = field(default_factory=set)  # of `positions`, those the plan says it trimmed
    degraded: bool = False
    plan: Any = None  # tiermem: the context's plan (breakpoints, cache report)

    @property
    def text(self) -> str:
        return "\n".join(message_text(m) for m in self.messages)


# ---------------------------------------------------------------------------------------
# The system under test


def tiermem_available(memory: Memory) -> bool:
    """Whether this build's Memory has the planner's `context()` yet."""
    return callable(getattr(memory, "context", None))


def tiermem_runs(memory: Memory, methods: Sequence[str], skipped: str) -> bool:
    """Whether an eval runs the tiermem method: asked for in `methods` and available; asked
    for but not available, a warning says it is skipped, `skipped` saying how."""
    if TIERMEM not in methods:
        return False
    if not tiermem_available(memory):
        warn(f"Memory has no context() yet: the tiermem method is skipped{skipped}")
        return False
    return True


def _item_is_superseded(item: Any) -> bool:
    reason = str(getattr(item, "reason", "") or "")
    return "superseded" in reason.lower()


def no_context() -> MethodOutput:
    """The context of a conversation with no messages (a LoCoMo sample whose sessions are
    all empty, a conversation of probes alone): nothing. Nothing wrote the conversation,
    so `Memory.context` would not find it; its questions are asked of this instead, as
    the baselines ask them of an empty view, and counted (no evidence, no answer shown)."""
    return MethodOutput(messages=[], positions=set(), tokens=0)


def tiermem_context(memory: Memory, conv: str, question: str, budget: int, *, namespace: str,
                    record: bool = True) -> MethodOutput:
    """`Memory.context(conv, question, budget)` in `namespace`; the positions are those
    of plan items at verbatim or trimmed fidelity in this conversation. `record=False`:
    a what-if plan (`Memory.context`'s), which keeps no epoch state for the next call."""
    ctx = memory.context(conv, question, budget=budget, namespace=namespace, record=record)
    plan = ctx.plan
    positions: set[int] = set()
    trimmed: set[int] = set()
    superseded: set[int] = set()
    for item in getattr(plan, "items", []) or []:
        if getattr(item, "conversation_id", conv) != conv:
            continue
        item_positions = [int(p) for p in (getattr(item, "positions", None) or [])]
        fidelity = getattr(item, "fidelity", None)
        if fidelity in INCLUDED_FIDELITIES:
            positions.update(item_positions)
            if fidelity == "trimmed":
                trimmed.update(item_positions)
        if _item_is_superseded(item):
            superseded.update(item_positions)
    messages = [dict(m) for m in ctx.messages]
    return MethodOutput(
        messages=messages,
        positions=positions,
        claimed_trimmed=trimmed,
        tokens=int(ctx.tokens),
        superseded_positions=superseded,
        degraded=bool(getattr(plan, "degraded", False)),
        plan=plan,
    )


TRIMMED_CHECK_CHARS = 60


def _squash(text: str) -> str:
    return " ".join(text.split())


def verify_positions(memory: Memory, conv: str, out: MethodOutput) -> int:
    """Trust, but verify, the plan: drop from `out.positions` every position whose turn
    text is not actually in the messages (all of it for verbatim, its first
    `TRIMMED_CHECK_CHARS` characters for trimmed). Returns how many were dropped.

    Recall then counts only turns the model would really see."""
    if not out.positions:
        return 0
    haystack = _squash(out.text)
    dropped = 0
    parts: dict[int, list[tuple[int, int]]] = {}
    for st in memory.cold.superseded_statements(conv, sorted(out.positions)):
        parts.setdefault(st.position, []).append((st.start, st.end))
    for m in memory.cold.get(conv, sorted(out.positions)):
        text = _squash(m.text)
        needle = text[:TRIMMED_CHECK_CHARS] if m.position in out.claimed_trimmed else text
        if m.position in parts and needle not in haystack:
            # a turn corrected in part is shown as what holds, then each superseded
            # statement on a marked line (planner/statements.py): all of it must be there
            pieces = [remaining_text(m.text, parts[m.position])] + [m.text[a:b] for a, b in parts[m.position]]
            if all(_squash(x) in haystack for x in pieces if x.strip()):
                continue
        if needle and needle not in haystack:
            out.positions.discard(m.position)
            dropped += 1
    return dropped


# ---------------------------------------------------------------------------------------
# A conversation held in memory for the baselines


@dataclass
class ConvView:
    """A conversation's messages and their token counts, read once from the log.

    The baselines work on this copy, so their latency is the method's own work (and
    the query embedding), not repeated reads of the same rows."""

    conversation_id: str
    positions: list[int] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    index: dict[int, int] = field(default_factory=dict)  # position -> list index
    times: list[float] = field(default_factory=list)  # each message's created_at (the cost replay's TTL)

    @classmethod
    def load(cls, memory: Memory, conv: str) -> ConvView:
        view = cls(conv)
        view.refresh(memory)
        return view

    def refresh(self, memory: Memory) -> None:
        """Read what the log gained since the last read."""
        start = self.positions[-1] + 1 if self.positions else 0
        for m in memory.cold.history(self.conversation_id, start=start):
            self._add(memory, m)

    def _add(self, memory: Memory, m: StoredMessage) -> None:
        self.index[m.position] = len(self.positions)
        self.positions.append(m.position)
        body = m.to_openai()
        self.bodies.append(body)
        self.tokens.append(message_tokens(memory.tokens, body))
        self.times.append(m.created_at)

    def __len__(self) -> int:
        return len(self.positions)

    def total_tokens(self) -> int:
        return (REPLY_PRIMING_TOKENS + sum(self.tokens)) if self.tokens else 0


def _output(view: ConvView, chosen: Sequence[int]) -> MethodOutput:
    """Messages for list indexes `chosen` (any order), presented in log order."""
    idx = sorted(set(chosen))
    return MethodOutput(
        messages=[dict(view.bodies[i]) for i in idx],
        positions={view.positions[i] for i in idx},
        tokens=(REPLY_PRIMING_TOKENS + sum(view.tokens[i] for i in idx)) if idx else 0,
    )


def full_context(view: ConvView) -> MethodOutput:
    return _output(view, range(len(view)))


def tail_truncation(view: ConvView, budget: int) -> MethodOutput:
    """The most recent turns whose total fits the budget (stops at the first that does not)."""
    used = REPLY_PRIMING_TOKENS
    chosen: list[int] = []
    for i in range(len(view) - 1, -1, -1):
        if used + view.tokens[i] > budget:
            break
        used += view.tokens[i]
        chosen.append(i)
    return _output(view, chosen)


def pack_ranked(view: ConvView, ranked_positions: Sequence[int], budget: int) -> MethodOutput:
    """Take hits in rank order while they fit (skipping ones that do not), then present
    them in log order."""
    used = REPLY_PRIMING_TOKENS
    chosen: list[int] = []
    seen: set[int] = set()
    for pos in ranked_positions:
        i = view.index.get(pos)
        if i is None or i in seen:
            continue
        if used + view.tokens[i] > budget:
            continue
        used += view.tokens[i]
        chosen.append(i)
        seen.add(i)
    return _output(view, chosen)


# -- rankings (computed once per question, packed at every budget) ---------------------------


def _depth(view: ConvView) -> int:
    return max(1, min(len(view), MAX_KNN))


def dense_ranking(memory: Memory, view: ConvView, query_vec: np.ndarray) -> list[int]:
    hits = memory.cold.search_dense(query_vec, _depth(view), conversation_id=view.conversation_id)
    return [pos for conv, pos, _ in hits if conv == view.conversation_id]


def bm25_ranking(memory: Memory, view: ConvView, query: str) -> list[int]:
    hits = memory.cold.search_bm25(query, _depth(view), conversation_id=view.conversation_id)
    return [pos for conv, pos, _ in hits if conv == view.conversation_id]


def hybrid_ranking(memory: Memory, view: ConvView, query: str, query_vec: np.ndarray) -> list[int]:
    d = _depth(view)
    hits = memory.cold.search(
        query,
        d,
        conversation_id=view.conversation_id,
        query_vec=query_vec,
        rrf_k=memory.config.rrf_k,
        depth=d,
    )
    return [h.position for h in hits if h.conversation_id == view.conversation_id]


@dataclass
class Rankings:
    """The three retrievers' orderings for one query, and what computing them cost."""

    dense: list[int]
    bm25: list[int]
    hybrid: list[int]
    ms: dict[str, float]


def rank_all(memory: Memory, view: ConvView, query: str, methods: Sequence[str] = BASELINES) -> Rankings:
    """Rank once per query. Each method's time includes its own share of the work: the
    query embedding counts for dense and hybrid, hybrid's fusion re-runs both retrievers."""
    ms: dict[str, float] = {}
    dense: list[int] = []
    bm25: list[int] = []
    hybrid: list[int] = []
    vec: np.ndarray | None = None
    embed_ms = 0.0
    if "dense_topk" in methods or "hybrid_topk" in methods:
        t = time.perf_counter()
        vec = query_embedding(memory.embedder)([query])[0]
        embed_ms = (time.perf_counter() - t) * 1000
    if "dense_topk" in methods and vec is not None:
        t = time.perf_counter()
        dense = dense_ranking(memory, view, vec)
        ms["dense_topk"] = embed_ms + (time.perf_counter() - t) * 1000
    if "bm25_topk" in methods:
        t = time.perf_counter()
        bm25 = bm25_ranking(memory, view, query)
        ms["bm25_topk"] = (time.perf_counter() - t) * 1000
    if "hybrid_topk" in methods and vec is not None:
        t = time.perf_counter()
        hybrid = hybrid_ranking(memory, view, query, vec)
        ms["hybrid_topk"] = embed_ms + (time.perf_counter() - t) * 1000
    return Rankings(dense, bm25, hybrid, ms)


def run_baseline(
    name: str, view: ConvView, rankings: Rankings | None, budget: int
) -> tuple[MethodOutput, float]:
    """One baseline at one budget; returns its output and its time in ms (ranking
    time, if any, plus packing)."""
    t = time.perf_counter()
    if name == "full_context":
        out = full_context(view)
    elif name == "tail":
        out = tail_truncation(view, budget)
    else:
        if rankings is None:
            raise ValueError(f"{name} needs rankings")
        ranked = {"dense_topk": rankings.dense, "bm25_topk": rankings.bm25, "hybrid_topk": rankings.hybrid}[
            name
        ]
        out = pack_ranked(view, ranked, budget)
    ms = (time.perf_counter() - t) * 1000
    if rankings is not None:
        ms += rankings.ms.get(name, 0.0)
    return out, ms


def check_tokens(memory: Memory, out: MethodOutput) -> bool:
    """Whether the method's reported token count is what the shared accounting says."""
    return messages_tokens(memory.tokens, out.messages) == out.tokens


# ---------------------------------------------------------------------------------------
# Shared plumbing


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None}
    arr = np.asarray(values, dtype=float)
    return {"p50": round(float(np.percentile(arr, 50)), 3), "p99": round(float(np.percentile(arr, 99)), 3)}


def mean(values: Sequence[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


def make_progress(enabled: bool = True) -> Progress:
    """Progress bars on stderr (stdout stays clean for --json)."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        disable=not enabled,
        transient=False,
    )


def warn(message: str) -> None:
    stderr.print(f"[yellow]warning:[/yellow] {message}")


@dataclass
class OpenedMemory:
    memory: Memory
    hot: bool
    data_dir: Path
    temporary: bool
    hot_error: str | None = None
    stop_redis: bool = True  # this run started the embedded redis-server: stop it at the end


def without_memo(embedder: object) -> None:
    """Turn off the embedder's memory of recent texts (through wrappers with `.inner`):
    latency figures that say "query embedding included" must run the model for every
    query, even one asked again at another budget."""
    seen = 0
    while embedder is not None and seen < 5:
        if hasattr(embedder, "memo_size"):
            embedder.memo_size = 0
        embedder = getattr(embedder, "inner", None)
        seen += 1


def open_memory(
    data_dir: Path | None,
    *,
    hot: bool = True,
    embedder: Embedder | None = None,
    config: Config | None = None,
) -> OpenedMemory:
    """A Memory for an eval run: in `data_dir`, or in a fresh temporary dir. The hot tier
    (and so eviction) is on unless it cannot start, in which case the run falls back to
    the cold tier alone, says so on stderr and records it in its results."""
    temporary = data_dir is None
    path = Path(tempfile.mkdtemp(prefix="tiermem-eval-")) if data_dir is None else Path(data_dir)
    cfg = config.model_copy(update={"data_dir": path}) if config is not None else Config.load(data_dir=path)
    hot_error: str | None = None
    memory: Memory | None = None
    redis_was_running = True
    if hot and cfg.redis_url is None:
        with contextlib.suppress(Exception):
            from tiermem.tiers.redis_server import EmbeddedRedis

            redis_was_running = EmbeddedRedis(path).is_running()
    if hot:  # the hot tier is optional for the harness, not for the claim
        memory, why = open_with_fallback(cfg, embedder=embedder)
        if why is not None:
            hot_error = f"{type(why).__name__}: {why}"
            warn(f"hot tier unavailable ({hot_error}); running cold-only, eviction OFF")
    else:
        memory = Memory(cfg, embedder=embedder, background_indexing=False, hot=False)
    without_memo(memory.embedder)
    return OpenedMemory(
        memory,
        memory.hot is not None,
        path,
        temporary,
        hot_error,
        stop_redis=temporary or not redis_was_running,
    )


def close_memory(opened: OpenedMemory) -> None:
    """Close the Memory; stop the embedded redis-server if this run started it (it would
    otherwise outlive the run, and for a temporary dir, the dir); delete a temporary dir."""
    embedded = getattr(opened.memory.hot, "embedded", None) if opened.memory.hot is not None else None
    opened.memory.close()
    if embedded is not None and opened.stop_redis:
        with contextlib.suppress(Exception):
            embedded.stop()
    if opened.temporary:
        shutil.rmtree(opened.data_dir, ignore_errors=True)


@contextlib.contextmanager
def eval_memory(
    data_dir: Path | None, *, hot: bool = True, embedder: Embedder | None = None
) -> Iterator[OpenedMemory]:
    opened = open_memory(data_dir, hot=hot, embedder=embedder)
    try:
        yield opened
    finally:
        close_memory(opened)


def suffixed_id(base: str, limit: int, taken: Callable[[str], bool]) -> str:
    """`base` cut to `limit` characters, or, while that is `taken`, the same with `-2`,
    `-3`, ... cut so that the suffix fits too: the one rule the evals make an id unique by
    (against a data dir, `unique_conversation_id`; within a file, `locomo.conversation_ids`)."""
    cid, n = base[:limit], 1
    while taken(cid):
        n += 1
        suffix = f"-{n}"
        cid = base[:limit - len(suffix)] + suffix
    return cid


def unique_conversation_id(memory: Memory, base: str) -> str:
    """`base` within the Config's `max_id_chars`, or the same with `-2`, `-3`... if the
    data dir already holds it (the evals put each conversation in a namespace of its own
    name), cut so that the suffix fits too. `base` is in the id alphabet (callers put a
    file's text through `locomo.id_text`)."""
    return suffixed_id(base, memory.config.max_id_chars, lambda cid: memory.cold.key_of(cid, cid) is not None)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t) * 1000


def eprint(*args: Any) -> None:
    print(*args, file=sys.stderr)
