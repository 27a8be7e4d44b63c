"""Compare ctxfold strategies with peers on the real conversations in ../shared/data.

    python benchmarks/compare.py                    # every data set, budgets 25% and 10%
    python benchmarks/compare.py --limit 10 --repeat 3 --json results.json

Budget: the system prompt plus a fraction of the non-system tokens (o200k_base, counted
the same way for every method). Reported per data set and budget:

- fit: share of conversations whose output is within the budget;
- kept: output tokens / input tokens (median);
- answers (LoCoMo): of the gold answers found in the full history, the share still found;
- ids (agent traces): of the probe identifiers found in the full history, the share
  still found (in message text and tool-call arguments);
- valid: share of outputs whose tool calls keep their results and vice versa;
- ms: median milliseconds per conversation (each call on fresh objects, cold caches).

Peers: LangChain ``trim_messages`` (strategy "last", system kept), LlamaIndex
``ChatMemoryBuffer`` (system prompt passed beside it, as chat engines do), and
``contextpress`` (``ContextManager``, medium compression). Peers missing from the
environment are skipped with a note. Everything runs offline.
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

import ctxfold
from ctxfold import Message, TiktokenCounter, from_openai, share_budget
from ctxfold.testing import ContractViolation, check_tool_integrity, find_data_dir

ENC = TiktokenCounter("o200k_base")


def shared_data() -> Path | None:
    """The folder of the shared conversations, or ``None`` after saying on stderr that
    the benchmark is skipped (a user's clone has no ``../shared/data``)."""
    data = find_data_dir(Path(__file__).resolve().parents[1])
    if data is None:
        print("benchmark skipped: no data folder (../shared/data)", file=sys.stderr)
    return data


def text_of(messages: list[Message]) -> str:
    return "\n".join(m.text + "\n" + "\n".join(c.arguments for c in m.tool_calls) for m in messages)


# ------------------------------------------------------------------------- methods
# Each method: (record messages as OpenAI dicts, budget) -> (output messages, seconds)

Method = Callable[[list[dict[str, Any]], int], tuple[list[Message], float]]


def ctxfold_method(strategy: str, **options: Any) -> Method:
    def run(raw: list[dict[str, Any]], budget: int) -> tuple[list[Message], float]:
        msgs = from_openai(raw)  # fresh objects: no cached fingerprints
        counter = TiktokenCounter(ENC.encoding)  # shared encoding, empty count cache
        ctxfold.clear_caches()  # cold: no analyses from an earlier run
        compressor = ctxfold.strategies.resolve_strategy(strategy, **options)
        t = time.perf_counter()
        try:
            result = compressor.compress(msgs, budget=budget, counter=counter)
        except ctxfold.BudgetError:
            return [], time.perf_counter() - t
        return list(result.messages), time.perf_counter() - t

    return run


def langchain_count(msgs: list[Any]) -> int:
    """Tokens of LangChain messages, counted as ctxfold's o200k_base counter does."""
    enc = ENC.encoding
    total = 3
    for m in msgs:
        content = m.content if isinstance(m.content, str) else json.dumps(m.content)
        total += 3 + len(enc.encode_ordinary(content))
        if m.name:
            total += 1 + len(enc.encode_ordinary(m.name))
        for c in getattr(m, "tool_calls", []) or []:
            total += 3 + len(enc.encode_ordinary(c["name"] + json.dumps(c["args"])))
    return total


def trim(messages: list[Any], budget: int) -> list[Any]:
    """LangChain ``trim_messages`` as the benchmarks run it: the newest messages that
    fit, the system prompt kept, no message cut."""
    from langchain_core.messages import trim_messages

    return list(
        trim_messages(
            messages,
            max_tokens=budget,
            token_counter=langchain_count,
            strategy="last",
            include_system=True,
            allow_partial=False,
        )
    )


def trim_messages_method() -> Method | None:
    try:
        from langchain_core.messages import convert_to_messages
    except ImportError:
        return None
    from langchain_ctx import from_langchain

    def run(raw: list[dict[str, Any]], budget: int) -> tuple[list[Message], float]:
        lc = convert_to_messages(raw)
        t = time.perf_counter()
        out = trim(lc, budget)
        return from_langchain(out), time.perf_counter() - t

    return run


def chat_memory_buffer_method() -> Method | None:
    try:
        from llama_index.core.memory import ChatMemoryBuffer
    except ImportError:
        return None
    from llamaindex_ctx import from_llamaindex, to_llamaindex

    enc = ENC.encoding

    def run(raw: list[dict[str, Any]], budget: int) -> tuple[list[Message], float]:
        msgs = from_openai(raw)
        system = [m for m in msgs if m.role == "system"]
        rest = to_llamaindex([m for m in msgs if m.role != "system"])
        limit = max(budget - ENC.count_messages(system), 1)
        t = time.perf_counter()
        memory = ChatMemoryBuffer.from_defaults(
            chat_history=rest, token_limit=limit, tokenizer_fn=enc.encode_ordinary
        )
        out = memory.get()
        return system + from_llamaindex(out), time.perf_counter() - t

    return run


def contextpress_method() -> Method | None:
    try:
        import contextpress.stats as cp_stats
        from contextpress import ContextManager
    except ImportError:
        return None
    # contextpress asks tiktoken for cl100k_base by name, which downloads; hand it the
    # same encoding from ctxfold's offline loader instead.
    offline = TiktokenCounter("cl100k_base").encoding
    cp_stats.get_encoding = lambda model=None: offline
    for mod in list(sys.modules.values()):
        if (
            mod
            and getattr(mod, "__name__", "").startswith("contextpress")
            and hasattr(mod, "get_encoding")
        ):
            mod.get_encoding = cp_stats.get_encoding

    def run(raw: list[dict[str, Any]], budget: int) -> tuple[list[Message], float]:
        kind = "agent" if any(m.get("tool_calls") for m in raw) else "chat"
        manager = ContextManager(type=kind, compression="medium")
        data = json.loads(json.dumps(raw))
        t = time.perf_counter()
        out = manager.compress(data, token_budget=max(budget, 1))
        elapsed = time.perf_counter() - t
        return from_openai(out), elapsed

    return run


# ------------------------------------------------------------------------ scoring


def budget_for(msgs: list[Message], fraction: float) -> int:
    """The benchmark budget: the system prompt plus ``fraction`` of the other tokens."""
    return share_budget(msgs, fraction, ENC)


def evaluate(
    records: list[dict[str, Any]], method: Method, fraction: float, repeat: int
) -> dict[str, Any]:
    fits, kept, times, valid = [], [], [], []
    id_found = id_total = ans_found = ans_total = 0
    chars = 0
    for rec in records:
        raw = rec["messages"]
        msgs = from_openai(raw)
        total = ENC.count_messages(msgs)
        budget = budget_for(msgs, fraction)
        runs = [method(raw, budget) for _ in range(repeat)]
        out = runs[0][0]
        times.append(statistics.median(r[1] for r in runs) * 1000)
        chars += sum(len(m.text) for m in msgs)
        after = ENC.count_messages(out) if out else 0
        fits.append(bool(out) and after <= budget)
        kept.append(after / total)
        try:
            check_tool_integrity(msgs, out)
            valid.append(bool(out))
        except ContractViolation:
            valid.append(False)
        full, shown = text_of(msgs), text_of(out)
        for ident in rec.get("probes", {}).get("identifiers", []):
            if ident in full:
                id_total += 1
                id_found += ident in shown
        full_l, shown_l = full.lower(), shown.lower()
        for q in rec.get("probes", {}).get("questions", []):
            ans = str(q["answer"]).lower()
            if ans and ans in full_l:
                ans_total += 1
                ans_found += ans in shown_l
    return {
        "fit": sum(fits) / len(fits),
        "kept": statistics.median(kept),
        "ids": id_found / id_total if id_total else None,
        "answers": ans_found / ans_total if ans_total else None,
        "valid": sum(valid) / len(valid),
        "ms": statistics.median(times),
        "mb_per_s": chars / 1e6 / (sum(times) / 1000) if sum(times) else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="folder of *.jsonl")
    parser.add_argument("--datasets", nargs="*", default=None)
    parser.add_argument("--fractions", nargs="*", type=float, default=[0.25, 0.10])
    parser.add_argument("--limit", type=int, default=0, help="conversations per data set")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per conversation")
    parser.add_argument("--methods", nargs="*", default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)

    data = args.data or find_data_dir(Path(__file__).resolve().parents[1])
    if data is None or not data.is_dir():
        print("benchmark skipped: no data folder (../shared/data or --data)", file=sys.stderr)
        return 0
    methods: dict[str, Method | None] = {
        "ctxfold auto": ctxfold_method("auto"),
        "ctxfold sliding_window": ctxfold_method("sliding_window", overflow="best_effort"),
        "ctxfold summarize": ctxfold_method("summarize", cache=False),
        "ctxfold semantic": ctxfold_method("semantic", cache=False, overflow="best_effort"),
        "ctxfold hierarchical": ctxfold_method("hierarchical", overflow="best_effort"),
        "ctxfold hybrid": ctxfold_method("hybrid"),
        "langchain trim_messages": trim_messages_method(),
        "llamaindex ChatMemoryBuffer": chat_memory_buffer_method(),
        "contextpress": contextpress_method(),
    }
    if args.methods:
        methods = {k: v for k, v in methods.items() if any(s in k for s in args.methods)}
    results: list[dict[str, Any]] = []
    files = sorted(data.glob("*.jsonl"))
    if args.datasets:
        files = [f for f in files if f.stem in args.datasets]
    print("| data set | budget | method | fit | kept | answers | ids | valid | ms | MB/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for f in files:
        records = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()]
        if args.limit:
            records = records[: args.limit]
        for fraction in args.fractions:
            for name, method in methods.items():
                if method is None:
                    print(f"| {f.stem} | {fraction:.0%} | {name} | not installed |||||||")
                    continue
                r = evaluate(records, method, fraction, args.repeat)
                r.update(dataset=f.stem, fraction=fraction, method=name, n=len(records))
                results.append(r)

                def pct(x: float | None) -> str:
                    return "-" if x is None else f"{x:.1%}"

                print(
                    f"| {f.stem} | {fraction:.0%} | {name} | {pct(r['fit'])} | "
                    f"{r['kept']:.1%} | {pct(r['answers'])} | {pct(r['ids'])} | "
                    f"{pct(r['valid'])} | {r['ms']:.1f} | {r['mb_per_s'] or 0:.1f} |",
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
