"""PNG plots of eval results (matplotlib, Agg backend: no display needed).

- `recall_vs_budget`: evidence recall against token budget, one line per method, from
  `tiermem eval locomo --json` output (with the LoCoMo paper's DRAGON top-k recall as
  reference points, placed at k x 30 tokens, the paper's typical turn size);
- `cost_curves`: cumulative billed input tokens against turn number, from a cost replay;
- `latency_histogram`: context() latency distribution per method.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter

# LoCoMo paper, Table 3: DRAGON over dialog turns, recall of evidence turns in the top k.
DRAGON_TOPK = {5: 0.567, 10: 0.662, 25: 0.767, 50: 0.827}
TOKENS_PER_TURN = 30
LABELS = {
    "tiermem": "tiermem (planner)",
    "full_context": "full context (no budget)",
    "tail": "tail truncation",
    "dense_topk": "dense top-k (MiniLM)",
    "bm25_topk": "BM25 top-k",
    "hybrid_topk": "hybrid top-k (RRF)",
    "bound": "lower bound (append-only tail)",
    "bound_middle": "lower bound (middle eviction)",
    "floor": "floor (any policy)",
}


def _save(fig: Any, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def _annotate_budgets(ax: Any, budgets: Sequence[int], xs: Sequence[float], ys: Sequence[float]) -> None:
    """Label each plotted point with its token budget (points of one budget per method
    sit apart on a cost axis, so the budget is written beside each, not on the axis)."""
    for b, x, y in zip(budgets, xs, ys, strict=True):
        ax.annotate(f"{b:,}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)


def recall_series(result: Mapping[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """method -> [(budget, recall)] from a locomo result."""
    out: dict[str, list[tuple[int, float]]] = {}
    for b, entry in sorted(result["budgets"].items(), key=lambda kv: int(kv[0])):
        if entry.get("available") and entry.get("evidence_recall") is not None:
            out.setdefault("tiermem", []).append((int(b), float(entry["evidence_recall"])))
        for name, e in entry.get("baselines", {}).items():
            if e.get("evidence_recall") is not None:
                out.setdefault(name, []).append((int(b), float(e["evidence_recall"])))
    return out


def recall_vs_budget(result: Mapping[str, Any], path: Path) -> Path:
    series = recall_series(result)
    fig, ax = plt.subplots(figsize=(10, 4.8))
    for name, pts in series.items():
        if name == "full_context":
            continue
        xs, ys = zip(*pts, strict=True)
        ax.plot(
            xs,
            [100 * y for y in ys],
            marker="o",
            label=LABELS.get(name, name),
            linewidth=2.5 if name == "tiermem" else 1.5,
        )
    if "full_context" in series:
        full_tok = None
        for entry in result["budgets"].values():
            full_tok = entry.get("baselines", {}).get("full_context", {}).get("full_context_tokens")
            break
        label = LABELS["full_context"] + (f", ~{full_tok:,.0f} tokens" if full_tok else "")
        ax.axhline(100 * series["full_context"][0][1], color="gray", linestyle=":", label=label)
    ax.scatter(
        [k * TOKENS_PER_TURN for k in DRAGON_TOPK],
        [100 * v for v in DRAGON_TOPK.values()],
        marker="x",
        color="black",
        label="LoCoMo paper DRAGON top-k (k x 30 tokens)",
        zorder=5,
    )
    ax.set_xscale("log")
    budgets = sorted({b for pts in series.values() for b, _ in pts})
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(budgets)
    ax.set_xticklabels([f"{b:,}" for b in budgets])
    ax.set_xlabel("context budget (tokens)")
    ax.set_ylabel("evidence recall (%)")
    ax.set_ylim(0, 102)
    ax.grid(True, alpha=0.3)
    ax.set_title(
        f"LoCoMo evidence recall vs budget ({len(result.get('samples', []))} conversations, "
        f"hot tier {'on' if result.get('hot_tier') else 'off'})"
    )
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return _save(fig, path)


def cost_curves(series: Mapping[str, Any], path: Path, *, title: str = "") -> Path:
    """`series`: method -> object with `.turn`, `.billed` and `.tokens` lists (cost.MethodSeries)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, s in series.items():
        turns: Sequence[int] = s.turn
        if not turns:
            continue
        cum_billed, cum_raw, a, r = [], [], 0.0, 0.0
        for billed, tokens in zip(s.billed, s.tokens, strict=True):
            a += billed
            r += tokens
            cum_billed.append(a)
            cum_raw.append(r)
        (line,) = ax.plot(
            turns,
            cum_billed,
            label=f"{LABELS.get(name, name)} (with caching)",
            linewidth=2.5 if name == "tiermem" else 1.5,
        )
        ax.plot(
            turns,
            cum_raw,
            linestyle="--",
            color=line.get_color(),
            alpha=0.6,
            label=f"{LABELS.get(name, name)} (no caching)",
        )
    ax.set_xlabel("turn")
    ax.set_ylabel("cumulative input tokens billed")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.set_title(title or "Input tokens billed over a replayed conversation")
    ax.legend(fontsize=8)
    return _save(fig, path)


def latency_histogram(latencies: Mapping[str, Sequence[float]], path: Path, *, title: str = "") -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, values in latencies.items():
        if values:
            ax.hist(list(values), bins=40, alpha=0.55, label=LABELS.get(name, name))
    ax.set_xlabel("context latency (ms)")
    ax.set_ylabel("questions")
    ax.grid(True, alpha=0.3)
    ax.set_title(title or "Context latency")
    ax.legend(fontsize=8)
    return _save(fig, path)


def recall_vs_cost(result: Mapping[str, Any], path: Path, *, title: str = "") -> Path:
    """`result`: `evals.session.run_session(...).result`. Evidence recall against the
    session's bill with caching (OpenAI rules, filled; Anthropic rules, hollow), one
    point per method and budget."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    names = sorted({n for e in result["budgets"].values() for n in e["methods"]})
    for name in names:
        pts = [(int(b), e["methods"][name]) for b, e in sorted(result["budgets"].items(), key=lambda kv: int(kv[0]))
               if name in e["methods"] and e["methods"][name]["evidence_recall"] is not None]
        if not pts:
            continue
        xs = [m["total_billed_openai"] for _b, m in pts]
        ys = [100 * m["evidence_recall"] for _b, m in pts]
        (line,) = ax.plot(xs, ys, marker="o", label=f"{LABELS.get(name, name)} (OpenAI rules)",
                          linewidth=2.5 if name == "tiermem" else 1.2)
        ax.plot([m["total_billed_anthropic"] for _b, m in pts], ys, marker="o", linestyle=":", fillstyle="none",
                color=line.get_color(), label=f"{LABELS.get(name, name)} (Anthropic rules)")
        _annotate_budgets(ax, [b for b, _m in pts], xs, ys)
    ax.set_xscale("log")
    ax.set_xlabel("input tokens billed over the session, with prompt caching")
    ax.set_ylabel("evidence recall (%)")
    ax.grid(True, alpha=0.3)
    ax.set_title(title or "Long-history QA session: recall against billed cost")
    ax.legend(fontsize=7)
    return _save(fig, path)


def tune_recall_vs_cost(result: Mapping[str, Any], path: Path, *, title: str = "") -> Path:
    """`result`: `evals.tune.run_tune(...)`. Recall against billed input tokens, one point per
    candidate and budget (a line per candidate, budgets annotated): evidence recall filled
    where the data has labelled probes, the label-free reply recall hollow and dotted."""
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for c in result["candidates"]:
        pts = sorted(((int(b), r) for b, r in c["budgets"].items()), key=lambda p: p[0])
        values = ", ".join(f"{k}={v}" for k, v in c["values"].items()) or "base"
        color = None
        styles: tuple[tuple[str, dict[str, Any]], ...] = (
            ("evidence_recall", {"marker": "o"}),
            ("reply_recall", {"marker": "s", "linestyle": ":", "fillstyle": "none"}))
        for key, style in styles:
            shown = [(b, r) for b, r in pts if r[key] is not None]
            if not shown:
                continue
            xs = [r["total_billed"] for _b, r in shown]
            ys = [100 * r[key] for _b, r in shown]
            what = "evidence recall" if key == "evidence_recall" else "reply recall (no labels)"
            (line,) = ax.plot(xs, ys, label=f"{c['name']} ({values}): {what}", color=color, **style)
            color = line.get_color()
            _annotate_budgets(ax, [b for b, _r in shown], xs, ys)
    ax.set_xscale("log")
    ax.set_xlabel("input tokens billed over the replay, with prompt caching")
    ax.set_ylabel("recall (%)")
    ax.grid(True, alpha=0.3)
    ax.set_title(title or f"tiermem tune {Path(str(result['data'])).name}: recall against billed cost")
    ax.legend(fontsize=7)
    return _save(fig, path)
