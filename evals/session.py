"""A long-history QA session: a user's long history, then every question asked in it.

    tiermem eval session --data ../shared/data/locomo-dev.json --budget 2000 --plot docs/session.png

The conversations of a LoCoMo file are chained into one conversation in file order
(the four dev conversations: about 2,080 turns and 80k tokens), then every question of
every sample is asked one after another in that conversation: each is appended as a
user turn and answered from each method's context at the budget. Measured per method:
evidence recall per question (the evidence turns, resolved to their positions in the
chained conversation, that the context shows verbatim) and the billed input of the
whole session under both provider caching models of `evals.cost` (rendered tokens,
OpenAI automatic caching, Anthropic breakpoints; `by_ttl`: with the caches expiring by
the log's timestamps and with every build inside the TTL), against full context (cached, as
a provider bills it), tail truncation and hybrid top-k in the same run. Each budget
replays the session on a fresh copy of the conversation (the questions are appended).

Goals (issue 22, budget 2,000): tiermem's evidence recall at least 85%, its bill with
caching at most 20% of cached full context's.

Evidence ids that are malformed (not ``D<int>:<int>``) or absent from their sample are
counted per budget (``skipped_evidence_ids``, ``missing_evidence_ids``) beside
``questions_with_evidence``, the questions recall is averaged over, as in `evals.locomo`.

The questions carry no time of their own: each is stored when it is asked (its
created_at is the wall clock), seconds after the previous one, so every build after the
first is inside both providers' TTL and the two assumptions bill alike.

Baseline contexts always include the question itself (hybrid top-k gets it first, then
its hits), as tiermem's and tail truncation's do.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import Progress

from tiermem.evals.baselines import (
    TIERMEM,
    ConvView,
    MethodOutput,
    full_context,
    pack_ranked,
    rank_all,
    tail_truncation,
    tiermem_runs,
    unique_conversation_id,
)
from tiermem.evals.conversations import checked_samples
from tiermem.evals.cost import (
    PROVIDERS,
    TTL_EXPIRE,
    TTL_LABELS,
    MethodSeries,
    Renderer,
    add_ttl_ratios,
    check_ttl,
    epoch_category,
    planner_ttl,
    tiermem_request,
    ttl_report,
)
from tiermem.evals.locomo import (
    EvidenceCounts,
    LocomoError,
    Sample,
    evidence_index,
    resolve_evidence,
    sample_labels,
    session_times,
    turn_message,
)
from tiermem.memory import Memory
from tiermem.tiers.tokens import messages_tokens

SESSION_METHODS: tuple[str, ...] = (TIERMEM, "full_context", "tail", "hybrid_topk")
DEFAULT_SESSION_BUDGETS: tuple[int, ...] = (2000,)
GOAL_RECALL = 0.85
GOAL_BILLED_VS_CACHED_FULL = 0.20


@dataclass
class SessionRun:
    result: dict[str, Any]


def _chain(memory: Memory, conv: str, samples: list[Sample]) -> tuple[list[dict[str, int]], int]:
    """Append every sample's sessions to `conv`, in file order; (per sample, its dia_id ->
    position (`locomo.evidence_index`), turns)."""
    dia: list[dict[str, int]] = []
    turns = 0
    for s in samples:
        times, _ = session_times(s)
        written: list[tuple[str, int]] = []
        for session, start in zip(s.sessions, times, strict=True):
            batch = [turn_message(t, s, session, start + i)[0] for i, t in enumerate(session.turns)]
            if not batch:
                continue
            positions = memory.append_many(conv, batch, namespace=conv)
            turns += len(batch)
            written += [(t.dia_id, p) for t, p in zip(session.turns, positions, strict=True)]
        dia.append(evidence_index(written))
    if turns:  # else nothing wrote the conversation yet (the questions will): none to catch up
        memory.catch_up(conv, namespace=conv)
    return dia, turns


def run_session(
    memory: Memory,
    data: Path,
    *,
    budgets: Sequence[int] = DEFAULT_SESSION_BUDGETS,
    methods: Sequence[str] = SESSION_METHODS,
    limit_samples: int | None = None,
    limit_questions: int | None = None,
    progress: Progress | None = None,
    ttl: str = TTL_EXPIRE,
) -> SessionRun:
    """`ttl`: the TTL assumption of the top-level bills and goals (evals.cost); `by_ttl` has both."""
    if any(b < 1 for b in budgets):
        raise LocomoError("budgets must be positive integers")
    check_ttl(ttl)
    unknown = set(methods) - set(SESSION_METHODS)
    if unknown:
        raise LocomoError(f"unknown methods {sorted(unknown)}; known: {list(SESSION_METHODS)}")
    use_tiermem = tiermem_runs(memory, methods, " in the session eval")
    active = [m for m in methods if m != TIERMEM or use_tiermem]
    # every turn checked as `tiermem import` checks it, before anything is written
    samples = checked_samples(data, memory.config)
    if limit_samples is not None:
        samples = samples[:limit_samples]
    labels = sample_labels([s.sample_id for s in samples])  # by_sample's keys: a repeated id gets -2
    t0 = time.perf_counter()
    per_budget: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    # inside the TTL the planner assumes no expiry either (evals.cost.planner_ttl)
    with planner_ttl([memory] if use_tiermem else [], ttl):
        for budget in budgets:
            conv = unique_conversation_id(memory, f"locomo-session-{budget}")
            dia, turns = _chain(memory, conv, samples)
            view = ConvView.load(memory, conv)
            history_tokens = view.total_tokens()
            renderer = Renderer(memory.tokens)
            series = {m: MethodSeries(ttl=ttl) for m in active}
            recalls: dict[str, list[tuple[int, float]]] = {m: [] for m in active}
            # per sample: its questions' recalls per method, and where its questions start in
            # each series (the breakdown by conversation: weights chosen on three, scored on the fourth)
            sample_recalls: dict[str, dict[str, list[float]]] = {m: {} for m in active}
            sample_starts: list[tuple[str, int]] = []
            asked = with_evidence = 0
            counts = EvidenceCounts()  # ids dropped from the questions' evidence, as `eval locomo` reports
            total_q = sum(len(s.qa if limit_questions is None else s.qa[:limit_questions]) for s in samples)
            task = progress.add_task(f"session at {budget}", total=total_q) if progress is not None else None
            for si, (s, label) in enumerate(zip(samples, labels, strict=True)):
                sample_starts.append((label, asked))
                for qa in (s.qa if limit_questions is None else s.qa[:limit_questions]):
                    evidence = sorted(resolve_evidence(qa.evidence, dia[si], counts))
                    with_evidence += bool(evidence)
                    pos = memory.append(conv, {"role": "user", "content": qa.question}, namespace=conv)
                    memory.catch_up(conv, namespace=conv)
                    view.refresh(memory)
                    at = view.times[-1]  # the question's created_at: the build's time, for the caches' TTL
                    asked += 1
                    for name in active:
                        marks: list[int] | None = None
                        t = time.perf_counter()
                        if name == TIERMEM:
                            out, marks, cache = tiermem_request(memory, conv, qa.question, budget, namespace=conv)
                            if cache is not None and cache.new_epoch and asked > 1:
                                series[name].new_epochs += 1
                                cat = epoch_category(cache.reason)
                                series[name].epoch_reasons[cat] = series[name].epoch_reasons.get(cat, 0) + 1
                        elif name == "full_context":
                            out = full_context(view)
                        elif name == "tail":
                            out = tail_truncation(view, budget)
                        else:
                            ranks = rank_all(memory, view, qa.question, ("hybrid_topk",))
                            out = pack_ranked(view, [int(pos), *ranks.hybrid], budget)
                        ms = (time.perf_counter() - t) * 1000
                        series[name].add(asked, out, ms, renderer=renderer,
                                         budget=None if name == "full_context" else budget, breakpoints=marks,
                                         token_ok=messages_tokens(memory.tokens, out.messages) == out.tokens, at=at)
                        if evidence:
                            r = _recall(out, evidence)
                            recalls[name].append((qa.category, r))
                            sample_recalls[name].setdefault(label, []).append(r)
                    if progress is not None and task is not None:
                        progress.advance(task)
            summaries: dict[str, Any] = {}
            for name in active:
                summ = series[name].summary()
                rs = recalls[name]
                summ["evidence_recall"] = round(sum(r for _c, r in rs) / len(rs), 4) if rs else None
                cats: dict[str, list[float]] = {}
                for c, r in rs:
                    cats.setdefault(str(c), []).append(r)
                summ["by_category"] = {c: round(sum(v) / len(v), 4) for c, v in sorted(cats.items())}
                summaries[name] = summ
            full = summaries.get("full_context")
            for summ in summaries.values():
                for p in PROVIDERS:
                    summ[f"ratio_billed_vs_full_{p}"] = (round(summ[f"total_billed_{p}"] / full[f"total_billed_{p}"], 4)
                                                         if full and full[f"total_billed_{p}"] else None)
            add_ttl_ratios(summaries, full)
            for name in active:
                summaries[name]["by_sample"] = by_sample(series, name, sample_starts, sample_recalls[name])
            goals: dict[str, Any] = {"recall_min": GOAL_RECALL, "billed_vs_cached_full_max": GOAL_BILLED_VS_CACHED_FULL}
            tm = summaries.get(TIERMEM)
            if tm is not None:
                goals["tiermem_recall_ok"] = tm["evidence_recall"] is not None and tm["evidence_recall"] >= GOAL_RECALL
                for p in PROVIDERS:
                    got = tm[f"ratio_billed_vs_full_{p}"]
                    goals[f"tiermem_billed_vs_cached_full_{p}_ok"] = got is not None and got <= GOAL_BILLED_VS_CACHED_FULL
            per_budget[str(budget)] = {"methods": summaries, "goals": goals, "questions": asked,
                                       "questions_with_evidence": with_evidence,
                                       "skipped_evidence_ids": counts.skipped, "missing_evidence_ids": counts.missing}
            meta = {"samples": [s.sample_id for s in samples], "history_turns": turns, "history_tokens": history_tokens}
    return SessionRun({
        "data": str(data),
        **meta,
        "budgets": per_budget,
        "providers": {p: r.model_dump() for p, r in PROVIDERS.items()},
        "ttl": ttl_report(ttl),
        "tokenizer": memory.tokens.name,
        "elapsed_s": round(time.perf_counter() - t0, 2),
        "skipped_methods": [m for m in methods if m not in active],
    })


def by_sample(series: dict[str, MethodSeries], name: str, starts: Sequence[tuple[str, int]],
              recalls: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """Per sample (its questions, asked in file order): evidence recall, and the bill of
    its questions under each provider's rules, also against full context's for the same
    questions (when full context ran)."""
    full = series.get("full_context")
    out: dict[str, dict[str, Any]] = {}
    ends = [b for _s, b in starts[1:]] + [len(series[name].billed)]
    for (sid, a), b in zip(starts, ends, strict=True):
        rs = recalls.get(sid, [])
        entry: dict[str, Any] = {"questions": b - a,
                                 "evidence_recall": round(sum(rs) / len(rs), 4) if rs else None}
        for p, billed in (("openai", series[name].billed), ("anthropic", series[name].billed_anthropic)):
            mine = sum(billed[a:b])
            entry[f"billed_{p}"] = round(mine, 1)
            ref = (sum((full.billed if p == "openai" else full.billed_anthropic)[a:b])
                   if full is not None else 0.0)
            entry[f"ratio_billed_vs_full_{p}"] = round(mine / ref, 4) if ref else None
        out[sid] = entry
    return out



def _recall(out: MethodOutput, evidence: Sequence[int]) -> float:
    return sum(1 for p in evidence if p in out.positions) / len(evidence)


def table(result: dict[str, Any]) -> Any:
    from rich.table import Table

    ttl = result.get("ttl", {})
    label = ttl.get("label")
    # the other assumption's figures, beside the top-level ones (`by_ttl`)
    other = next((t for t in TTL_LABELS if t != ttl.get("assumption")), None) if label else None
    t = Table(title=f"Long-history QA session ({result.get('history_turns', 0):,} turns, "
                    f"{result.get('history_tokens', 0):,} tokens of history"
                    + (f"; {label})" if label else ")"))
    # recall is over the questions with evidence: say how many, and what evidence was dropped
    t.caption = "; ".join(
        f"{b}: {e.get('questions_with_evidence', '?')} of {e['questions']} questions with evidence, evidence ids "
        f"skipped {e.get('skipped_evidence_ids', '?')} malformed, {e.get('missing_evidence_ids', '?')} "
        "not in the conversation" for b, e in result["budgets"].items())
    for col in ("budget", "method", "recall", "input tokens", "billed OpenAI", "vs cached full", "billed Anthropic",
                "vs cached full", "cache-stable", "new epochs", "p50 ms"):
        t.add_column(col, justify="left" if col == "method" else "right")
    if other is not None:
        for p in ("OpenAI", "Anthropic"):
            t.add_column(f"{p} vs cached full, {TTL_LABELS[other]}", justify="right")
    for b, entry in result["budgets"].items():
        for name, m in entry["methods"].items():
            alt = m.get("by_ttl", {}).get(other, {}) if other is not None else None
            extra = [] if alt is None else [_pct(alt.get(f"ratio_billed_vs_full_{p}")) for p in PROVIDERS]
            t.add_row(b, name, _pct(m["evidence_recall"]), f"{m['total_tokens']:,}",
                      f"{m['total_billed_openai']:,.0f}", _pct(m["ratio_billed_vs_full_openai"]),
                      f"{m['total_billed_anthropic']:,.0f}", _pct(m["ratio_billed_vs_full_anthropic"]),
                      _pct(m["cache_stable_share"]), str(m["new_epochs"]) if name == TIERMEM else "-",
                      "-" if m["context_ms"]["p50"] is None else f"{m['context_ms']['p50']:.1f}", *extra)
    return t


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"
