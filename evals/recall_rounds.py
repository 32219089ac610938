"""Evidence recall of planner variants (episode keys, a second retrieval round) against the
current planner, in one run, with leave-one-conversation-out weight choice.

    python -m tiermem.evals.recall_rounds --data ../shared/data/locomo-dev.json \\
        --budgets 500,1000,2000,4000 --variant base: --variant hop:hop=1.0 \\
        --variant keys:keys=0.5 --variant both:hop=1.0,keys=0.5 --json-out rounds.json

Each sample of the LoCoMo-format file is ingested alone, into a Memory of its own (its
data dir under `--data-root`, named by its sample_id, with -2, -3, ... for an id the file
repeats, as the figures name it: `locomo.sample_labels`; an id that is not a plain name
(a path such as `/abs` or `..`, a separator, over 64 characters) by its slug and a short
digest, `locomo.sample_dir_names`, so no store is ever made outside `--data-root`; reused
when it holds the sample already; hot tier on, as in
`tiermem eval locomo`). Every question is then asked with every variant at every budget,
as a what-if context (`record=False`): no call extends another's epoch, as in the
standard multi-budget eval, where each call changes the budget and so starts anew. A
variant sets the planner's weights for its calls (`hop`: multihop.HOP_WEIGHT, `dense`:
multihop.HOP_DENSE_WEIGHT, `keys`: episodes.KEY_WEIGHT, `seeds`: multihop.SEED_TURNS,
`keytf`: episodes.KEY_MIN_TF, `spread`: episodes.SPREAD_WEIGHT, `cross`: multihop.HOP_OTHER_EPISODES, `hoproom`: multihop.HOP_MIN_ROOM_TOKENS (0 unless set); unnamed weights stay off;
`density`: density.DENSITY_WEIGHT, `terse`: render.TERSE, `speaker`: speakers.SPEAKER_BOOST, `episode`:
rank.EPISODE, `neighbour`: rank.NEIGHBOUR keep their shipped values unless set; `prf`, `rocchio`,
`fbdocs`, `fbterms`, `fbcommon`: planner.feedback's, `declarative`: query_text.DECLARATIVE,
`lenup`: prior.MAX_LENGTH_UP_Z and `depth`: candidates.TYPICAL_LINE_TOKENS (how many retrieved
candidates are read: the room over it) likewise; `length`: prior.LENGTH_WEIGHT and `lenroom`:
prior.LENGTH_MAX_ROOM_TOKENS are off unless set, as the hop), then they are put back.

Reported per variant and budget: evidence recall pooled over every question with
evidence, by category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial), per sample, context() p50/p99 and the mean tokens per layer as sent
(`slice_tokens`: Plan.slice_tokens(), the latest user message apart); `--baselines` adds the top-k
baselines of `evals.baselines` packed into the same budgets (and the full context, which
ignores the budget: the upper bound). Leave-one-out: for each
sample, the variant with the best pooled recall over the other samples at that budget,
and its recall on the held-out one, against the base variant's (the first); with
fewer than two samples whose questions have evidence there is nothing to hold out, and
no fold is reported.

The file is read as `tiermem eval` reads it (`evals.conversations.checked_samples`, under
the Config in effect), before any data dir is made: a file that is not a list of
samples, or a bad turn (no text, a date before 1970, ...), is refused with import's
error naming the sample and the turn, nothing written. A recall with no question to
average is shown as "-" (null in the JSON), never as 0. Before that, the options are
checked as they are parsed (`add_recall_args`, which fusion_probe, query_paths and
recall_misses share): `--budgets abc` or `0`, a `--json-out` whose directory does not
exist, a `--variant` value that is not a number, a `--from-json` file that is missing
or holds no JSON object are a usage error naming the option (exit 2), nothing read or made.
A `--from-json` object is checked against what --json-out writes (`saved_problem`): one
lacking `variants` or `leave_one_out`, or holding them, the baselines or the records
--loo reads in another shape, is a usage error naming the key where it is
(`variants.base.budgets.2000 has no 'evidence_recall'`), not a traceback in the table.
A `--names` variant that the run's `--variant`s or the saved result's records do not
hold is a usage error naming `--names` and the variants there are (`loo_names`), checked
before any run.

Nothing here names a sample, a speaker, a topic or a question.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiermem.config import Config
from tiermem.evals.baselines import (
    INCLUDED_FIDELITIES,
    ConvView,
    close_memory,
    mean,
    open_memory,
    percentiles,
    rank_all,
    run_baseline,
)
from tiermem.evals.bench import int_list, output_file
from tiermem.evals.conversations import checked_samples
from tiermem.evals.locomo import (
    CATEGORIES,
    EvidenceCounts,
    Sample,
    answer_covered,
    embed_pending,
    ingest_sample,
    resolve_questions,
    sample_dir_names,
    sample_labels,
)
from tiermem.planner import (
    candidates,
    density,
    episodes,
    excerpt,
    feedback,
    multihop,
    prior,
    query_text,
    rank,
    render,
    speakers,
    timeline,
)
from tiermem.planner.plan import Plan
from tiermem.tiers.errors import DataFileError, ValidationError, shown, shown_key
from tiermem.tiers.models import MAX_BUDGET_TOKENS

DEFAULT_DATA = Path("..") / "shared" / "data" / "locomo-dev.json"  # relative to the repo root, as CI runs
DEFAULT_DATA_ROOT = Path("/tmp/tiermem-recall-rounds")
BASELINE_METHODS = ("hybrid_topk", "bm25_topk", "dense_topk", "tail", "full_context")  # full: no budget
# variant key -> (module, constant): what a variant may set; every other one is off
KNOBS: dict[str, tuple[Any, str]] = {
    "hop": (multihop, "HOP_WEIGHT"),
    "dense": (multihop, "HOP_DENSE_WEIGHT"),
    "seeds": (multihop, "SEED_TURNS"),
    "keys": (episodes, "KEY_WEIGHT"),
    "keytf": (episodes, "KEY_MIN_TF"),
    "spread": (episodes, "SPREAD_WEIGHT"),
    "cross": (multihop, "HOP_OTHER_EPISODES"),
    "hoproom": (multihop, "HOP_MIN_ROOM_TOKENS"),
    "density": (density, "DENSITY_WEIGHT"),
    "terse": (render, "TERSE"),
    "speaker": (speakers, "SPEAKER_BOOST"),
    "episode": (rank, "EPISODE"),
    "date": (rank, "DATE"),
    "told": (timeline, "TOLD_DATE"),
    "neighbour": (rank, "NEIGHBOUR"),
    "reply": (rank, "REPLY"),
    "replyroom": (rank, "REPLY_MAX_ROOM_TOKENS"),
    "excerpt": (excerpt, "EXCERPT"),
    "exlong": (excerpt, "EXCERPT_LONG_TOKENS"),
    "excompact": (excerpt, "COMPACT"),
    "exroom": (excerpt, "INLINE_MAX_ROOM_TOKENS"),
    "prf": (feedback, "PRF_WEIGHT"),
    "rocchio": (feedback, "ROCCHIO_WEIGHT"),
    "fbdocs": (feedback, "FB_DOCS"),
    "fbterms": (feedback, "FB_TERMS"),
    "fbcommon": (feedback, "COMMON_SHARE"),
    "declarative": (query_text, "DECLARATIVE"),
    "length": (prior, "LENGTH_WEIGHT"),
    "lenroom": (prior, "LENGTH_MAX_ROOM_TOKENS"),
    "lenup": (prior, "MAX_LENGTH_UP_Z"),
    "depth": (candidates, "TYPICAL_LINE_TOKENS"),
}
# variant keys that set the Memory's stable layers' budget shares (PlannerSettings.layers)
LAYER_KNOBS = {"lpinned": "pinned", "lsummary": "summary", "ltail": "tail"}
MIN_SAMPLE_QUESTIONS = 1  # --sample-questions: every n-th question of a sample, n = questions // this
# leave-one-out needs a sample to hold out and another to choose on
MIN_LOO_SAMPLES = 2
# a turn counts as shown for the second recall figure at these fidelities too
WITH_EXCERPTS = INCLUDED_FIDELITIES | {"excerpt"}
# off unless a variant sets them; the hop's room gate is off too (0), so that a variant's
# hop runs at every budget
OFF: dict[str, float] = {"hop": 0.0, "dense": 0.0, "keys": 0.0, "spread": 0.0, "hoproom": 0,
                         "length": 0.0, "lenroom": 0}


@dataclass(frozen=True)
class Variant:
    name: str
    values: dict[str, float]


def parse_variant(spec: str) -> Variant:
    """'both:hop=1.0,keys=0.5' -> Variant('both', {...}); 'base:' sets nothing (all off)."""
    name, sep, rest = spec.partition(":")
    if not sep or not name.strip():
        raise ValidationError("variant", f"{spec!r} is not NAME:KEY=V,...")
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        k, eq, v = part.partition("=")
        if not eq or (k not in KNOBS and k not in LAYER_KNOBS):
            raise ValidationError("variant", f"{part!r}: keys are {sorted([*KNOBS, *LAYER_KNOBS])}")
        values[k] = float(v)
    return Variant(name.strip(), values)


@contextlib.contextmanager
def applied(v: Variant, layers: dict[str, float] | None = None) -> Iterator[None]:
    """The planner's weights set as the variant says (the rest off) for the block, and
    the stable layers' shares in `layers` (a Memory's PlannerSettings.layers, in place)."""
    saved = {k: getattr(mod, attr) for k, (mod, attr) in KNOBS.items()}
    saved_layers = dict(layers) if layers is not None else {}
    try:
        for k, (mod, attr) in KNOBS.items():
            val = v.values.get(k, OFF.get(k, saved[k]))
            setattr(mod, attr, type(saved[k])(val))
        if layers is not None:
            for k, layer in LAYER_KNOBS.items():
                if k in v.values:
                    layers[layer] = v.values[k]
        yield
    finally:
        for k, (mod, attr) in KNOBS.items():
            setattr(mod, attr, saved[k])
        if layers is not None:
            layers.update(saved_layers)


Rec = tuple[str, int, float]  # sample, category, recall


def _summary(recs: Sequence[Rec], ms: Sequence[float]) -> dict[str, Any]:
    def r(xs: Sequence[float]) -> float | None:
        m = mean(list(xs))
        return None if m is None else round(m, 4)

    samples = sorted({s for s, _c, _r in recs})
    return {
        "evidence_recall": r([x for _s, _c, x in recs]),
        "questions": len(recs),
        "by_category": {str(c): r([x for _s, cat, x in recs if cat == c]) for c in CATEGORIES},
        "by_sample": {s: r([x for ss, _c, x in recs if ss == s]) for s in samples},
        "by_sample_category": {s: {str(c): r([x for ss, cat, x in recs if ss == s and cat == c])
                                   for c in CATEGORIES} for s in samples},
        "context_ms": percentiles(list(ms)) if ms else None,
    }


def leave_one_out(results: dict[str, dict[str, list[Rec]]], variants: Sequence[Variant],
                  budget: str) -> dict[str, Any]:
    """Per held-out sample: the variant chosen on the others (best pooled recall at this
    budget), its held-out recall and by category, and the base variant's (the first)."""
    recs = {v.name: results[v.name][budget] for v in variants}
    samples = sorted({s for s, _c, _r in recs[variants[0].name]})
    base = variants[0].name
    out: dict[str, Any] = {}
    if len(samples) < MIN_LOO_SAMPLES:
        return out  # nothing to choose on once the only sample is held out
    def pooled(name: str, held: str, inside: bool) -> float:
        xs = [x for s, _c, x in recs[name] if (s == held) == inside]
        return sum(xs) / len(xs) if xs else 0.0

    for held in samples:
        def on_others(name: str, held: str = held) -> tuple[float, bool]:
            return pooled(name, held, False), name == base

        chosen = max((v.name for v in variants), key=on_others)
        held_recs = {n: [(s, c, x) for s, c, x in recs[n] if s == held] for n in (base, chosen)}
        out[held] = {
            "chosen": chosen,
            "chosen_on_others": round(pooled(chosen, held, False), 4),
            "held_out": round(pooled(chosen, held, True), 4),
            "base_held_out": round(pooled(base, held, True), 4),
            "held_out_by_category": {str(c): _cat(held_recs[chosen], c) for c in CATEGORIES},
            "base_by_category": {str(c): _cat(held_recs[base], c) for c in CATEGORIES},
        }
    return out


def _cat(recs: Sequence[Rec], c: int) -> float | None:
    xs = [x for _s, cat, x in recs if cat == c]
    return round(sum(xs) / len(xs), 4) if xs else None


@dataclass
class Prepared:
    """One sample ingested into its own Memory, embeddings caught up, and its questions."""

    sample: Any
    memory: Any
    ingested: Any
    questions: list[Any]
    label: str = ""  # the sample's name in the figures: its id, with -2, -3, ... where the file repeats it


def checked_sample_questions(n: int | None) -> int | None:
    """`n` (questions per sample) if it is None or at least MIN_SAMPLE_QUESTIONS, else
    ValidationError naming it: 0 divided by zero, a negative count dropped questions."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < MIN_SAMPLE_QUESTIONS):
        raise ValidationError("sample_questions", f"must be an integer of at least {MIN_SAMPLE_QUESTIONS} "
                              f"(or none: every question), got {n!r}")
    return n


def load_checked(data: Path) -> list[Sample]:
    """The samples of a LoCoMo file, checked as `tiermem eval` checks it under the Config
    in effect (the one each sample's Memory opens with) before anything is written:
    DataFileError naming the file, and the sample and turn where one is bad."""
    return checked_samples(data, Config.load())


def prepared(samples: Sequence[Any], data_root: Path, *, hot: bool,
             sample_questions: int | None, counts: EvidenceCounts | None = None) -> Iterator[Prepared]:
    """Each sample in its own Memory under `data_root`, with the questions that have
    evidence (every n-th when `sample_questions` is set: spread over the conversation,
    the same every run); the Memory is closed as the loop moves past it. `counts`, when
    given, adds up the evidence ids dropped (malformed, or not in the conversation).
    `samples`: as `load_checked` reads them."""
    checked_sample_questions(sample_questions)
    if counts is None:
        counts = EvidenceCounts()
    labels = sample_labels([s.sample_id for s in samples])
    for sample, label, name in zip(samples, labels, sample_dir_names(labels), strict=True):
        # a data dir per sample: one whose id the file repeats gets its own (its label),
        # not the first's, which holds other turns; named so that it stays under the root
        path = data_root / name
        path.mkdir(parents=True, exist_ok=True)
        opened = open_memory(path, hot=hot)
        try:
            ing = ingest_sample(opened.memory, sample)
            embed_pending(opened.memory, ing.conversation_id)
            qs = [q for q in resolve_questions(ing, 0, None, counts) if q.evidence_positions]
            if sample_questions is not None:
                qs = qs[::max(1, len(qs) // sample_questions)][:sample_questions]
            yield Prepared(sample, opened.memory, ing, qs, label)
        finally:
            close_memory(opened)


def run(data: Path, budgets: Sequence[int], variants: Sequence[Variant], *, data_root: Path,
        sample_questions: int | None, baselines: bool, hot: bool = True) -> dict[str, Any]:
    checked_sample_questions(sample_questions)
    samples = load_checked(data)  # refused before any data dir is made
    results: dict[str, dict[str, list[Rec]]] = {v.name: {str(b): [] for b in budgets} for v in variants}
    # the same questions counting turns shown as an excerpt too, and answer coverage
    with_ex: dict[str, dict[str, list[Rec]]] = {v.name: {str(b): [] for b in budgets} for v in variants}
    covered: dict[str, dict[str, list[Rec]]] = {v.name: {str(b): [] for b in budgets} for v in variants}
    layer_tokens: dict[str, dict[str, list[dict[str, int]]]] = {v.name: {str(b): [] for b in budgets}
                                                                for v in variants}
    latency: dict[str, dict[str, list[float]]] = {v.name: {str(b): [] for b in budgets} for v in variants}
    base_recs: dict[str, dict[str, list[Rec]]] = {m: {str(b): [] for b in budgets} for m in BASELINE_METHODS}
    t0 = time.perf_counter()
    counts = EvidenceCounts()
    for prep in prepared(samples, data_root, hot=hot, sample_questions=sample_questions, counts=counts):
        memory, ing, qs = prep.memory, prep.ingested, prep.questions
        cid = ing.conversation_id
        view = ConvView.load(memory, cid) if baselines else None
        for v in variants:
            with applied(v, memory.planner.settings.layers):
                for q in qs:
                    for b in budgets:
                        t = time.perf_counter()
                        ctx = memory.context(cid, q.qa.question, budget=b, namespace=cid, record=False)
                        latency[v.name][str(b)].append((time.perf_counter() - t) * 1000)
                        key = (prep.label, q.qa.category)
                        for fids, into in ((INCLUDED_FIDELITIES, results), (WITH_EXCERPTS, with_ex)):
                            got = {p for it in ctx.plan.items if it.conversation_id == cid
                                   and it.fidelity in fids for p in it.positions}
                            hit = sum(1 for p in q.evidence_positions if p in got)
                            into[v.name][str(b)].append((*key, hit / len(q.evidence_positions)))
                        cov = answer_covered(q.qa.answer, context_text(ctx.messages)) if q.qa.answer else None
                        if cov is not None:
                            covered[v.name][str(b)].append((*key, float(cov)))
                        layer_tokens[v.name][str(b)].append(slice_tokens(ctx.plan))
        if view is not None:
            for q in qs:
                rankings = rank_all(memory, view, q.qa.question, BASELINE_METHODS)
                for b in budgets:
                    for m in BASELINE_METHODS:
                        packed, _ms = run_baseline(m, view, rankings, b)
                        hit = sum(1 for p in q.evidence_positions if p in packed.positions)
                        base_recs[m][str(b)].append(
                            (prep.label, q.qa.category, hit / len(q.evidence_positions)))
    out: dict[str, Any] = {
        "data": str(data),
        "samples": sample_labels([s.sample_id for s in samples]),  # as the records name them
        "budgets": list(budgets),
        "sample_questions": sample_questions,
        # evidence ids dropped from the questions (malformed / not in the conversation), as
        # `tiermem eval locomo` reports them
        "skipped_evidence_ids": counts.skipped,
        "missing_evidence_ids": counts.missing,
        "elapsed_s": round(time.perf_counter() - t0, 1),
        "variants": {v.name: {"values": v.values,
                              "budgets": {str(b): {**_summary(results[v.name][str(b)], latency[v.name][str(b)]),
                                                   "with_excerpts": _summary(with_ex[v.name][str(b)], []),
                                                   "answer_coverage": _summary(covered[v.name][str(b)], []),
                                                   "layer_tokens": mean_layers(layer_tokens[v.name][str(b)])}
                                          for b in budgets}} for v in variants},
        "leave_one_out": {str(b): leave_one_out(results, variants, str(b)) for b in budgets},
        # every (sample, category, recall), for leave-one-out over any subset of the variants
        "records": {v.name: {str(b): results[v.name][str(b)] for b in budgets} for v in variants},
        "records_with_excerpts": {v.name: {str(b): with_ex[v.name][str(b)] for b in budgets} for v in variants},
        # (sample, category, 1.0 / 0.0): the normalized answer is in the context text
        "records_answer": {v.name: {str(b): covered[v.name][str(b)] for b in budgets} for v in variants},
    }
    if baselines:
        out["baselines"] = {m: {str(b): _summary(base_recs[m][str(b)], []) for b in budgets}
                            for m in BASELINE_METHODS}
    return out


def context_text(messages: Sequence[dict[str, Any]]) -> str:
    """Every message's text, for answer coverage."""
    return "\n".join(m["content"] if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
                     for m in messages)


# the reason the planner gives the latest user message's item (planner.build `_items`),
# whose tokens are that message's own as sent (message_tokens of what is sent)
LATEST_REASON = "the latest user message is always kept"


def slice_tokens(plan: Plan) -> dict[str, int]:
    """The plan's tokens by layer (system, pinned, summary, tail, retrieved; the latest
    user message apart, as `latest`) as sent: `Plan.slice_tokens()` (a block's header and
    shared session headings once; the layers sum to at most the context's tokens), the
    latest message's tokens taken out of the tail's (a message of its own, which its item
    counts exactly). Before, the items' own counts were summed, each with what it would
    cost alone (a session heading the block's lines share), so a block was overstated:
    the layers could sum past the budget, and past what `explain()` and /metrics say."""
    out = plan.slice_tokens()
    latest = sum(it.tokens for it in plan.items if it.reason == LATEST_REASON)
    if latest > 0:
        tail = out.pop("tail", 0)
        out["latest"] = min(latest, tail)  # never more than the tail sent (a scaled-down plan)
        if tail > out["latest"]:
            out["tail"] = tail - out["latest"]
    return out


def mean_layers(rows: Sequence[dict[str, int]]) -> dict[str, float]:
    """Mean tokens per layer over the calls (a layer a call lacks counts 0)."""
    names = sorted({k for r in rows for k in r})
    return {k: round(sum(r.get(k, 0) for r in rows) / len(rows), 1) for k in names} if rows else {}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def table(result: dict[str, Any]) -> str:
    lines = []
    cats = "".join(f" {'c' + str(c):>6}" for c in CATEGORIES)
    lines.append(f"{'variant':<14} {'budget':>6} {'recall':>7}{cats} {'p50':>6} {'p99':>6} {'+excpt':>6} "
                 f"{'answer':>6}  layers")
    rows = [(n, r) for n, r in result["variants"].items()] + [(m, {"budgets": r})
                                                            for m, r in result.get("baselines", {}).items()]
    for name, r in rows:
        for b, s in r["budgets"].items():
            c = "".join(f" {_pct(s['by_category'][str(k)]):>6}" for k in CATEGORIES)
            ms = s.get("context_ms") or {}
            p50 = "-" if ms.get("p50") is None else f"{ms['p50']:.1f}"
            p99 = "-" if ms.get("p99") is None else f"{ms['p99']:.1f}"
            ex = _pct((s.get("with_excerpts") or {}).get("evidence_recall"))
            cov = _pct((s.get("answer_coverage") or {}).get("evidence_recall"))
            lay = " ".join(f"{k}={v:.0f}" for k, v in (s.get("layer_tokens") or {}).items())
            lines.append(f"{name:<14} {b:>6} {_pct(s['evidence_recall']):>7}{c} {p50:>6} {p99:>6} "
                         f"{ex:>6} {cov:>6}  {lay}")
    for b, folds in result["leave_one_out"].items():
        if not folds:
            lines.append(f"LOO {b}: nothing to hold out (fewer than {MIN_LOO_SAMPLES} samples with evidence)")
        for held, f in folds.items():
            lines.append(f"LOO {b} {held}: chose {f['chosen']} ({100 * f['chosen_on_others']:.1f} on the others), "
                         f"held-out {100 * f['held_out']:.1f} vs base {100 * f['base_held_out']:.1f}")
    return "\n".join(lines)


def loo_one_setting(result: dict[str, Any], names: Sequence[str] | None = None,
                    records: str = "records") -> dict[str, Any]:
    """Leave one conversation out with ONE setting per fold for every budget: for each
    held-out sample, the variant (of `names`, default all; the first is the base) with the
    best recall on the other samples averaged over the budgets (ties: the base), and its
    held-out recall per budget and category beside the base's; then the held-out figures
    pooled over the folds. `records`: "records" (verbatim turns),
    "records_with_excerpts" (excerpts count too) or "records_answer" (answer coverage)."""
    rec = result[records]
    names = list(names or rec)
    budgets = [str(b) for b in result["budgets"]]
    base = names[0]

    def xs(n: str, b: str, held: str, inside: bool, cat: int | None = None) -> list[float]:
        return [x for s, c, x in rec[n][b] if (s == held) == inside and (cat is None or c == cat)]

    def avg(v: list[float]) -> float | None:
        return round(sum(v) / len(v), 4) if v else None

    folds: dict[str, Any] = {}
    pooled: dict[str, dict[str, list[float]]] = {b: {"chosen": [], "base": []} for b in budgets}
    # a fold holds out a sample with records and chooses on another that has some
    scored = [s for s in result["samples"] if any(r[0] == s for n in names for b in budgets for r in rec[n][b])]
    for held in scored if len(scored) >= MIN_LOO_SAMPLES else []:
        def on_others(n: str, held: str = held) -> tuple[float, bool]:
            return sum(avg(xs(n, b, held, False)) or 0.0 for b in budgets) / len(budgets), n == base

        chosen = max(names, key=on_others)
        fold: dict[str, Any] = {"chosen": chosen, "chosen_on_others": round(on_others(chosen)[0], 4),
                                "base_on_others": round(on_others(base)[0], 4), "budgets": {}}
        for b in budgets:
            fold["budgets"][b] = {
                "held_out": avg(xs(chosen, b, held, True)), "base_held_out": avg(xs(base, b, held, True)),
                "by_category": {str(c): avg(xs(chosen, b, held, True, c)) for c in CATEGORIES},
                "base_by_category": {str(c): avg(xs(base, b, held, True, c)) for c in CATEGORIES}}
            pooled[b]["chosen"].extend(xs(chosen, b, held, True))
            pooled[b]["base"].extend(xs(base, b, held, True))
        folds[held] = fold
    return {"records": records, "base": base, "variants": names, "folds": folds,
            "pooled": {b: {k: avg(v) for k, v in d.items()} for b, d in pooled.items()}}


def loo_table(loo: dict[str, Any]) -> str:
    lines = [f"leave-one-out, one setting per fold ({loo['records']}; base {loo['base']}):"]
    if not loo["folds"]:
        lines.append(f"  nothing to hold out (fewer than {MIN_LOO_SAMPLES} samples with records)")
    for held, f in loo["folds"].items():
        lines.append(f"  {held}: chose {f['chosen']} ({100 * f['chosen_on_others']:.2f} on the others, "
                     f"base {100 * f['base_on_others']:.2f})")
        for b, x in f["budgets"].items():
            cats = "/".join(_pct(x["by_category"][str(c)]) for c in CATEGORIES)
            bcats = "/".join(_pct(x["base_by_category"][str(c)]) for c in CATEGORIES)
            lines.append(f"    {b:>5}: held-out {_pct(x['held_out'])} vs base {_pct(x['base_held_out'])}; "
                         f"by category {cats} vs {bcats}")
    lines.append("  pooled held-out: " + "; ".join(
        f"{b}: {_pct(x['chosen'])} vs base {_pct(x['base'])}" for b, x in loo["pooled"].items()))
    return "\n".join(lines)


def add_recall_args(ap: argparse.ArgumentParser, *, budgets: str, sample_questions: bool = True) -> None:
    """The options every eval over `prepared` samples takes: the data file, the budgets
    (`args.budgets`: a list, `budget_list`), the data root its Memories are kept under, the
    questions per sample, a JSON output. Each is checked while the arguments are parsed:
    a bad value is a usage error naming its option (exit 2), before any sample is read or
    ingested and before --data-root is made."""
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    # argparse converts a text default with `type` too: args.budgets is always a list
    ap.add_argument("--budgets", type=budget_list, default=budgets,
                    help=f"comma-separated token budgets, each 1 to {MAX_BUDGET_TOKENS:,}")
    ap.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT,
                    help="one data dir per sample under it, reused between runs")
    if sample_questions:
        ap.add_argument("--sample-questions", type=_sample_questions, default=None,
                        help=f"questions per sample (spread evenly), at least {MIN_SAMPLE_QUESTIONS}")
    # its directory checked now: a typo there lost a run of minutes at its end (a traceback)
    ap.add_argument("--json-out", type=output_file(), default=None)


def report(args: argparse.Namespace, produce: Callable[[], dict[str, Any]],
           table: Callable[[dict[str, Any]], str]) -> int:
    """The rest of a probe's `main` once `add_recall_args`' options are parsed: the result
    `produce` makes, written to --json-out if given, its `table` printed; exit status 0. A
    data file `tiermem eval` would refuse too is one line and exit status 1, not a traceback."""
    try:
        result = produce()
    except DataFileError as exc:
        raise SystemExit(f"error: {exc}") from None
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(result, indent=2))
    print(table(result))
    return 0


_budget_items = int_list(maximum=MAX_BUDGET_TOKENS, unit="tokens")


def budget_list(text: str) -> list[int]:
    """--budgets' argparse type: the budgets sorted, once each (as `parse_budgets` reads
    them), refused while the arguments are parsed (exit 2, the option named; `bench.int_list`)
    unless it gives at least one budget and each is a whole number of tokens a context may
    have (1 to MAX_BUDGET_TOKENS): 'abc' stopped the run with a traceback, and 0 failed in
    the first context() after every sample was ingested."""
    return sorted(set(_budget_items(text)))


def variant_arg(text: str) -> Variant:
    """--variant's argparse type: `parse_variant`, its refusal (or a value that is not a
    number: 'hop=high') a usage error naming the option, not a traceback."""
    try:
        return parse_variant(text)
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(exc.problem) from None
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: each value must be a number (NAME:KEY=V,...)") from None


# what `table` reads of every saved result; --loo reads RECORD_KEYS where the result has them
SAVED_KEYS = ("variants", "leave_one_out")
RECORD_KEYS = ("records", "records_with_excerpts", "records_answer")
FOLD_FIGURES = ("chosen_on_others", "held_out", "base_held_out")  # numbers in every LOO fold
# the optional parts of one budget's figures (`or {}` in `table`) and the figures read of each
SUMMARY_PARTS = {"context_ms": ("p50", "p99"), "with_excerpts": ("evidence_recall",),
                 "answer_coverage": ("evidence_recall",)}
RECORD_FIELDS = 3  # (sample, category, value)
_JSON_KINDS = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
               float: "a number", type(None): "null"}

Check = Callable[[Any, str], str | None]  # (value, where it is) -> what is wrong, None if nothing


def _kind(value: object) -> str:
    return _JSON_KINDS.get(type(value), type(value).__name__)


def _at(where: str, key: object) -> str:
    return f"{where}.{shown_key(key)}"  # a long or odd key (a sample label) quoted and bounded


def _object(value: object, where: str) -> str | None:
    return None if isinstance(value, dict) else f"{where} must be an object, got {_kind(value)}"


def _number(value: object, where: str) -> str | None:
    """A figure the tables show as "-" when null."""
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return None
    return f"{where} must be a number or null, got {_kind(value)}"


def _count(value: object, where: str) -> str | None:
    """A figure the tables format as a number (never null)."""
    return f"{where} must be a number, got null" if value is None else _number(value, where)


def _each(value: object, where: str, check: Check) -> str | None:
    """`value` an object whose every value `check` passes."""
    if (problem := _object(value, where)) is not None:
        return problem
    assert isinstance(value, dict)
    return next((p for k, v in value.items() if (p := check(v, _at(where, k))) is not None), None)


def _has(value: dict[str, Any], keys: Sequence[str], where: str, check: Check) -> str | None:
    """Each of `keys` in `value`, and `check` passes its value."""
    for key in keys:
        problem = check(value[key], _at(where, key)) if key in value else f"{where} has no {key!r}"
        if problem is not None:
            return problem
    return None


def _summary_problem(s: object, where: str) -> str | None:
    """One variant's (or baseline's) figures at one budget, as `table` reads them."""
    if (problem := _object(s, where)) is not None:
        return problem
    assert isinstance(s, dict)
    problem = _has(s, ["evidence_recall"], where, _number) or _has(
        s, ["by_category"], where, lambda cats, at: _each(cats, at, _number) or _has(
            cats, [str(c) for c in CATEGORIES], at, _number))
    for key, figures in SUMMARY_PARTS.items():
        if problem is None and s.get(key):  # absent, null or empty: `table` shows "-"
            at = _at(where, key)
            problem = _object(s[key], at) or next(
                (p for f in figures if (p := _number(s[key].get(f), _at(at, f))) is not None), None)
    if problem is None and s.get("layer_tokens"):
        problem = _each(s["layer_tokens"], _at(where, "layer_tokens"), _count)
    return problem


def _variant_problem(v: object, where: str) -> str | None:
    if (problem := _object(v, where)) is not None:
        return problem
    assert isinstance(v, dict)
    return _has(v, ["budgets"], where, lambda budgets, at: _each(budgets, at, _summary_problem))


def _fold_problem(fold: object, where: str) -> str | None:
    if (problem := _object(fold, where)) is not None:
        return problem
    assert isinstance(fold, dict)
    return _has(fold, ["chosen"], where, lambda _v, _w: None) or _has(fold, FOLD_FIGURES, where, _count)


def _records_problem(result: dict[str, Any]) -> str | None:
    """The records --loo chooses on, where the result has them: at least one variant's,
    each at every budget of `budgets`, each row a (sample, category, value) list."""
    given = [k for k in RECORD_KEYS if k in result]
    if not given:
        return None  # saved without records: --loo has nothing to choose on, and says so
    for key in ("budgets", "samples"):
        if key not in result:
            return f"has no {key!r} (--loo reads it with {given[0]!r})"
        if not isinstance(result[key], list):
            return f"{key} must be a list, got {_kind(result[key])}"
    budgets = [str(b) for b in result["budgets"]]

    def rows(value: object, where: str) -> str | None:
        if not isinstance(value, list):
            return f"{where} must be a list, got {_kind(value)}"
        bad = next((i for i, r in enumerate(value) if not (
            isinstance(r, list) and len(r) == RECORD_FIELDS and _count(r[2], "") is None)), None)
        return None if bad is None else f"{where}[{bad}] must be a [sample, category, value] list"

    def variant(value: object, where: str) -> str | None:
        if (problem := _each(value, where, rows)) is not None:
            return problem
        assert isinstance(value, dict)
        return next((f"{where} has no {shown(b)}" for b in budgets if b not in value), None)

    for key in given:
        problem = _each(result[key], key, variant) or (None if result[key] else f"{key} holds no variant")
        if problem is not None:
            return problem
    return None


def saved_problem(result: dict[str, Any]) -> str | None:
    """What of a saved --json-out result `table` (and --loo) cannot read: the first key
    missing or of the wrong kind, named by where it is (`variants.base.budgets`), else
    None. Whatever --json-out writes reads."""
    missing = [k for k in SAVED_KEYS if k not in result]
    if missing:
        return f"has no {missing[0]!r} (a --json-out result holds {' and '.join(map(repr, SAVED_KEYS))})"
    return (_each(result["variants"], "variants", _variant_problem)
            or _each(result.get("baselines", {}), "baselines",
                     lambda budgets, at: _each(budgets, at, _summary_problem))
            or _each(result["leave_one_out"], "leave_one_out", lambda folds, at: _each(folds, at, _fold_problem))
            or _records_problem(result))


def saved_result(text: str) -> dict[str, Any]:
    """--from-json's argparse type: the result a --json-out run saved, read and parsed
    while the arguments are parsed, so a file that is missing, unreadable, not JSON, not
    one object, or one lacking (or holding in another shape) what the tables and --loo
    read (`saved_problem`) is a usage error naming the option and the key (exit 2), not a
    traceback (a KeyError inside `table`)."""
    try:
        raw = Path(text).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise argparse.ArgumentTypeError(f"{text!r} does not exist") from None
    except IsADirectoryError:
        raise argparse.ArgumentTypeError(f"{text!r} is a directory, not a saved --json-out result") from None
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not UTF-8 text (a saved --json-out result is JSON)") from None
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} cannot be read ({exc.strerror})") from None
    try:
        result = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not JSON ({exc})") from None
    if not isinstance(result, dict):
        raise argparse.ArgumentTypeError(f"{text!r} must hold the JSON object --json-out writes, "
                                         f"got {type(result).__name__}")
    problem = saved_problem(result)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return result


def _sample_questions(text: str) -> int:
    """--sample-questions' argparse type: refused while the arguments are parsed (exit 2,
    the option named), not by a division by zero after the samples are ingested."""
    try:
        n = checked_sample_questions(int(text))
    except (ValueError, ValidationError):
        raise argparse.ArgumentTypeError(f"must be an integer of at least {MIN_SAMPLE_QUESTIONS}, "
                                         f"got {text!r}") from None
    assert n is not None
    return n


def parse_budgets(spec: str) -> list[int]:
    """'500, 2000,500' -> [500, 2000]."""
    return sorted({int(x) for x in spec.split(",") if x.strip()})


def loo_names(spec: str, known: Sequence[str]) -> list[str] | None:
    """--names' variants (None: all), each one `known` holds: the variants a run makes or
    a saved result's records hold. One it does not hold is a ValidationError naming
    --names and the variants there are, not loo_one_setting's KeyError."""
    names = [n for n in (x.strip() for x in spec.split(",")) if n] or None
    unknown = [n for n in names or [] if n not in known]
    if unknown:
        raise ValidationError("--names", f"no variant {unknown[0]!r} (the variants are "
                              f"{', '.join(map(repr, known)) or 'none'})")
    return names


def _record_variants(result: dict[str, Any]) -> list[str]:
    """The variants --loo can choose among in a saved result: those every records key
    holds (saved_problem checked their shape), else the variants of its tables."""
    given = [result[k] for k in RECORD_KEYS if k in result]
    if not given:
        return list(result["variants"])
    return [n for n in given[0] if all(n in rec for rec in given[1:])]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.recall_rounds", description=__doc__.split("\n")[0])
    add_recall_args(ap, budgets="2000")
    ap.add_argument("--variant", type=variant_arg, action="append", default=[],
                    help="NAME:KEY=V,... (the first is the base)")
    ap.add_argument("--baselines", action="store_true", help="also the top-k baselines and the tail")
    ap.add_argument("--loo", action="store_true",
                    help="also leave one conversation out with one setting per fold over every budget")
    # read while the arguments are parsed: a missing file was open()'s traceback
    ap.add_argument("--from-json", dest="saved", type=saved_result, default=None, metavar="PATH",
                    help="no run: the tables (and --loo) of a saved --json-out result")
    ap.add_argument("--names", default="", help="with --loo: the variants to choose among (the first is the base)")
    args = ap.parse_args(argv)
    names: list[str] | None = None
    try:  # before any run: an unknown name was a KeyError after it
        if args.loo:
            names = loo_names(args.names, _record_variants(args.saved) if args.saved is not None
                              else [v.name for v in args.variant or [parse_variant("base:")]])
    except ValidationError as exc:
        ap.error(f"{exc.field}: {exc.problem}")
    if args.saved is not None:
        result = args.saved
    else:
        variants = args.variant or [parse_variant("base:")]
        try:
            result = run(args.data, args.budgets, variants, data_root=args.data_root,
                         sample_questions=args.sample_questions, baselines=args.baselines)
        except DataFileError as exc:  # a file `tiermem eval` would refuse too: one line, exit 1
            raise SystemExit(f"error: {exc}") from None
    if args.loo:
        result["loo"] = {k: loo_one_setting(result, names, k) for k in ("records", "records_with_excerpts", "records_answer")
                         if k in result}
    if args.json_out is not None and args.saved is None:
        args.json_out.write_text(json.dumps(result, indent=2))
    print(table(result))
    for loo in result.get("loo", {}).values():
        print(loo_table(loo))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
