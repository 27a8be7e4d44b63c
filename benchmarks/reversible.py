"""Reversible compaction on the shared data: what it costs, what it keeps, and whether
every compressed history expands back exactly.

    python benchmarks/reversible.py                    # budgets 10% and 25%
    python benchmarks/reversible.py --datasets tau_airline --fractions 0.1

For ``auto`` with ``reversible=True`` (its default) and ``reversible=False``,
``sliding_window`` reversible (a strategy without a note of its own: the round gets a
block with references), and ``trim_messages`` as the baseline, in the same run, per
data set and budget (the system prompt plus a fraction of the other tokens,
o200k_base):

- ids: of the probe identifiers found in the full history, the share still in the
  output (its text, note and references);
- round trip: the share of outputs that ``ctxfold.expand`` turns back into the input,
  byte for byte (OpenAI dicts), with every id found in the store;
- block: what reversibility adds to the output, as a share of the budget (median and
  maximum): the line naming the round and the references after it;
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


def block_tokens(result: ctxfold.CompressionResult) -> int:
    """Tokens reversibility added: the round's line and the references after it."""
    carrier = next((m for m in result.messages if m.metadata.get("ctxfold", {}).get("round")), None)
    if carrier is None:
        return 0
    lines = carrier.text.split("\n")
    refs = next((k for k, ln in enumerate(lines) if ln.startswith("[ctxfold references")), None)
    return ENC.count_text("\n".join([lines[0], *(lines[refs:] if refs is not None else [])]))


def run(
    records: list[dict[str, Any]], fraction: float, strategy: str, **options: Any
) -> dict[str, Any]:
    ids_found = ids_total = exact = fits = 0
    reversible = options.get("reversible", False)
    shares: list[float] = []
    times: list[float] = []
    for rec in records:
        msgs = from_openai(rec["messages"])
        budget = budget_for(msgs, fraction)
        ctxfold.clear_caches()
        store = ctxfold.MemoryStore()
        compressor = ctxfold.strategies.resolve_strategy(strategy, store=store, **options)
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
            shares.append(block_tokens(result) / budget)
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
                "auto (reversible, the default)": run(records, fraction, "auto", reversible=True),
                "auto reversible=False": run(records, fraction, "auto", reversible=False),
                "sliding_window reversible": run(
                    records, fraction, "sliding_window", reversible=True, overflow="best_effort"
                ),
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
