"""Time and peak memory of a strategy on very long histories (10K to 100K messages).

    python benchmarks/scaling.py                          # semantic and auto, 10K 40K 100K
    python benchmarks/scaling.py --sizes 10000 --strategies semantic

Each run is a fresh process, so its peak resident memory is its own: the table gives
the peak over the process (imports and the history included), what the compression
added to it, and the wall time of the compression. The history repeats the bundled
example conversations' texts (so near-duplicates occur, as in agent loops) with a
running number in every message, user and assistant turns alternating; the budget is
10% of its tokens.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def history(n: int) -> list[dict[str, str]]:
    texts: list[str] = []
    for path in sorted((REPO / "examples").glob("*.json")):
        for m in json.loads(path.read_text(encoding="utf-8"))["messages"]:
            if isinstance(m.get("content"), str) and m["content"].strip():
                texts.append(m["content"][:2000])
    roles = ("user", "assistant")
    return [
        {"role": roles[k % 2], "content": f"{texts[k % len(texts)]} (step {k})"} for k in range(n)
    ]


def child(strategy: str, n: int) -> None:
    import ctxfold

    msgs = ctxfold.from_openai(history(n))
    counter = ctxfold.get_counter("o200k_base")
    budget = counter.count_messages(msgs) // 10
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    result = ctxfold.compress(
        msgs, budget=budget, strategy=strategy, counter=counter, reversible=False
    )
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "seconds": seconds,
                "peak_mb": peak / 1024,
                "added_mb": (peak - before) / 1024,
                "fits": result.stats.fits,
                "messages_after": result.stats.messages_after,
            }
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=[10_000, 40_000, 100_000])
    parser.add_argument("--strategies", nargs="*", default=["semantic", "auto"])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    print("| strategy | messages | seconds | peak MB | added MB | fits |")
    print("|---|---|---|---|---|---|")
    for strategy in args.strategies:
        for n in args.sizes:
            done = subprocess.run(
                [sys.executable, __file__, "--child", strategy, str(n)],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                tail = (done.stderr.strip().splitlines() or ["?"])[-1]
                print(f"| {strategy} | {n} | failed: exit {done.returncode}: {tail} ||||")
                continue
            r = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"| {strategy} | {n} | {r['seconds']:.1f} | {r['peak_mb']:.0f} | "
                f"{r['added_mb']:.0f} | {r['fits']} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
