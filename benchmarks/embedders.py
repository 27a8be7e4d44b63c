"""Compare ctxfold's embedders on near-duplicate detection in real conversations.

    python benchmarks/embedders.py                   # every data set in ../shared/data
    python benchmarks/embedders.py --repeat 5 --embedders tfidf wordllama

The semantic compressor embeds message units and merges those whose cosine similarity
is over a threshold (by default the embedder's own ``duplicate_threshold``), so an
embedder is good for it when near-duplicate messages score high and different messages
score low. No human labels exist for that, so the labels come from the text itself,
within each conversation of the shared data:

- positive: two distinct message texts whose strict character-shingle Jaccard
  similarity (5-character shingles, lowercased, whitespace runs collapsed) is at least
  0.8, i.e. the same text with small edits: a re-run command whose output changed in a
  few numbers, a file viewed again after a one-line edit, a repeated tool result;
- hard negative: a pair with Jaccard in [0.3, 0.5): same template or topic, mostly
  different content (two different file views, two different flight searches);
  as many as there are positives in the conversation, at least 10;
- random negative: a random pair with Jaccard below 0.5; twice the positives, at
  least 20 per conversation, so the chat data (almost no near-duplicates) still
  contributes negatives.

Pairs with Jaccard in [0.5, 0.8) are ambiguous and left out; exact duplicates are left
out too (every embedder gives them cosine 1, and a hash finds them). Only texts of at
least 30 characters are paired, but each conversation is embedded whole (every
distinct message text), as the compressor would embed a history, which matters for
TF-IDF (its idf is fitted on the batch). Sampling is seeded.

The labels are lexical, which favours lexical embedders: this measures "is this
text a re-run of that one", which is what deduplication needs, not paraphrase
detection (where a neural embedder would be expected to do better).

Embedders: ``tfidf`` is the default ``TfidfEmbedder()`` (word 1-2-grams, LSA to 256
dimensions); ``tfidf-1gram`` uses words only; ``tfidf-no-lsa`` has ``dims=4096``, more
than any conversation here spans, so no LSA; ``tfidf-char`` adds character 3-5-grams;
``wordllama`` is ``WordLlamaEmbedder()`` (256 dimensions), ``wordllama-64`` keeps 64.

Reported per embedder, over all pairs: the best F1 over thresholds (and that
threshold), precision and recall at the embedder's ``duplicate_threshold`` (what the
semantic compressor uses unless told otherwise; 0.9 for an embedder without one),
and at 0.9 for comparison, ROC-AUC over all
pairs and over positives against hard negatives only, and milliseconds per 1,000
texts (the conversations' message texts, embedded conversation by conversation;
median of ``--repeat`` runs after a warm-up, so WordLlama's one-off weight loading is
excluded). Everything runs offline.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxfold.exceptions import MissingDependencyError
from ctxfold.models.embedders import Embedder, TfidfEmbedder, WordLlamaEmbedder
from ctxfold.models.similarity import cosine_matrix
from ctxfold.testing import find_data_dir

POSITIVE = 0.8
HARD = (0.3, 0.5)
NEGATIVE_BELOW = 0.5
MIN_CHARS = 30
SHINGLE = 5
FALLBACK_THRESHOLD = 0.9

EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    "tfidf": TfidfEmbedder,
    "tfidf-1gram": lambda: TfidfEmbedder(ngram_range=(1, 1)),
    "tfidf-no-lsa": lambda: TfidfEmbedder(dims=4096),
    "tfidf-char": lambda: TfidfEmbedder(char_ngrams=True),
    "wordllama": WordLlamaEmbedder,
    "wordllama-64": lambda: WordLlamaEmbedder(dim=64),
}


@dataclass
class Conversation:
    source: str
    texts: list[str]  # distinct non-empty message texts, the batch to embed
    pairs: list[tuple[int, int, int, bool]]  # (i, j, label, hard negative)


def message_texts(record: dict[str, Any]) -> list[str]:
    texts = [m.get("content") for m in record["messages"]]
    return sorted({t for t in texts if isinstance(t, str) and t.strip()})


def jaccard_matrix(texts: list[str]) -> Any:
    """Pairwise Jaccard similarity of the texts' character-shingle sets."""
    import numpy as np
    from scipy import sparse

    vocab: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for i, text in enumerate(texts):
        flat = re.sub(r"\s+", " ", text.strip().lower())
        grams = {flat[k : k + SHINGLE] for k in range(max(1, len(flat) - SHINGLE + 1))}
        for g in grams:
            rows.append(i)
            cols.append(vocab.setdefault(g, len(vocab)))
    x = sparse.csr_matrix(
        (np.ones(len(rows)), (rows, cols)), shape=(len(texts), max(1, len(vocab)))
    )
    inter = (x @ x.T).toarray()
    size = np.asarray(x.sum(axis=1)).ravel()
    union = size[:, None] + size[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def labelled_pairs(texts: list[str], rng: random.Random) -> list[tuple[int, int, int, bool]]:
    import numpy as np

    long = [i for i, t in enumerate(texts) if len(t) >= MIN_CHARS]
    if len(long) < 2:
        return []
    jac = jaccard_matrix([texts[i] for i in long])
    a, b = np.triu_indices(len(long), 1)
    values = jac[a, b]
    candidates = list(zip(a.tolist(), b.tolist(), values.tolist(), strict=True))
    positives = [(i, j) for i, j, v in candidates if v >= POSITIVE]
    hard = [(i, j) for i, j, v in candidates if HARD[0] <= v < HARD[1]]
    negative = [(i, j) for i, j, v in candidates if v < NEGATIVE_BELOW]
    hard = rng.sample(hard, min(len(hard), max(10, len(positives))))
    chosen = set(hard)
    rest = [p for p in negative if p not in chosen]
    randoms = rng.sample(rest, min(len(rest), max(20, 2 * len(positives))))
    out = [(long[i], long[j], 1, False) for i, j in positives]
    out += [(long[i], long[j], 0, True) for i, j in hard]
    out += [(long[i], long[j], 0, False) for i, j in randoms]
    return out


def load(data: Path) -> list[Conversation]:
    rng = random.Random(20240601)
    conversations = []
    for path in sorted(data.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts = message_texts(json.loads(line))
                conversations.append(Conversation(path.stem, texts, labelled_pairs(texts, rng)))
    return conversations


def evaluate(
    embedder: Embedder, conversations: list[Conversation], repeat: int
) -> dict[str, float]:
    import numpy as np
    from sklearn.metrics import precision_recall_curve, roc_auc_score

    embedder.embed(conversations[0].texts[:50])  # warm-up: loads weights, imports
    timings = []
    scores: list[float] = []
    for run in range(repeat):
        elapsed = 0.0
        for conv in conversations:
            start = time.perf_counter()
            vectors = embedder.embed(conv.texts)
            elapsed += time.perf_counter() - start
            if run == 0:
                sims = cosine_matrix(vectors)
                scores.extend(float(sims[i, j]) for i, j, _, _ in conv.pairs)
        timings.append(elapsed)
    labels = np.array([p[2] for c in conversations for p in c.pairs])
    hard = np.array([p[3] for c in conversations for p in c.pairs])
    s = np.array(scores)
    precision, recall, thresholds = precision_recall_curve(labels, s)
    f1 = 2 * precision * recall / np.maximum(precision + recall, 1e-12)
    best = int(np.argmax(f1[:-1]))

    def precision_recall(threshold: float) -> tuple[float, float]:
        predicted = s >= threshold
        tp = int((predicted & (labels == 1)).sum())
        return tp / max(1, int(predicted.sum())), tp / max(1, int(labels.sum()))

    own = float(getattr(embedder, "duplicate_threshold", FALLBACK_THRESHOLD))
    p_own, r_own = precision_recall(own)
    p_90, r_90 = precision_recall(FALLBACK_THRESHOLD)
    keep = (labels == 1) | hard
    texts = sum(len(c.texts) for c in conversations)
    return {
        "f1": float(f1[best]),
        "at": float(thresholds[best]),
        "own": own,
        "p": p_own,
        "r": r_own,
        "p90": p_90,
        "r90": r_90,
        "auc": float(roc_auc_score(labels, s)),
        "auc_hard": float(roc_auc_score(labels[keep], s[keep])),
        "ms": statistics.median(timings) / texts * 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="folder of *.jsonl files")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs (median)")
    parser.add_argument("--embedders", nargs="+", default=list(EMBEDDERS), choices=list(EMBEDDERS))
    args = parser.parse_args(argv)
    data = args.data or find_data_dir(Path(__file__).resolve().parent)
    if data is None or not any(data.glob("*.jsonl")):
        print(
            "skipped: the shared conversations are not here; put them in ../shared/data "
            "beside the repo or set CTXFOLD_DATA_DIR"
        )
        return 0
    conversations = load(data)
    by_source: dict[str, list[int]] = {}
    for conv in conversations:
        counts = by_source.setdefault(conv.source, [0, 0, 0, 0])
        counts[0] += len(conv.texts)
        counts[1] += sum(p[2] for p in conv.pairs)
        counts[2] += sum(p[3] for p in conv.pairs)
        counts[3] += sum(not p[2] and not p[3] for p in conv.pairs)
    print(f"Near-duplicate pairs from {data} (texts / positive / hard neg. / random neg.):")
    for source, (n, pos, hard, rand) in by_source.items():
        print(f"- {source}: {n} / {pos} / {hard} / {rand}")
    print()
    print(
        "| embedder | best F1 (threshold) | own threshold | precision / recall there "
        "| precision / recall @0.9 | ROC-AUC | ROC-AUC vs hard neg. | ms / 1000 texts |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in args.embedders:
        try:
            embedder = EMBEDDERS[name]()
        except MissingDependencyError as exc:
            print(f"| {name} | skipped: {exc} | | | | | | |")
            continue
        m = evaluate(embedder, conversations, max(1, args.repeat))
        print(
            f"| {name} | {m['f1']:.3f} ({m['at']:.2f}) | {m['own']:.2f} "
            f"| {m['p']:.3f} / {m['r']:.3f} | {m['p90']:.3f} / {m['r90']:.3f} "
            f"| {m['auc']:.3f} | {m['auc_hard']:.3f} | {m['ms']:.0f} |"
        )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
