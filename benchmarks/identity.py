"""Record and compare output hashes: does a change keep every strategy's output?

    python benchmarks/identity.py record before.json     # on the old code
    python benchmarks/identity.py compare before.json    # on the new code: exit 1 on a change

For every strategy (and the turn renderers on the agent runs) and every conversation of
``../shared/data`` at budgets of 25% and 10% (``compare.budget_for``), the output
messages are serialized exactly (role, content, name, ids, tool calls, metadata) and
hashed with SHA-256; the trace (action and reason of every decision) is hashed apart.
A restructuring that claims "no change of behaviour" must leave every hash equal.

The script runs itself with ``PYTHONHASHSEED=0``, so that two runs compare even if some
computation came to depend on the order of a set again (scores once summed floats over
sets of words, whose order follows the hash seed: a near tie fell either way from one
process to the next, until ``math.fsum``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ctxfold
from ctxfold import Message, TiktokenCounter, from_openai
from ctxfold.testing import find_data_dir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import budget_for

#: Each strategy as the benchmarks run it (best_effort where pinned content may not fit).
STRATEGIES: dict[str, dict[str, Any]] = {
    "auto": {},
    "auto_plain": {"reversible": False},
    "sliding_window": {"overflow": "best_effort"},
    "summarize": {"cache": False},
    "semantic": {"cache": False, "overflow": "best_effort"},
    "hierarchical": {"overflow": "best_effort"},
    "hybrid": {},
}
RENDERERS = ("single_user_coalesced", "full_history")
FRACTIONS = (0.25, 0.10)


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _wire(messages: list[Message]) -> list[dict[str, Any]]:
    return [{**m.to_openai(), "metadata": m.metadata} for m in messages]


def _run_strategy(
    name: str, options: dict[str, Any], raw: list[dict[str, Any]], budget: int
) -> dict[str, str]:
    strategy = "auto" if name == "auto_plain" else name
    ctxfold.clear_caches()
    counter = TiktokenCounter("o200k_base")
    try:
        result = ctxfold.compress(
            from_openai(raw), budget=budget, strategy=strategy, counter=counter, **options
        )
    except ctxfold.BudgetError as exc:
        return {"error": type(exc).__name__}
    label = [getattr(d, "label", d.reason) for d in result.trace]  # older Decisions: reason
    trace = [
        (d.index, d.action, lab, d.tokens_before, d.tokens_after)
        for d, lab in zip(result.trace, label, strict=True)
    ]
    return {"messages": _digest(_wire(list(result.messages))), "trace": _digest(trace)}


def _run_renderer(name: str, raw: list[dict[str, Any]]) -> dict[str, str]:
    turns, memory = ctxfold.turns_from_messages(raw)
    messages, _ = ctxfold.render(turns, memory, renderer=name)
    return {"messages": _digest(_wire(list(messages)))}


def outputs(data: Path, limit: int) -> Iterator[tuple[str, dict[str, str]]]:
    """``(key, hashes)`` for every strategy, conversation and budget, in a fixed order."""
    for path in sorted(data.glob("*.jsonl")):
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for rec in records[: limit or None]:
            raw = rec["messages"]
            msgs = from_openai(raw)
            for fraction in FRACTIONS:
                budget = budget_for(msgs, fraction)
                for name, options in STRATEGIES.items():
                    key = f"{path.stem}/{rec['id']}/{fraction:.2f}/{name}"
                    yield key, _run_strategy(name, options, raw, budget)
            if any(m.get("tool_calls") for m in raw):
                for renderer in RENDERERS:
                    yield f"{path.stem}/{rec['id']}/render/{renderer}", _run_renderer(renderer, raw)


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":  # comparable runs: see the docstring
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        return subprocess.run(
            [sys.executable, __file__, *(argv or sys.argv[1:])], env=env
        ).returncode
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["record", "compare"])
    parser.add_argument("file", type=Path, help="the hashes file to write or compare with")
    parser.add_argument("--data", type=Path, default=None, help="folder of *.jsonl")
    parser.add_argument("--limit", type=int, default=0, help="conversations per data set")
    args = parser.parse_args(argv)
    data = args.data or find_data_dir(Path(__file__).resolve().parents[1])
    if data is None or not data.is_dir():
        print("identity check skipped: no data folder (../shared/data or --data)", file=sys.stderr)
        return 0
    report: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    if args.mode == "record":
        hashes = dict(outputs(data, args.limit))
        args.file.write_text(json.dumps(hashes, indent=1, sort_keys=True))
        report(f"recorded {len(hashes)} outputs in {args.file}")
        return 0
    expected: dict[str, dict[str, str]] = json.loads(args.file.read_text())
    changed = seen = 0
    for key, got in outputs(data, args.limit):
        seen += 1
        want = expected.get(key)
        if want is None:
            report(f"new: {key}")
        elif want != got:
            changed += 1
            parts = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
            report(f"changed ({', '.join(parts)}): {key}")
    report(f"{seen} outputs compared, {changed} changed, {len(expected) - seen} not run")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
