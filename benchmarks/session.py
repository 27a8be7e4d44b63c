"""Replay conversations turn by turn, as an agent loop does, and compare a ctxfold
Session with what applications do today.

    python benchmarks/session.py                      # locomo and mini_swe_agent, 8K and 4K
    python benchmarks/session.py --limit 5 --budgets 8000 --json session.json

Each conversation of ``../shared/data`` is replayed message by message; before every
assistant message (and once at the end) the history so far is rendered to the budget.
Methods, in the same run:

- ``session``: :class:`ctxfold.Session` (auto, cache-stable, default watermarks); a turn's
  time is its ``add`` plus its ``render``;
- ``trim_messages``: LangChain's ``trim_messages`` (strategy "last", system kept) on the
  whole history every turn;
- ``compress``: ``ctxfold.compress`` (auto) from scratch every turn (warm caches, as in a
  long-running process);
- ``resummarize``: the shape of LangChain's summarization middleware: the history is
  kept as sent until it passes the budget, then everything but the newest messages (up
  to half the budget, whole tool exchanges) is replaced by one summary message, the
  previous summary included; the summarizer is a deterministic stand-in (the first
  words of each message, cut to a tenth of the budget), so its time is not an LLM's.

Reported per data set, budget and method: per-turn ms (median, p95, and last quarter's
median over the first quarter's, turns pooled over conversations), the whole run's
seconds, prefix stability (share of renders that begin with the previous render, byte
for byte), compactions, tokens sent, estimated input cost (a prompt cache bills the
prefix shared with the previous render at 0.1x; relative to trim_messages), fit and
validity (tool calls whole, and a request strict chat APIs accept when the history is
one) on every render, and retention at the end (LoCoMo answers, agent identifiers).
A last table times one cold call on each whole history: auto against trim_messages.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import ENC, ctxfold_method, text_of, trim, trim_messages_method

import ctxfold
from ctxfold import Message, Session, TiktokenCounter, from_openai
from ctxfold.storage import MemoryStore
from ctxfold.testing import ContractViolation, check_tool_integrity, find_data_dir
from ctxfold.units import group_units
from ctxfold.validity import turn_order_problems

#: A replay: called with the messages new since the last turn, returns the render.
Turn = Callable[[list[Message]], list[Message]]


def session_method(budget: int) -> Turn:
    session = Session(budget=budget, store=MemoryStore(), counter=TiktokenCounter(ENC.encoding))

    def turn(new: list[Message]) -> list[Message]:
        session.add(new)
        return list(session.render().messages)

    return turn


def compress_method(budget: int) -> Turn:
    history: list[Message] = []
    counter = TiktokenCounter(ENC.encoding)

    def turn(new: list[Message]) -> list[Message]:
        history.extend(new)
        return list(ctxfold.compress(history, budget=budget, counter=counter).messages)

    return turn


def trim_method(budget: int) -> Turn:
    from langchain_ctx import from_langchain, to_langchain

    history: list[Any] = []

    def turn(new: list[Message]) -> list[Message]:
        history.extend(to_langchain(new))
        return from_langchain(trim(history, budget))

    return turn


def _fake_summary(messages: list[Message], limit: int) -> str:
    """A deterministic stand-in for an LLM summary: each message's first words."""
    lines = [f"{m.role}: {' '.join(m.text.split()[:12])}" for m in messages if m.text]
    words = "\n".join(lines).split(" ")
    while words and ENC.count_text(" ".join(words)) > limit:
        words = words[: len(words) * 3 // 4]
    return " ".join(words)


def resummarize_method(budget: int) -> Turn:
    state: list[Message] = []  # what is sent: system, summary, kept messages

    def turn(new: list[Message]) -> list[Message]:
        state.extend(new)
        if ENC.count_messages(state) <= budget:
            return list(state)
        system = [m for m in state[:1] if m.role == "system"]
        rest = state[len(system) :]
        units = group_units(rest).units
        keep_from, used = len(rest), 0
        for u in reversed(units):
            cost = sum(ENC.count_message(rest[i]) for i in u.indices)
            if used + cost > budget // 2:
                break
            used, keep_from = used + cost, u.start
        summary = _fake_summary(rest[:keep_from], budget // 10)
        note = Message("user", f"Here is a summary of the conversation to date:\n{summary}")
        state[:] = [*system, note, *rest[keep_from:]]
        return list(state)

    return turn


METHODS: dict[str, Callable[[int], Turn]] = {
    "session": session_method,
    "trim_messages": trim_method,
    "compress": compress_method,
    "resummarize": resummarize_method,
}


def _shared_prefix_tokens(before: list[Message], after: list[Message]) -> int:
    """Tokens of the messages ``after`` begins with that ``before`` also began with."""
    total = 0
    for a, b in zip(before, after, strict=False):
        if a.to_openai() != b.to_openai():
            break
        total += ENC.count_message(b)
    return total


def replay(raw: list[dict[str, Any]], make: Callable[[int], Turn], budget: int) -> dict[str, Any]:
    """Replay one conversation with one method; what each render cost and kept."""
    msgs = from_openai(raw)
    turn = make(budget)
    points = [k for k, m in enumerate(msgs) if m.role == "assistant" and k > 0] + [len(msgs)]
    times: list[float] = []
    sent = cost = stable = fit = valid = 0
    compactions = 0
    prev: list[Message] = []
    last = 0
    out: list[Message] = []
    for k in points:
        t = time.perf_counter()
        out = turn(msgs[last:k])
        times.append((time.perf_counter() - t) * 1000)
        last = k
        tokens = ENC.count_messages(out)
        shared = _shared_prefix_tokens(prev, out)
        sent += tokens
        cost += (tokens - shared) + 0.1 * shared
        if prev:
            extends = len(out) >= len(prev) and shared == sum(ENC.count_message(m) for m in prev)
            stable += extends
            compactions += not extends
        fit += tokens <= budget
        try:
            check_tool_integrity(msgs[:k], out)
            ok = bool(turn_order_problems(msgs[:k])) or not turn_order_problems(out)
        except ContractViolation:
            ok = False
        valid += ok
        prev = out
    return {
        "times": times,
        "sent": sent,
        "cost": cost,
        "stable": stable,
        "renders": len(points),
        "compactions": compactions,
        "fit": fit,
        "valid": valid,
        "final": out,
    }


def retention(record: dict[str, Any], out: list[Message]) -> tuple[int, int]:
    """(found, findable): LoCoMo answers, or agent identifiers, in the final render."""
    full, shown = text_of(from_openai(record["messages"])), text_of(out)
    probes = record.get("probes", {})
    found = total = 0
    for ident in probes.get("identifiers", []):
        if ident in full:
            total, found = total + 1, found + (ident in shown)
    for q in probes.get("questions", []):
        ans = str(q["answer"]).lower()
        if ans and ans in full.lower():
            total, found = total + 1, found + (ans in shown.lower())
    return found, total


def quarter_ratio(per_conversation: list[list[float]]) -> float:
    """Median of the last quarter of each conversation's turns over the first's."""
    first = [t for ts in per_conversation for t in ts[: max(len(ts) // 4, 1)]]
    last = [t for ts in per_conversation for t in ts[-max(len(ts) // 4, 1) :]]
    return statistics.median(last) / max(statistics.median(first), 1e-9)


def run_set(records: list[dict[str, Any]], budget: int, methods: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in methods:
        runs = [replay(r["messages"], METHODS[name], budget) for r in records]
        times = [t for r in runs for t in r["times"]]
        kept = [retention(rec, r["final"]) for rec, r in zip(records, runs, strict=True)]
        renders = sum(r["renders"] for r in runs)
        results[name] = {
            "median_ms": statistics.median(times),
            "p95_ms": statistics.quantiles(times, n=20)[-1],
            "flat": quarter_ratio([r["times"] for r in runs]),
            "run_s": sum(times) / 1000,
            "stability": sum(r["stable"] for r in runs) / max(renders - len(runs), 1),
            "compactions": sum(r["compactions"] for r in runs),
            "sent": sum(r["sent"] for r in runs),
            "cost": sum(r["cost"] for r in runs),
            "fit": sum(r["fit"] for r in runs) / renders,
            "valid": sum(r["valid"] for r in runs) / renders,
            "retention": sum(f for f, _ in kept) / max(sum(t for _, t in kept), 1),
        }
    return results


def cold(records: list[dict[str, Any]], repeat: int) -> tuple[float, float]:
    """Median ms of one cold auto call and one trim_messages call on whole histories
    (a quarter of each history's tokens), as compare.py times them."""
    auto, trimmed = ctxfold_method("auto"), trim_messages_method()
    assert trimmed is not None
    auto_ms, trim_ms = [], []
    for rec in records:
        raw = rec["messages"]
        budget = int(ENC.count_messages(from_openai(raw)) * 0.25)
        auto_ms.append(statistics.median(auto(raw, budget)[1] for _ in range(repeat)) * 1000)
        trim_ms.append(statistics.median(trimmed(raw, budget)[1] for _ in range(repeat)) * 1000)
    return statistics.median(auto_ms), statistics.median(trim_ms)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", default=["locomo", "mini_swe_agent"])
    parser.add_argument("--budgets", nargs="*", type=int, default=[8000, 4000])
    parser.add_argument("--methods", nargs="*", default=list(METHODS))
    parser.add_argument("--limit", type=int, default=0, help="conversations per data set")
    parser.add_argument("--cold-repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)
    data = find_data_dir(Path(__file__).resolve().parents[1])
    if data is None:
        print("benchmark skipped: no data folder (../shared/data)", file=sys.stderr)
        return 0
    report: dict[str, Any] = {}
    print(
        "| data set | budget | method | median ms | p95 ms | last/first quarter | run s | "
        "stable | compactions | tokens sent | cost vs trim | fit | valid | retention |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.datasets:
        lines = (data / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        records = [json.loads(line) for line in lines][: args.limit or None]
        for budget in args.budgets:
            res = run_set(records, budget, args.methods)
            report[f"{name}/{budget}"] = res
            base = res.get("trim_messages", {}).get("cost")
            for method, r in res.items():
                rel = f"{r['cost'] / base:.2f}x" if base else "-"
                print(
                    f"| {name} | {budget} | {method} | {r['median_ms']:.2f} | {r['p95_ms']:.2f}"
                    f" | {r['flat']:.2f} | {r['run_s']:.2f} | {r['stability']:.3f} | "
                    f"{r['compactions']} | {r['sent']} | {rel} | {r['fit']:.1%} | "
                    f"{r['valid']:.1%} | {r['retention']:.1%} |",
                    flush=True,
                )
        auto_ms, trim_ms = cold(records, args.cold_repeat)
        report[f"{name}/cold"] = {"auto_ms": auto_ms, "trim_ms": trim_ms}
        print(
            f"\ncold, {name}: auto {auto_ms:.1f} ms, trim_messages {trim_ms:.1f} ms "
            f"({auto_ms / trim_ms:.1f}x)\n",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
