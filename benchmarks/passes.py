"""Count the strategy passes one call makes: how often a ``compress`` or a session
render runs the strategy's ``compact`` (and ``auto``'s assemble-and-count), to show
that no layer retries another in a loop.

    python benchmarks/passes.py                  # every shared conversation
    python benchmarks/passes.py --limit 3

``compress`` (auto, the default) runs on every conversation of ``../shared/data`` at
25%, 10% and 3% of its tokens (``compare.budget_for``); a session (the default) is
replayed turn by turn at 8K and 4K, rendering before every assistant message.
Reported per data set: calls, the mean and the largest number of ``compact`` calls
and of ``assemble`` passes per call.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import ENC, budget_for, shared_data

import ctxfold
from ctxfold import Session, TiktokenCounter, from_openai
from ctxfold.storage import MemoryStore
from ctxfold.strategies.auto import compressor as auto_compressor
from ctxfold.strategies.auto import fit as auto_fit

COUNTS = {"compact": 0, "assemble": 0}


@contextmanager
def counted() -> Iterator[None]:
    """Count ``AutoCompressor.compact`` and ``assemble`` calls while inside."""
    compact = auto_compressor.AutoCompressor.compact
    assemble = auto_fit.assemble

    def compact_counted(self: Any, conv: Any) -> Any:
        COUNTS["compact"] += 1
        return compact(self, conv)

    def assemble_counted(*args: Any, **kwargs: Any) -> Any:
        COUNTS["assemble"] += 1
        return assemble(*args, **kwargs)

    auto_compressor.AutoCompressor.compact = compact_counted  # type: ignore[method-assign]
    auto_fit.assemble = assemble_counted  # type: ignore[assignment]
    try:
        yield
    finally:
        auto_compressor.AutoCompressor.compact = compact  # type: ignore[method-assign]
        auto_fit.assemble = assemble  # type: ignore[assignment]


def measure(call: Callable[[], Any]) -> tuple[int, int]:
    COUNTS.update(compact=0, assemble=0)
    with suppress(ctxfold.BudgetError):
        call()
    return COUNTS["compact"], COUNTS["assemble"]


def run(records: list[dict[str, Any]]) -> dict[str, list[tuple[int, int]]]:
    found: dict[str, list[tuple[int, int]]] = {"compress": [], "session": []}
    counter = TiktokenCounter(ENC.encoding)
    for rec in records:
        msgs = from_openai(rec["messages"])
        for fraction in (0.25, 0.1, 0.03):
            budget = budget_for(msgs, fraction)
            found["compress"].append(
                measure(lambda m=msgs, b=budget: ctxfold.compress(m, budget=b, counter=counter))
            )
        for budget in (8000, 4000):
            session = Session(budget=budget, store=MemoryStore(), counter=counter)
            last = 0
            for k, m in enumerate([*msgs, None]):
                if m is not None and (m.role != "assistant" or k == 0):
                    continue
                session.add(msgs[last:k])
                last = k
                found["session"].append(measure(session.render))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="conversations per data set")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    data = shared_data()
    if data is None:
        return 0
    report: dict[str, Any] = {}
    print(
        "| data set | entry | calls | compact mean | compact max | assemble mean | assemble max |"
    )
    print("|---|---|---|---|---|---|---|")
    with counted():
        for path in sorted(data.glob("*.jsonl")):
            lines = path.read_text(encoding="utf-8").splitlines()
            records = [json.loads(line) for line in lines][: args.limit or None]
            for entry, counts in run(records).items():
                working = [c for c in counts if c[0]] or [(0, 0)]
                row = {
                    "calls": len(counts),
                    "compact_mean": sum(c for c, _ in working) / len(working),
                    "compact_max": max(c for c, _ in counts),
                    "assemble_mean": sum(a for _, a in working) / len(working),
                    "assemble_max": max(a for _, a in counts),
                }
                report[f"{path.stem}/{entry}"] = row
                print(
                    f"| {path.stem} | {entry} | {row['calls']} | {row['compact_mean']:.2f} | "
                    f"{row['compact_max']} | {row['assemble_mean']:.2f} | "
                    f"{row['assemble_max']} |",
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
