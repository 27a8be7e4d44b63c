"""What the cache saves: model calls and time on a second pass and on the next turn.

    python benchmarks/second_pass.py                         # 10 conversations a data set
    python benchmarks/second_pass.py --limit 0 --backend sqlite

For each strategy that calls a model (a summarizer or an embedder) and each
conversation, at a budget of the system prompt plus ``--fraction`` of the rest:

1. cold: an empty cache, fresh message objects, no cached analyses;
2. again: the same history with the same cache, as when an application compresses
   the same history twice in a turn (a retry, a second chain reading the history);
3. next turn: the history plus one user message and one assistant answer, same cache,
   as an application does at the start of every turn.

Reported per data set and strategy, summed over the conversations: summarizer calls and
the tokens sent to the summarizer, embedder calls and texts embedded, and the median
milliseconds per conversation, for each pass; then what the second pass and the next
turn avoided against the cold pass. The models are ctxfold's built-in ones (the
extractive summarizer stands in for an LLM; the TF-IDF embedder is the default, and
WordLlama runs when its extra is installed), so the
milliseconds are those of local models; with an LLM, every call avoided is a network
round trip and its price. Everything runs offline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ctxfold
from ctxfold import Cache, Compressor, Message, TiktokenCounter, from_openai
from ctxfold.testing import find_data_dir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import ENC, budget_for

Factory = Callable[[Cache], Compressor]

STRATEGIES: dict[str, Factory] = {
    "summarize": lambda c: ctxfold.SummarizingCompressor(cache=c, overflow="best_effort"),
    "semantic": lambda c: ctxfold.SemanticCompressor(cache=c, overflow="best_effort"),
    "semantic (wordllama)": lambda c: ctxfold.SemanticCompressor(
        embedder="wordllama", cache=c, overflow="best_effort"
    ),
    "hierarchical + summarizer": lambda c: ctxfold.HierarchicalCompressor(
        summarizer=ctxfold.ExtractiveSummarizer(), cache=c, overflow="best_effort"
    ),
    "auto + summarizer": lambda c: ctxfold.AutoCompressor(
        summarizer=ctxfold.ExtractiveSummarizer(), cache=c
    ),
    "quality profile": lambda c: ctxfold.HybridCompressor(
        [
            ctxfold.SemanticCompressor(fit="none", cache=c),
            ctxfold.AutoCompressor(summarizer=ctxfold.ExtractiveSummarizer(), cache=c),
        ]
    ),
}
KEYS = ("summarizer_calls", "summarizer_tokens", "embedder_calls", "embedder_texts")
PASSES = ("cold", "again", "next turn")


def next_turn(raw: list[dict[str, Any]]) -> list[Message]:
    return [
        *from_openai(raw),
        Message(
            "user",
            "Thanks. Before we stop, list what is still open, which files or plans we "
            "changed along the way, and anything you would check again tomorrow morning.",
        ),
        Message(
            "assistant",
            "Nothing is open: the change is in place and its tests pass. I would check "
            "the edge cases we discussed once more, and the notes we wrote down earlier.",
        ),
    ]


def run(
    factory: Factory,
    records: list[dict[str, Any]],
    fraction: float,
    make_cache: Callable[[], Cache],
) -> dict[str, tuple[Counter[str], list[float]]]:
    out: dict[str, tuple[Counter[str], list[float]]] = {p: (Counter(), []) for p in PASSES}
    for rec in records:
        raw = rec["messages"]
        budget = budget_for(from_openai(raw), fraction)
        ctxfold.clear_caches()
        cache = make_cache()
        histories = {
            "cold": from_openai(raw),
            "again": from_openai(raw),
            "next turn": next_turn(raw),
        }
        counter = TiktokenCounter(ENC.encoding)  # shared encoding, empty count cache
        for name in PASSES:
            compressor = factory(cache)  # a fresh object each pass: only the cache is shared
            t = time.perf_counter()
            try:
                result = compressor.compress(histories[name], budget=budget, counter=counter)
            except ctxfold.BudgetError:
                continue
            usage, times = out[name]
            times.append((time.perf_counter() - t) * 1000)
            usage.update({k: result.stats.usage.get(k, 0) for k in KEYS})
        cache.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="folder of *.jsonl")
    parser.add_argument("--datasets", nargs="*", default=["locomo", "mini_swe_agent"])
    parser.add_argument("--fraction", type=float, default=0.25)
    parser.add_argument("--limit", type=int, default=10, help="conversations (0: all)")
    parser.add_argument("--backend", choices=("memory", "sqlite"), default="memory")
    parser.add_argument("--strategies", nargs="*", default=list(STRATEGIES))
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)
    data = args.data or find_data_dir(Path(__file__).resolve().parents[1])
    if data is None or not data.is_dir():
        print("benchmark skipped: no data folder (../shared/data or --data)", file=sys.stderr)
        return 0
    tmp = tempfile.TemporaryDirectory()
    serial = iter(range(1_000_000))

    def make_cache() -> Cache:
        if args.backend == "sqlite":
            return ctxfold.storage.get_cache(f"sqlite:///{tmp.name}/cache-{next(serial)}.db")
        return Cache()

    print(
        "| data set | strategy | pass | summarizer calls | tokens to summarizer "
        "| embedder calls | texts embedded | ms (median) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    results = []
    saved_lines = []
    for name in args.datasets:
        path = data / f"{name}.jsonl"
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        if args.limit:
            records = records[: args.limit]
        for label in args.strategies:
            try:
                passes = run(STRATEGIES[label], records, args.fraction, make_cache)
            except ctxfold.MissingDependencyError as exc:
                print(f"| {name} | {label} | skipped: {exc} ||||||")
                continue
            for p in PASSES:
                usage, times = passes[p]
                ms = statistics.median(times) if times else float("nan")
                print(
                    f"| {name} | {label} | {p} | {usage['summarizer_calls']} | "
                    f"{usage['summarizer_tokens']} | {usage['embedder_calls']} | "
                    f"{usage['embedder_texts']} | {ms:.1f} |",
                    flush=True,
                )
                results.append({"dataset": name, "strategy": label, "pass": p, "ms": ms, **usage})
            cold_u, cold_t = passes["cold"]
            for p in ("again", "next turn"):
                u, t = passes[p]
                calls = cold_u["summarizer_calls"] + cold_u["embedder_calls"]
                left = u["summarizer_calls"] + u["embedder_calls"]
                sent = cold_u["summarizer_tokens"]
                texts = cold_u["embedder_texts"]
                ratio = statistics.median(cold_t) / statistics.median(t) if t and cold_t else 0
                saved_lines.append(
                    f"| {name} | {label} | {p} | {calls - left} of {calls} "
                    f"| {sent - u['summarizer_tokens']} of {sent} "
                    f"| {texts - u['embedder_texts']} of {texts} | {ratio:.1f}x |"
                )
    print()
    print(
        "| data set | strategy | pass | model calls avoided | summarizer tokens avoided "
        "| texts not embedded again | speed-up vs cold |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(saved_lines))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
