"""A floor for the cost replay (`evals.cost`): the least ANY context policy can be billed
over a replayed conversation under a provider's caching rules, given two things every
memory must do.

Assumptions (each one a requirement or a gift; every gift only lowers the floor, so the
floor is a true lower bound on every policy that meets the requirements):

Requirements, at each replayed user turn t (a "build"):
- (a) The context carries the turn's new messages: the log messages that arrived since
  the previous build (at the first build, all of them), verbatim as the replay's log
  holds them (the `ConvView` bodies), rendered as the replay renders them
  (`evals.cost.Renderer`: chat markers and the tokenizer's real ids). No earlier
  request held them, so no cache holds them: they are billed as plain input (1x),
  as is the assistant header the provider appends after them (the priming).
- (b) The request holds at least min(H_t, M) tokens, H_t being the whole history so
  far as full context renders it (its request at t, priming included) and M the kept
  memory (default: the provider's minimum cacheable prefix, 1,024 tokens; never more
  than the replay's budget, which no policy of that budget can pass).

Gifts:
- Everything in the request but the new messages and the priming ("old" tokens) may be
  a cached prefix: the policy never restarts, never loses a prefix, and its old part
  may be anything sent before (a fixed padding block qualifies), placed first.
- Caching counts token for token past the minimum: no 128-token step loss (OpenAI).
- The first new message's leading ids that equal the previous request's priming (an
  assistant message's header) count as cached too, whatever they follow.
- Anthropic: new tokens go after the last breakpoint (billed 1x, never written); the
  old part is written once (the write premium, `write_ratio - 1`, on `min_prefix`
  tokens, charged once when any read happens: a read needs an earlier write) and read
  at `read_ratio` ever after; the 4-breakpoint and 20-block look-back limits are waived.

Per build after the first, then, the floor bills the new tokens and the priming in full,
and for the old part the cheaper of: the least old part (max(0, min(H_t, M) - new -
priming) tokens) in full, or max(that, min_prefix) old tokens read at `read_ratio`
(which needs min_prefix tokens sent before: the first build reads nothing). The whole
floor is the cheaper of that sum (plus the one write premium) and a policy that never
reads (every build billed in full at its least size). Each build is minimised on its own,
a relaxation of the real, coupled problem: the floor can only be lower than the best
policy, never higher.

Caches expire (`CacheRules.ttl_s`, evals.cost): a build more than `ttl_s` after the
previous one finds nothing cached and is billed as a first build (its least size in
full), and a later read needs a fresh write (one write premium per run of builds that
reads). `by_ttl` reports the floor under both assumptions (`TTL_EXPIRE`, `TTL_INSIDE`:
nothing expires, the old figure).

If the floor of a conversation passes a billing target (issue 22: 25% of cached full
context under OpenAI's rules, 30% under Anthropic's), no context that keeps M tokens of
history at every turn and shows every message once can meet that target there.

Invariants: pure arithmetic on the replay's token ids (nothing is read but its ConvView
and the build points); the same rules (`evals.cost.PROVIDERS`) as every other method.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tiermem.evals.baselines import ConvView
from tiermem.evals.bound import BoundTurn
from tiermem.evals.cost import (
    PROVIDERS,
    TTL_EXPIRE,
    TTL_INSIDE,
    TTL_LABELS,
    CacheRules,
    Renderer,
    alive,
    common_prefix_ids,
    inside_ttl,
)

FLOOR = "floor"  # the method name in the replay's table


@dataclass(frozen=True)
class FloorTurn:
    """One build as the floor sees it, in rendered tokens: the new messages, the leading
    ids of the first new message that equal the priming, the whole history so far
    (full context's request at this build, priming included), and when it is built
    (seconds, the latest message's created_at; None: no gap from the previous build)."""

    new: int
    header: int
    history: int
    at: float | None = None


def floor_turns(view: ConvView, turns: Sequence[BoundTurn], renderer: Renderer) -> list[FloorTurn]:
    """The builds of a replay (the bound's turns: the log length at each user turn)."""
    out: list[FloorTurn] = []
    ids = [renderer.message(b) for b in view.bodies]  # each message rendered once
    sizes = [int(x.shape[0]) for x in ids]
    priming = int(renderer.priming.shape[0])
    seen = 0  # log messages that existed at the previous build
    history = 0
    for t in turns:
        end = t.log_len
        if end <= 0:
            continue
        new = sum(sizes[seen:end])
        history += new
        header = common_prefix_ids(ids[seen], renderer.priming) if end > seen else 0
        out.append(FloorTurn(new, header, history + priming, t.at))
        seen = max(seen, end)
    return out


def build_floor(t: FloorTurn, rules: CacheRules, keep: int, priming: int, first: bool) -> tuple[float, bool, int]:
    """The least bill of one build, whether it reads a cached prefix, and its least size."""
    plain = t.new + priming  # billed in full, whatever the policy
    size = max(plain, min(t.history, keep))
    old = size - plain  # the least old part (b) asks for
    if first:
        return float(size), False, size
    full_old = float(old) if old < rules.min_prefix else old * rules.read_ratio
    read_old = max(old, rules.min_prefix) * rules.read_ratio
    if read_old < full_old:
        return plain - t.header + read_old, True, plain + max(old, rules.min_prefix)
    return plain - (t.header if old >= rules.min_prefix else 0) + full_old, old >= rules.min_prefix, size


def floor_bill(turns: Sequence[FloorTurn], rules: CacheRules, keep: int, priming: int) -> dict[str, float]:
    """The floor's bill over the builds under `rules`, keeping `keep` tokens (M)."""
    reads = 0
    total = 0.0
    tokens = 0
    never = 0.0  # a policy that never reads: every build in full at its least size
    runs_read = 0  # runs of builds within the TTL of each other that read: each needs its own write
    last: float | None = None
    read_in_run = False
    for i, t in enumerate(turns):
        at = last if t.at is None else t.at
        first = i == 0 or not alive(rules, last, at)  # past the TTL: the caches are empty
        last = at
        if first:
            runs_read += read_in_run
            read_in_run = False
        bill, read, size = build_floor(t, rules, keep, priming, first=first)
        total += bill
        tokens += size
        reads += read
        read_in_run = read_in_run or read
        never += max(t.new + priming, min(t.history, keep))
    runs_read += read_in_run
    total += runs_read * (rules.write_ratio - 1.0) * rules.min_prefix  # a read needs an earlier write
    return {"billed": round(min(total, never), 1), "tokens": float(tokens), "reads": float(reads)}


def floor_summary(view: ConvView, turns: Sequence[BoundTurn], renderer: Renderer,
                  keep: Mapping[str, int] | None = None, budget: int | None = None,
                  ttl: str = TTL_EXPIRE) -> dict[str, Any]:
    """The floor under every provider, keeping each provider's `keep` tokens (default:
    its minimum cacheable prefix), at most `budget`. Shaped like `MethodSeries.summary`
    where it can be: the top-level bills under `ttl`, `by_ttl` under both assumptions."""
    priming = int(renderer.priming.shape[0])
    ft = floor_turns(view, turns, renderer)
    out: dict[str, Any] = {"builds": len(ft), "ttl": ttl}
    both: dict[str, dict[str, Any]] = {t: {} for t in TTL_LABELS}
    for p, rules in PROVIDERS.items():
        m = keep[p] if keep is not None else rules.min_prefix
        m = min(m, budget) if budget is not None else m
        for t, r in ((TTL_EXPIRE, rules), (TTL_INSIDE, inside_ttl(rules))):
            both[t][f"total_billed_{p}"] = floor_bill(ft, r, m, priming)["billed"]
        got = floor_bill(ft, rules if ttl == TTL_EXPIRE else inside_ttl(rules), m, priming)
        out[f"total_billed_{p}"] = got["billed"]
        out[f"keep_tokens_{p}"] = m
        if p == "openai":
            out["total_tokens"] = int(got["tokens"])
    out["total_billed"] = out["total_billed_openai"]
    out["by_ttl"] = both
    out["new_tokens"] = sum(t.new + priming for t in ft)
    out.update({"cache_stable_share": None, "new_epochs": 0, "context_ms": {"p50": None, "p99": None},
                "budget_violations": 0, "token_mismatches": 0})
    return out
