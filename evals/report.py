"""Markdown tables for the README, rendered from the evals' ``--json`` output.

    tiermem eval locomo --budget 500 --budget 1000 --budget 2000 --budget 4000 --json > results/locomo.json
    tiermem eval report --locomo results/locomo.json --cost results/cost.json --pressure results/pressure.json

(or ``python -m tiermem.evals.report ...``). Every table says which command produced it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

LABELS = {
    "tiermem": "**tiermem**",
    "full_context": "full context",
    "tail": "tail truncation",
    "dense_topk": "dense top-k",
    "bm25_topk": "BM25 top-k",
    "hybrid_topk": "hybrid top-k (RRF)",
    "bound": "bound: stable layers + append-only tail, no retrieval",
    "bound_middle": "bound, evicting from the middle (head kept across restarts)",
    "floor": "floor: least any policy keeping 1,024 tokens can bill",
}
CATEGORY_NAMES = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}


def _pct(x: Any) -> str:
    return "–" if x is None else f"{100 * float(x):.1f}"


def _int(x: Any) -> str:
    return "–" if x is None else f"{float(x):,.0f}"


def _ms(x: Any) -> str:
    return "–" if x is None else f"{float(x):.1f}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


# counters of what went wrong in a run: each should be 0, and the tables do not show them
FAILURE_COUNTERS = {
    "budget_violations": "over the budget",
    "token_mismatches": "token count mismatches",
    "unverified_positions": "plan positions whose text is not in the context",
    "degraded": "degraded contexts",
}


def failures_line(rows: list[tuple[str, Mapping[str, Any]]]) -> str:
    """One line under a table: the failure counters that are not 0, per row (a label and
    that row's entry), or that every counter the rows carry is 0."""
    bad = []
    for label, e in rows:
        got = [f"{e[k]:,} {what}" for k, what in FAILURE_COUNTERS.items() if e.get(k)]
        if got:
            bad.append(f"{label}: {', '.join(got)}")
    if bad:
        return "**Failures:** " + "; ".join(bad) + "."
    carried = [what for k, what in FAILURE_COUNTERS.items() if any(k in e for _l, e in rows)]
    return "Failures: none (" + ", ".join(carried) + ": 0 in every row)." if carried else ""


def _methods(entry: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    rows: list[tuple[str, Mapping[str, Any]]] = []
    if entry.get("available"):
        rows.append(("tiermem", entry))
    rows.extend(entry.get("baselines", {}).items())
    return rows


def locomo_markdown(result: Mapping[str, Any], *, command: str | None = None) -> str:
    budgets = sorted(result["budgets"], key=int)
    first = result["budgets"][budgets[0]]
    methods = [name for name, _ in _methods(first)]
    n_questions = first.get("questions") or first.get("baselines", {}).get("tail", {}).get("questions", "?")
    hot = f"on, hot budget {result.get('hot_budget_tokens')} tokens" if result.get("hot_tier") else "off"
    lines = [
        f"**LoCoMo** ({', '.join(result.get('samples', []))}; {result.get('turns', '?')} turns; "
        f"{n_questions} questions; hot tier {hot}; tokenizer {result.get('tokenizer')})",
        "",
    ]
    if command:
        lines += [f"`{command}`", ""]
    # older results have no coverage without category 5: their table keeps one answer column per budget
    non_adv = "answer_coverage_non_adversarial" in first
    lines.append("Evidence recall (%) and answer coverage (%) by context budget (tokens). Answer coverage: the "
                 "answer found anywhere in the context's text; \"all\" counts every question with an answer, "
                 "category 5's adversarial answers included"
                 + (", \"excl. c5\" leaves them out" if non_adv else "")
                 + ". tiermem's context also carries speaker-name and session-date headings, which the "
                 "baselines' do not, so an answer that is a name or a date can count for it alone:")
    lines.append("")
    answer_cols = [f"answer (all) @ {int(b):,}" for b in budgets]
    if non_adv:
        answer_cols += [f"answer (excl. c5) @ {int(b):,}" for b in budgets]
    lines.append(_row(["method", *(f"recall @ {int(b):,}" for b in budgets), *answer_cols]))
    lines.append(_row(["---"] + ["---:"] * (len(budgets) + len(answer_cols))))
    for name in methods:
        cells = [LABELS.get(name, name)]
        entries = [
            result["budgets"][b] if name == "tiermem" else result["budgets"][b]["baselines"].get(name, {})
            for b in budgets
        ]
        cells += [_pct(e.get("evidence_recall")) for e in entries]
        cells += [_pct(e.get("answer_coverage")) for e in entries]
        if non_adv:
            cells += [_pct(e.get("answer_coverage_non_adversarial")) for e in entries]
        if name == "full_context":
            cells[0] += f" ({_int(entries[0].get('full_context_tokens'))} tokens)"
        lines.append(_row(cells))
    lines.append("")
    lines.append("Per question category, recall (%), mean tokens and latency at each budget:")
    lines.append("")
    lines.append(
        _row(
            [
                "budget",
                "method",
                *(f"{c} {n}" for c, n in CATEGORY_NAMES.items()),
                "mean tokens",
                "p50 ms",
                "p99 ms",
            ]
        )
    )
    lines.append(_row(["---:", "---"] + ["---:"] * (len(CATEGORY_NAMES) + 3)))
    for b in budgets:
        for name, e in _methods(result["budgets"][b]):
            lines.append(
                _row(
                    [
                        f"{int(b):,}",
                        LABELS.get(name, name),
                        *(_pct(e.get("by_category", {}).get(c)) for c in CATEGORY_NAMES),
                        _int(e.get("mean_context_tokens")),
                        _ms(e.get("context_ms", {}).get("p50")),
                        _ms(e.get("context_ms", {}).get("p99")),
                    ]
                )
            )
    counted = [first, *first.get("baselines", {}).values()]
    skipped = max((e.get("skipped_evidence_ids") or 0 for e in counted), default=0)
    missing = max((e.get("missing_evidence_ids") or 0 for e in counted), default=0)
    lines += ["", f"Evidence ids skipped: {skipped} malformed, {missing} not in the conversation."]
    fails = failures_line([(f"{int(b):,} {LABELS.get(name, name)}", e)
                           for b in budgets for name, e in _methods(result["budgets"][b])])
    if fails:
        lines += ["", fails]
    return "\n".join(lines)


def cost_markdown(result: Mapping[str, Any], *, command: str | None = None) -> str:
    lines = [
        f"**Cost replay** of {result['sample']} ({result['turns_replayed']} turns, "
        f"{result['context_builds']} contexts built, budget {result['budget']:,} tokens; billed on the rendered "
        "token sequence under OpenAI rules (automatic, from 1,024 tokens in 128-token steps, reads at 10%) and "
        "Anthropic rules (breakpoints, writes at 125%, reads at 10%, from 1,024 tokens))",
        "",
    ]
    if command:
        lines += [f"`{command}`", ""]
    cols = ["method", "input tokens", "tokens vs full", "billed OpenAI", "vs cached full", "billed Anthropic",
            "vs cached full", "cache-stable (token prefix)", "new epochs", "p50 ms"]
    lines.append(_row(cols))
    lines.append(_row(["---"] + ["---:"] * (len(cols) - 1)))
    for name, m in result["methods"].items():
        lines.append(
            _row(
                [
                    LABELS.get(name, name),
                    _int(m["total_tokens"]),
                    _pct(m.get("ratio_tokens_vs_full")),
                    _int(m.get("total_billed_openai", m["total_billed"])),
                    _pct(m.get("ratio_billed_vs_full_openai", m.get("ratio_billed_vs_full"))),
                    _int(m.get("total_billed_anthropic")),
                    _pct(m.get("ratio_billed_vs_full_anthropic")),
                    _pct(m.get("cache_stable_share")),
                    str(m.get("new_epochs", "-")) if name in ("tiermem", "bound", "bound_middle") else "-",
                    _ms(m["context_ms"]["p50"]),
                ]
            )
        )
    fails = failures_line([(LABELS.get(name, name), m) for name, m in result["methods"].items()])
    if fails:
        lines += ["", fails]
    return "\n".join(lines)


def pressure_markdown(result: Mapping[str, Any], *, command: str | None = None) -> str:
    lines = [
        f"**Eviction pressure** (seed {result['seed']}, {result['conversations']} generated conversations of "
        f"{', '.join(str(t) for t in result['turns_per_conversation'])} turns)",
        "",
    ]
    if command:
        lines += [f"`{command}`", ""]
    lines.append(
        _row(
            [
                "budget",
                "method",
                "retention %",
                "before changes %",
                "after changes %",
                "leaks / probes",
                "mean tokens",
            ]
        )
    )
    lines.append(_row(["---:", "---"] + ["---:"] * 5))
    for b in sorted(result["budgets"], key=int):
        entry = result["budgets"][b]
        rows: list[tuple[str, Mapping[str, Any]]] = [("tiermem", entry)] if entry.get("available") else []
        rows.extend(entry.get("baselines", {}).items())
        for name, e in rows:
            lines.append(
                _row(
                    [
                        f"{int(b):,}",
                        LABELS.get(name, name),
                        _pct(e.get("retention")),
                        _pct(e.get("retention_before_changes")),
                        _pct(e.get("retention_after_changes")),
                        f"{e.get('leakage')} / {e.get('probes')}",
                        _int(e.get("mean_context_tokens")),
                    ]
                )
            )
    return "\n".join(lines)


def render_markdown(
    *,
    locomo: Mapping[str, Any] | None = None,
    cost: Mapping[str, Any] | None = None,
    pressure: Mapping[str, Any] | None = None,
    commands: Mapping[str, str] | None = None,
) -> str:
    commands = commands or {}
    parts = []
    if locomo is not None:
        parts.append(locomo_markdown(locomo, command=commands.get("locomo")))
    if cost is not None:
        parts.append(cost_markdown(cost, command=commands.get("cost")))
    if pressure is not None:
        parts.append(pressure_markdown(pressure, command=commands.get("pressure")))
    return "\n\n".join(parts) + "\n"


def _load(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise click.ClickException(f"{path} does not hold one JSON object")
    return data


@click.command("report")
@click.option(
    "--locomo",
    "locomo_path",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="output of `tiermem eval locomo --json`",
)
@click.option(
    "--cost",
    "cost_path",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="output of `tiermem eval cost --json`",
)
@click.option(
    "--pressure",
    "pressure_path",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="output of `tiermem eval pressure --json`",
)
@click.option(
    "--locomo-command", default=None, help="the command line that produced --locomo, shown above it"
)
@click.option("--cost-command", default=None)
@click.option("--pressure-command", default=None)
def report_command(
    locomo_path: Path | None,
    cost_path: Path | None,
    pressure_path: Path | None,
    locomo_command: str | None,
    cost_command: str | None,
    pressure_command: str | None,
) -> None:
    """Render markdown result tables (for the README) from the evals' --json output."""
    if not (locomo_path or cost_path or pressure_path):
        raise click.UsageError("give at least one of --locomo, --cost, --pressure")
    cmds = {
        k: v
        for k, v in (("locomo", locomo_command), ("cost", cost_command), ("pressure", pressure_command))
        if v
    }
    click.echo(
        render_markdown(
            locomo=_load(locomo_path), cost=_load(cost_path), pressure=_load(pressure_path), commands=cmds
        ),
        nl=False,
    )


if __name__ == "__main__":  # pragma: no cover
    report_command()
