"""Reversible compaction on the shared data: what the block adds, what it costs, and
whether every compressed history expands back exactly.

    python benchmarks/reversible.py                    # budgets 10% and 25%
    python benchmarks/reversible.py --datasets tau_airline --fractions 0.1

For ``auto`` with ``reversible=True`` (its default) and ``reversible=False``, and
``trim_messages`` as the baseline, in the same run, per data set and budget (the
system prompt plus a fraction of the other tokens, o200k_base):

- ids: of the probe identifiers found in the full history, the share still in the
  output (the compressed text with its note and reference block);
- round trip: the share of outputs that ``ctxfold.expand`` turns back into the input,
  byte for byte (OpenAI dicts), with every id found in the store;
- block: the reference block's tokens as a share of the budget (median and maximum);
- fit: the share of outputs within the budget; ms: median per conversation, cold.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import ctxfold
from ctxfold import TiktokenCounter, from_openai, to_openai
from ctxfold.testing import find_data_dir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import ENC, budget_for, evaluate, text_of, trim_messages_method


def run(records: list[dict[str, Any]], fraction: float, reversible: bool) -> dict[str, Any]:
    ids_found = ids_total = exact = fits = 0
    shares: list[float] = []
    times: list[float] = []
    for rec in records:
        msgs = from_openai(rec["messages"])
        budget = budget_for(msgs, fraction)
        ctxfold.clear_caches()
        store = ctxfold.MemoryStore()
        compressor = ctxfold.AutoCompressor(reversible=reversible, store=store)
        counter = TiktokenCounter(ENC.encoding)
        t = time.perf_counter()
        result = compressor.compress(from_openai(rec["messages"]), budget=budget, counter=counter)
        times.append((time.perf_counter() - t) * 1000)
        fits += result.stats.tokens_after <= budget
        full, shown = text_of(msgs), text_of(list(result.messages))
        for ident in rec.get("probes", {}).get("identifiers", []):
            if ident in full:
                ids_total += 1
                ids_found += ident in shown
        if reversible:
            back = ctxfold.expand(result, store=store)
            exact += back.complete and to_openai(back.messages) == to_openai(msgs)
            block = [
                m
                for m in result.messages
                if m.metadata.get("ctxfold", {}).get("kind") == "references"
            ]
            shares.append(sum(ENC.count_message(m) for m in block) / budget)
    n = len(records)
    return {
        "ids": ids_found / ids_total if ids_total else None,
        "round_trip": exact / n if reversible else None,
        "block_median": statistics.median(shares) if shares else None,
        "block_max": max(shares) if shares else None,
        "fit": fits / n,
        "ms": statistics.median(times),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument(
        "--datasets", nargs="*", default=["tau_airline", "swe_agent", "mini_swe_agent", "locomo"]
    )
    parser.add_argument("--fractions", nargs="*", type=float, default=[0.1, 0.25])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    data = args.data or find_data_dir(Path(__file__).resolve().parents[1])
    if data is None:
        print("benchmark skipped: no data folder (../shared/data or --data)", file=sys.stderr)
        return 0
    trim = trim_messages_method()
    print(
        "| data set | budget | method | ids | round trip | block (median / max of budget) "
        "| fit | ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    results = []

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    for name in args.datasets:
        path = data / f"{name}.jsonl"
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for fraction in args.fractions:
            rows = {
                "auto reversible": run(records, fraction, True),
                "auto (reversible=False)": run(records, fraction, False),
            }
            if trim is not None:
                r = evaluate(records, trim, fraction, 1)
                rows["langchain trim_messages"] = {
                    "ids": r["ids"],
                    "round_trip": None,
                    "block_median": None,
                    "block_max": None,
                    "fit": r["fit"],
                    "ms": r["ms"],
                }
            for method, r in rows.items():
                block = (
                    "-"
                    if r["block_median"] is None
                    else f"{r['block_median']:.1%} / {r['block_max']:.1%}"
                )
                print(
                    f"| {name} | {fraction:.0%} | {method} | {pct(r['ids'])} | "
                    f"{pct(r['round_trip'])} | {block} | {pct(r['fit'])} | {r['ms']:.1f} |",
                    flush=True,
                )
                results.append({"dataset": name, "fraction": fraction, "method": method, **r})
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
