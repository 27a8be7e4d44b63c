"""Time `auto` on a cold call and on the next turn of the same conversation.

    python benchmarks/next_turn.py [--fraction 0.25] [--datasets locomo mini_swe_agent]

Cold: empty caches and fresh message objects. Next turn: the same history plus one new
user message, compressed again with the same counter, as an application does each turn;
the analyses of the messages seen before come from ctxfold's cache.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import ctxfold
from ctxfold import AutoCompressor, Message, TiktokenCounter, from_openai, share_budget
from ctxfold.testing import find_data_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fraction", type=float, default=0.25)
    parser.add_argument("--datasets", nargs="*", default=["locomo", "mini_swe_agent"])
    args = parser.parse_args(argv)
    data = find_data_dir(Path(__file__).resolve().parents[1])
    if data is None:
        print("benchmark skipped: no data folder (../shared/data)", file=sys.stderr)
        return 0
    encoding = TiktokenCounter("o200k_base").encoding
    print("| data set | cold ms (median) | next turn ms (median) | speed-up |")
    print("|---|---|---|---|")
    for name in args.datasets:
        cold, warm = [], []
        for line in (data / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            raw = json.loads(line)["messages"]
            counter = TiktokenCounter(encoding)
            msgs = from_openai(raw)
            budget = share_budget(msgs, args.fraction, counter)
            ctxfold.clear_caches()
            counter = TiktokenCounter(encoding)
            msgs = from_openai(raw)
            compressor = AutoCompressor()
            t = time.perf_counter()
            compressor.compress(msgs, budget=budget, counter=counter)
            cold.append((time.perf_counter() - t) * 1000)
            grown = [*msgs, Message("user", "What should we do next?")]
            t = time.perf_counter()
            compressor.compress(grown, budget=budget, counter=counter)
            warm.append((time.perf_counter() - t) * 1000)
        c, w = statistics.median(cold), statistics.median(warm)
        print(f"| {name} | {c:.1f} | {w:.1f} | {c / w:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
