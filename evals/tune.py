"""`tiermem tune`: evidence recall and billed cost of candidate configs at several budgets,
on your own conversations, in one run.

    tiermem tune support.jsonl --budgets 500,1000,2000 --grid layer_shares.tail=0.05,0.2 \\
        --grid layer_shares.summary=0.05,0.1 --json-out tune.json --write-config best.toml

Candidates: the base config (`--config FILE`, else the global `--config` / env
`TIERMEM_CONFIG`, else the defaults; env `TIERMEM_*` applies as always) with each
combination of the `--grid KEY=V1,V2` values (KEY dotted for nested settings; each value
parsed as JSON, else taken as a string; values cannot contain commas). With no grid there
is one candidate, the base. Every candidate is validated before anything runs, so a grid
over a share the planner does not read fails at once, naming what to grid instead
(`slice_shares.<class>.tail`: `layer_shares.tail`; tiermem.config `_unread_share`). The
budget's split is `layer_shares` (pinned, summary, tail: the same for every query class);
`slice_shares.default.retrieved` / `.new_subtask.retrieved` cap a narrow turn's retrieved
turns at min(share x the room left, 0.1 x the budget), so they change a context only below
about 0.1 (planner.build.NARROW_RETRIEVED_SHARE); a recall takes all the room left.

Each candidate gets a fresh Memory in a temporary data dir (hot tier on, as in the
evals; deleted afterwards) and replays every conversation of the data file
(`evals.conversations`: the conversations format or LoCoMo) once per budget, each replay
into a copy of its own (`<id>-b<budget>`, its own namespace, so that nothing is retrieved
across conversations or copies): the planner keeps one prompt-cache epoch per
conversation, and its key holds the budget, so builds at several budgets in turn on one
conversation would each start a new epoch and measure a context that never caches:

- **cost** (`evals.cost.replay_tiermem`, the turn-by-turn replay `tiermem eval cost`
  runs, so a budget's billed and cache-stable figures are eval cost's for the same
  data, config and budget): messages are appended one by one; at each user message the
  context for it is built at the copy's budget (the turn's embedding done first, as the
  background indexer would have), and billed by `evals.cost`'s token-level model of
  OpenAI's automatic prompt caching (a cached prefix from 1,024 tokens, in 128-token
  steps, the caches' lifetime as eval cost takes it from the messages' `created_at`) at
  the candidate's `pricing`: cached input at its `cached_input_ratio` of the input price
  (default a tenth), and in USD at its `input_per_mtok`. Full context (every message so
  far) is billed the same way, for `vs full`.
- **recall** (`evals.locomo.score` / `summarize`): once a conversation is in, each
  probe's question is asked of each budget's copy, after its replay (the probes one
  after another); evidence recall is the share of its evidence messages the context
  includes verbatim or trimmed, averaged over probes with evidence; answer coverage as
  in `evals.locomo` for probes with an answer.

Best: the highest recall (ties: lower billed) among the (candidate, budget)
points that meet `--min-recall` (then the cheapest that meets it wins instead) and
`--max-cost-ratio` (billed / full context billed); with no probes, the cheapest.
`--write-config` writes the best candidate as a file in sections (TOML, JSON for a name
ending in .json): the whole effective config it was measured under (the base file, env,
its grid values; `best_toml`), the budget and figures in a comment. A TOML name where a
candidate holds a null TOML cannot say (`pricing.min_prefix_tokens`) is refused before the
run (exit 2, `cli._tunes_to_toml`), not after it.
`--plot` draws recall against billed cost, one point per candidate and budget.

**Reply recall** (`evals.attribution`, no labels needed): each assistant reply's sources,
the earlier turns outside the recent window that its sentences restate (lexically and by
meaning, thresholds documented there), found once from the log; at each user message the
context built at each budget is scored by the share of the next reply's sources it
contained. Where the data has probes, `reply_recall_vs_evidence_recall` gives the Spearman
correlation of the two measures over the points, overall and within each budget.
Best: ranked by evidence recall where there are probes, else by reply recall.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import Progress
from rich.table import Table

from tiermem.config import CONFIG_ENV, SECRETS_LEFT_OUT, Config, export_text, leave_out_secrets, redact
from tiermem.config_sections import absolute_paths, anchor_paths, flatten, read_file
from tiermem.evals.attribution import ReplyScore, attribute, spearman
from tiermem.evals.baselines import (
    ConvView,
    close_memory,
    full_context,
    mean,
    no_context,
    open_memory,
    suffixed_id,
    tiermem_context,
)
from tiermem.evals.conversations import Dataset
from tiermem.evals.cost import (
    TTL_EXPIRE,
    TTL_LABELS,
    USD_PER_MTOK,
    MethodSeries,
    Renderer,
    priced,
    replay_tiermem,
)
from tiermem.evals.locomo import QA, EvidenceCounts, Question, Record, score, summarize
from tiermem.memory import Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import BudgetTooSmall, ValidationError
from tiermem.tiers.models import ENVELOPE_FIELDS, MAX_BUDGET_TOKENS, message_text
from tiermem.tiers.tokens import messages_tokens

MAX_CANDIDATES = 64  # a grid is a product: refuse one that would run for hours by mistake
FULL = "full_context"


# -- candidates -------------------------------------------------------------------------------


def parse_budgets(text: str) -> list[int]:
    """'500,1000,2000' -> [500, 1000, 2000] (sorted, deduplicated)."""
    try:
        out = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise ValidationError("budgets", f"{text!r} is not a comma-separated list of integers") from None
    if not out or out[0] < 1:
        raise ValidationError("budgets", f"{text!r}: give at least one positive number of tokens")
    if out[-1] > MAX_BUDGET_TOKENS:  # what context() takes: refused here, not after the run began
        raise ValidationError("budgets", f"{out[-1]} is over the most a budget may be ({MAX_BUDGET_TOKENS} tokens)")
    return out


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_grid(specs: Sequence[str]) -> dict[str, list[Any]]:
    """['retrieval_k=10,20', ...] -> {'retrieval_k': [10, 20], ...}."""
    grid: dict[str, list[Any]] = {}
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        if not sep or not key or not values.strip():
            raise ValidationError("grid", f"{spec!r} is not KEY=V1,V2,...")
        if not all(part.strip() for part in key.split(".")):
            raise ValidationError("grid", f"{key!r} is not a setting's name (dotted parts must not be empty)")
        if key in grid:
            raise ValidationError("grid", f"{key!r} is given twice")
        for other in grid:
            # `a=1` and `a.x=2` both set `a`: the first a value, the second a part of it
            if other.startswith(key + ".") or key.startswith(other + "."):
                whole, part = sorted((key, other), key=len)
                raise ValidationError("grid", f"{whole!r} and {part!r} overlap: {whole!r} sets the whole of "
                                      f"what {part!r} sets part of; give one")
        grid[key] = [_value(v.strip()) for v in values.split(",")]
    return grid


def _set(d: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {})
    d[parts[-1]] = value


@dataclass
class Candidate:
    name: str
    values: dict[str, Any]  # dotted key -> value, from the grid
    overrides: dict[str, Any]  # the same, nested, as Config keyword arguments
    config: Config


def candidates(base: Path | None, grid: dict[str, list[Any]]) -> list[Candidate]:
    """Every combination of the grid over the base config, each validated now."""
    keys = list(grid)
    combos = list(itertools.product(*(grid[k] for k in keys)))
    if len(combos) > MAX_CANDIDATES:
        raise ValidationError("grid", f"{len(combos)} candidates exceed the limit of {MAX_CANDIDATES}")
    out: list[Candidate] = []
    for i, combo in enumerate(combos):
        values = dict(zip(keys, combo, strict=True))
        overrides: dict[str, Any] = {}
        for k, v in values.items():
            _set(overrides, k, v)
        # the data dir is the run's own temporary one (open_memory sets it)
        cfg = Config.load(base, **overrides)
        out.append(Candidate(f"c{i}", values, overrides, cfg))
    return out


def effective(cfg: Config) -> dict[str, Any]:
    """A candidate's whole config as JSON, secrets redacted, without the temporary data dir."""
    return {k: redact(k, v) for k, v in cfg.model_dump(mode="json").items() if k != "data_dir"}


# -- the run ----------------------------------------------------------------------------------


@dataclass
class Point:
    budget: int
    series: MethodSeries = field(default_factory=MethodSeries)
    records: list[Record] = field(default_factory=list)
    too_small: int = 0  # builds refused: the latest user message alone was over the budget
    reply: ReplyScore = field(default_factory=ReplyScore)  # label-free: the replies' sources contained


Sources = dict[str, dict[int, list[int]]]  # conversation id -> user message index -> source indexes


def reply_sources(data: Dataset, embedder: Embedder) -> Sources:
    """Each reply's sources (`evals.attribution`), once per run: they depend on the log only."""
    return {c.conversation_id: {r.user_index: r.sources for r in attribute(c.messages, embedder)}
            for c in data.conversations}


def copy_names(memory: Memory, cid: str, budgets: Sequence[int], taken: set[str]) -> dict[int, str]:
    """Per budget, the conversation (and namespace: nothing is retrieved across the copies)
    that budget's replay of `cid` is written to: `<cid>-b<budget>`, within max_id_chars,
    made unique against `taken` and the data dir as the evals make ids unique."""
    out: dict[int, str] = {}
    for b in budgets:
        name = suffixed_id(f"{cid}-b{b}", memory.config.max_id_chars,
                           lambda x: x in taken or memory.cold.key_of(x, x) is not None)
        taken.add(name)
        out[b] = name
    return out


def run_candidate(
    cand: Candidate,
    data: Dataset,
    budgets: Sequence[int],
    *,
    embedder: Embedder | None,
    hot: bool,
    sources: Sources | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    opened = open_memory(None, hot=hot, embedder=embedder, config=cand.config)
    memory = opened.memory
    renderer = Renderer(memory.tokens)
    rules = priced(cand.config.pricing)  # the candidate's prices, tiermem and full context alike
    points = {b: Point(b, MethodSeries(openai_rules=rules)) for b in budgets}
    full = MethodSeries(openai_rules=rules)
    counts = EvidenceCounts()
    full_tokens: list[float] = []
    taken: set[str] = set()
    t0 = time.perf_counter()
    task = (progress.add_task(f"{cand.name}: replay", total=(data.n_messages + data.n_probes) * len(budgets))
            if progress is not None else None)
    try:
        for conv in data.conversations:
            conv_sources = (sources or {}).get(conv.conversation_id, {})
            names = copy_names(memory, conv.conversation_id, budgets, taken)
            for k, (b, p) in enumerate(points.items()):
                # each budget replays the conversation into a copy of its own, as `eval cost`
                # replays one conversation at one budget: the planner keeps one prompt-cache
                # epoch per conversation and its key holds the budget, so builds at the
                # budgets in turn on one copy each started a new epoch (conv-26 at 2,000
                # tokens: 99.0% of cached full context billed, 9.2% cache-stable, against
                # eval cost's 29.4% and 91.4%)
                cid = ns = names[b]
                view = ConvView(cid)
                series = [full, p.series] if k == 0 else [p.series]  # full context: once per conversation
                for s in series:
                    s.new_prompt()
                positions: list[int] = []
                first = True
                for i, msg in enumerate(conv.messages):
                    positions += memory.append_many(cid, [msg], namespace=ns)
                    if conv.is_user(i):
                        at = msg.get("created_at")  # the build's time, as eval cost takes it (None: no gap)
                        view.refresh(memory)
                        if k == 0:
                            full.add(i + 1, full_context(view), 0.0, renderer=renderer, budget=None, at=at)
                        query = message_text({f: v for f, v in msg.items() if f not in ENVELOPE_FIELDS})
                        src = [positions[j] for j in conv_sources.get(i, [])]
                        try:
                            out, _cache = replay_tiermem(p.series, memory, cid, query, b, namespace=ns, turn=i + 1,
                                                         renderer=renderer, first=first, at=at)
                        except BudgetTooSmall:
                            p.too_small += 1
                            p.reply.add(src, set())  # no context: the reply's sources were all missing
                            continue
                        finally:
                            first = False
                        p.reply.add(src, out.positions)
                    if progress is not None and task is not None:
                        progress.advance(task)
                if conv.messages:  # else nothing wrote the conversation: there is none to catch up
                    memory.catch_up(cid, namespace=ns)
                    view.refresh(memory)
                if k == 0:
                    full_tokens.append(float(view.total_tokens()))
                # recall: once the conversation is in, each probe's question is asked of this
                # budget's copy, after its replay's last build (the probes one after another)
                for probe in conv.probes:
                    idx, missing = conv.evidence_positions(probe)
                    if k == 0:
                        counts.missing += missing
                    q = Question(0, QA(probe.question, probe.answer, probe.category,
                                       [str(e) for e in probe.evidence]), [positions[j] for j in idx])
                    t = time.perf_counter()
                    out = (tiermem_context(memory, cid, probe.question, b, namespace=ns)
                           if conv.messages else no_context())
                    ms = (time.perf_counter() - t) * 1000
                    ok = messages_tokens(memory.tokens, out.messages) == out.tokens
                    p.records.append(score(q, out, ms, b, token_ok=ok))
                    if progress is not None and task is not None:
                        progress.advance(task)
    finally:
        close_memory(opened)
    counts.skipped = data.skipped_evidence
    full_sum = full.summary()
    results: dict[str, Any] = {}
    for b, p in points.items():
        cost = p.series.summary()
        rec = summarize(p.records, full_context_tokens=mean(full_tokens), counts=counts)
        billed_ratio = _ratio(cost["total_billed"], full_sum["total_billed"])
        results[str(b)] = {
            **p.reply.summary(),
            "evidence_recall": rec["evidence_recall"],
            "answer_coverage": rec["answer_coverage"],
            "probes": rec["questions"],
            "probes_with_evidence": rec["questions_with_evidence"],
            "missing_evidence": rec["missing_evidence_ids"],
            "skipped_evidence": rec["skipped_evidence_ids"],
            "probe_context_ms": rec["context_ms"],
            "contexts": len(p.series.tokens),
            "budget_too_small": p.too_small,
            "total_tokens": cost["total_tokens"],
            "total_billed": cost["total_billed"],
            "total_billed_usd": _usd(cost["total_billed"], rules.input_per_mtok),
            "cache_stable_share": cost["cache_stable_share"],
            "new_epochs": cost["new_epochs"],
            "billed_vs_full": billed_ratio,
            # the bill under both cache-lifetime assumptions, as eval cost reports it (the
            # figures above: caches expire by the log's timestamps, eval cost's default)
            "by_ttl": {t: {"total_billed": got["total_billed_openai"],
                           "billed_vs_full": _ratio(got["total_billed_openai"],
                                                    full_sum["by_ttl"][t]["total_billed_openai"])}
                       for t, got in cost["by_ttl"].items()},
            "context_ms": cost["context_ms"],
            "budget_violations": cost["budget_violations"] + rec["budget_violations"],
            "token_mismatches": cost["token_mismatches"] + rec["token_mismatches"],
        }
    return {
        "name": cand.name,
        "values": cand.values,
        "config": effective(cand.config),
        "hot_tier": opened.hot,
        "elapsed_s": round(time.perf_counter() - t0, 2),
        "full_context": {"total_tokens": full_sum["total_tokens"], "total_billed": full_sum["total_billed"],
                         "total_billed_usd": _usd(full_sum["total_billed"], rules.input_per_mtok)},
        "budgets": results,
    }


def _ratio(billed: float, full: float) -> float | None:
    """Billed against full context's bill, as eval cost rounds it."""
    return round(billed / full, 4) if full else None


def _usd(billed_tokens: float, input_per_mtok: float) -> float:
    """Billed tokens (cached ones already weighted by their ratio) at the input price."""
    return round(billed_tokens * input_per_mtok * USD_PER_MTOK, 6)


def recall_key(cands: Sequence[dict[str, Any]]) -> str:
    """The recall that ranks points: evidence recall where the data has labelled probes,
    else the label-free reply recall."""
    labelled = any(r["evidence_recall"] is not None for c in cands for r in c["budgets"].values())
    return "evidence_recall" if labelled else "reply_recall"


def pick_best(cands: Sequence[dict[str, Any]], *, min_recall: float | None = None,
              max_cost_ratio: float | None = None) -> dict[str, Any] | None:
    key = recall_key(cands)
    label = key.replace("_", " ")
    points = [(c, int(b), r) for c in cands for b, r in c["budgets"].items()]
    if max_cost_ratio is not None:
        points = [p for p in points if p[2]["billed_vs_full"] is not None and p[2]["billed_vs_full"] <= max_cost_ratio]
    have_recall = any(p[2][key] is not None for p in points)
    if min_recall is not None:
        points = [p for p in points if p[2][key] is not None and p[2][key] >= min_recall]
    if not points:
        return None
    if min_recall is not None or not have_recall:
        rule = "cheapest" + (f" with {label} >= {min_recall}" if min_recall is not None else " (no recall measure)")
        c, b, r = min(points, key=lambda p: (p[2]["total_billed"], -(p[2][key] or 0.0)))
    else:
        rule = f"highest {label}, then lowest billed"
        c, b, r = max(points, key=lambda p: (p[2][key] or 0.0, -p[2]["total_billed"]))
    if max_cost_ratio is not None:
        rule += f", billed <= {max_cost_ratio} x full context"
    return {"candidate": c["name"], "budget": b, "values": c["values"], "rule": rule, "ranked_by": key,
            "evidence_recall": r["evidence_recall"], "reply_recall": r["reply_recall"],
            "total_billed": r["total_billed"], "billed_vs_full": r["billed_vs_full"]}


def agreement(cands: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How the label-free reply recall ranks the points against evidence recall: Spearman
    over every (candidate, budget) point with both, and within each budget over the
    candidates (where budget, the obvious driver of both, is held fixed)."""
    pts = [(int(b), r["reply_recall"], r["evidence_recall"]) for c in cands for b, r in c["budgets"].items()
           if r["reply_recall"] is not None and r["evidence_recall"] is not None]
    within = {}
    for b in sorted({p[0] for p in pts}):
        sub = [p for p in pts if p[0] == b]
        rho = spearman([p[1] for p in sub], [p[2] for p in sub])
        within[str(b)] = None if rho is None else round(rho, 3)
    rho = spearman([p[1] for p in pts], [p[2] for p in pts])
    return {"points": len(pts), "spearman": None if rho is None else round(rho, 3), "spearman_within_budget": within}


def run_tune(
    data: Dataset,
    budgets: Sequence[int],
    cands: Sequence[Candidate],
    *,
    base: Path | None,
    embedder: Embedder | None,
    hot: bool = True,
    min_recall: float | None = None,
    max_cost_ratio: float | None = None,
    progress: Progress | None = None,
    on_candidate: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    attributor = embedder
    if attributor is None:  # the grid varies the embedding settings: attribute with the base model's
        from tiermem.tiers.embed_onnx import build_embedder

        cfg = cands[0].config
        attributor = build_embedder(cfg.embedding_model, runtime=cfg.embedding_runtime,
                                    batch_size=cfg.embedding_batch_size, cache_dir=cfg.embedding_cache_dir)
    sources = reply_sources(data, attributor)
    done: list[dict[str, Any]] = []
    for cand in cands:
        done.append(run_candidate(cand, data, budgets, embedder=embedder, hot=hot, sources=sources,
                                  progress=progress))
        if on_candidate is not None:
            on_candidate(done[-1])
    return {
        "data": str(data.path),
        "format": data.format,
        "conversations": [c.conversation_id for c in data.conversations],
        "messages": data.n_messages,
        "probes": data.n_probes,
        "replies_with_sources": sum(1 for conv in sources.values() for src in conv.values() if src),
        "budgets": list(budgets),
        "base_config": None if base is None else str(base),
        "elapsed_s": round(time.perf_counter() - t0, 2),
        "candidates": done,
        "reply_recall_vs_evidence_recall": agreement(done),
        "best": pick_best(done, min_recall=min_recall, max_cost_ratio=max_cost_ratio),
    }


def best_toml(result: dict[str, Any], base: Path | None, *, config: Config | None = None,
              with_secrets: bool = False, as_json: bool = False) -> tuple[str, list[str]]:
    """The best candidate as a config file in sections (TOML, or JSON `as_json`): the whole
    effective config it was measured under (`config`, the candidate's; else loaded again
    from the base, env and its grid values, as `candidates` loaded it), so that the file
    loads back to the values measured. It was the base file with the grid values over it,
    which lost what env gave (a setting of TIERMEM_* measured, then not written) and a null
    TOML cannot say (`config.export_text` now refuses one, pointing to JSON). Not the
    run's temporary data dir: the base file's own `data_dir`, where it gives one. Unless
    `with_secrets`, the bearer tokens and URL passwords are left out (`leave_out_secrets`,
    as `config --export` does) and named in a header. Returns the text and those left out."""
    best = result["best"]
    if best is None:
        raise ValidationError("best", "no candidate meets the constraints; nothing to write")
    if config is None:
        overrides: dict[str, Any] = {}
        for k, v in best["values"].items():
            _set(overrides, k, v)
        config = Config.load(base, **overrides)
    # relative paths from env are the working directory's; a file's were joined to its
    # directory as it was read, and the file is written elsewhere
    values = absolute_paths(config.model_dump(mode="json"), os.getcwd())
    del values["data_dir"]
    base_data = anchor_paths(flatten(read_file(base)), base) if base is not None else {}
    if "data_dir" in base_data:
        values["data_dir"] = base_data["data_dir"]
    key = best["ranked_by"]
    recall = "-" if best[key] is None else f"{100 * best[key]:.1f}%"
    header = [f"tiermem tune {result['data']}: candidate {best['candidate']} ({best['rule']})",
              f"at a context budget of {best['budget']} tokens: {key.replace('_', ' ')} {recall}, "
              f"billed {best['total_billed']:,.0f} tokens ({best['billed_vs_full']} x full context)",
              f"base: {base or 'defaults'}, with env TIERMEM_*; use with tiermem --config FILE or env {CONFIG_ENV}=FILE"]
    left_out = [] if with_secrets else leave_out_secrets(values)
    if left_out:
        header.append(SECRETS_LEFT_OUT.format(", ".join(left_out)))
    return export_text(values, as_json=as_json, header=header), left_out


def table(result: dict[str, Any]) -> Table:
    t = Table(title=f"tiermem tune {result['data']} ({len(result['conversations'])} conversation(s), "
              f"{result['messages']} messages, {result['probes']} probes)")
    for col in ("candidate", "values", "budget", "recall %", "reply recall %", "answer %", "billed", "vs full",
                "cache-stable", "p50 ms"):
        t.add_column(col, justify="left" if col in ("candidate", "values") else "right")
    best = result.get("best") or {}
    for c in result["candidates"]:
        values = ", ".join(f"{k}={json.dumps(v)}" for k, v in c["values"].items()) or "(base)"
        for b, r in c["budgets"].items():
            mark = " *" if best.get("candidate") == c["name"] and str(best.get("budget")) == b else ""
            t.add_row(
                c["name"] + mark, values, b,
                "-" if r["evidence_recall"] is None else f"{100 * r['evidence_recall']:.1f}",
                "-" if r["reply_recall"] is None else f"{100 * r['reply_recall']:.1f}",
                "-" if r["answer_coverage"] is None else f"{100 * r['answer_coverage']:.1f}",
                f"{r['total_billed']:,.0f}",
                "-" if r["billed_vs_full"] is None else f"{100 * r['billed_vs_full']:.1f}%",
                "-" if r["cache_stable_share"] is None else f"{100 * r['cache_stable_share']:.1f}%",
                "-" if r["context_ms"]["p50"] is None else f"{r['context_ms']['p50']:.1f}",
            )
        t.add_section()
    t.caption = (f"billed: OpenAI automatic caching at each candidate's pricing, {TTL_LABELS[TTL_EXPIRE]}; "
                 "each budget replays the conversation on its own, as tiermem eval cost does (the same figures)")
    return t

