"""Replay the shared LoCoMo chats through a LlamaIndex chat memory, as a chat engine
uses one, and compare ctxfold's ``CompressedChatMemory`` with LlamaIndex's
``ChatMemoryBuffer`` at the same ``token_limit``.

    python benchmarks/llamaindex_memory.py                 # LoCoMo, 25% of each history
    python benchmarks/llamaindex_memory.py --share 0.1 --sets locomo,tau_airline
    python benchmarks/llamaindex_memory.py --bulk 1500,3000     # a history put at once

Each conversation's messages are put into the memory one by one; at every user message
the memory is read as ``SimpleChatEngine`` reads it (``put(user)``, then
``get(initial_token_count=<the system prompt's tokens>)``). ``token_limit`` is ``share``
of the history's tokens (o200k_base) plus the system prompt; both memories count with
o200k_base (``ChatMemoryBuffer`` gets ``tokenizer_fn``). Reported per method: gets,
*fit* (the LLM input, system prompt and view, within the limit by ctxfold's counting),
*empty* (gets that returned no message), *answers* (of the LoCoMo gold answers found in
the whole history, the share found in the last view), median and p95 ms per ``get``
pooled over gets, the median's ratio to ``ChatMemoryBuffer``'s in the same run.

With ``--bulk``, each conversation is put into the memory at once (a history loaded
from a chat store) and read once, at each ``token_limit`` given, as a chat engine's
first read after it; ``compress`` of the same history at the same limit is the
reference. Reported per method and limit: *fill* (system prompt and view over the
limit, mean), *fit*, and *answers* (findable gold answers in the view, summed over the
conversations) with their ratio to ``ChatMemoryBuffer``'s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import ChatMemoryBuffer

from ctxfold import Message, TiktokenCounter, compress, from_openai
from ctxfold.storage import MemoryStore
from ctxfold.testing import find_data_dir
from llamaindex_ctx import CompressedChatMemory, from_llamaindex, to_llamaindex

COUNTER = TiktokenCounter("o200k_base")


def _memory(method: str, limit: int) -> Any:
    if method == "ctxfold":
        return CompressedChatMemory(token_limit=limit, store=MemoryStore())
    return ChatMemoryBuffer.from_defaults(
        token_limit=limit, tokenizer_fn=COUNTER.encoding.encode_ordinary
    )


def replay(record: dict[str, Any], method: str, share: float) -> dict[str, Any]:
    """One conversation through one memory."""
    msgs = from_openai(record["messages"])
    system = [m for m in msgs if m.role == "system"]
    rest = [m for m in msgs if m.role != "system"]
    fixed = COUNTER.count_messages(system) - COUNTER.count_messages([])
    limit = fixed + int(share * COUNTER.count_messages(rest))
    memory = _memory(method, limit)
    system_text = " ".join(m.text for m in system)
    initial = len(COUNTER.encoding.encode_ordinary(system_text)) if system else 0
    ms: list[float] = []
    fits = empties = 0
    view: list[ChatMessage] = []
    for m in to_llamaindex(rest):
        memory.put(m)
        if m.role.value != "user":
            continue
        started = time.perf_counter()
        view = memory.get(initial_token_count=initial)
        ms.append((time.perf_counter() - started) * 1000)
        sent = system + from_llamaindex(view)
        fits += COUNTER.count_messages(sent) <= limit
        empties += not view
    shown = _text(from_llamaindex(view)).lower()
    full = _text(msgs).lower()
    answers = [str(q["answer"]).lower() for q in record.get("probes", {}).get("questions", [])]
    findable = [a for a in answers if a and a in full]
    return {
        "gets": len(ms),
        "fits": fits,
        "empty": empties,
        "found": sum(a in shown for a in findable),
        "findable": len(findable),
        "ms": ms,
    }


def _text(messages: list[Message]) -> str:
    return "\n".join(m.text for m in messages)


def bulk(record: dict[str, Any], method: str, limit: int) -> dict[str, Any]:
    """One conversation put at once and read once, by one method at ``limit``."""
    msgs = from_openai(record["messages"])
    system = [m for m in msgs if m.role == "system"]
    rest = [m for m in msgs if m.role != "system"]
    if method == "compress":
        sent = list(compress(msgs, budget=limit, counter=COUNTER).messages)
    else:
        memory = _memory(method, limit)
        memory.put_messages(to_llamaindex(rest))
        text = " ".join(m.text for m in system)
        initial = len(COUNTER.encoding.encode_ordinary(text)) if system else 0
        sent = system + from_llamaindex(memory.get(initial_token_count=initial))
    tokens = COUNTER.count_messages(sent)
    shown, full = _text(sent).lower(), _text(msgs).lower()
    answers = [str(q["answer"]).lower() for q in record.get("probes", {}).get("questions", [])]
    findable = [a for a in answers if a and a in full]
    return {
        "fill": tokens / limit,
        "fits": tokens <= limit,
        "found": sum(a in shown for a in findable),
        "findable": len(findable),
    }


def run_bulk(records: list[dict[str, Any]], name: str, limits: list[int]) -> list[dict[str, Any]]:
    """:func:`bulk` over ``records`` at each limit, printed as table rows."""
    rows = []
    print("| data set | limit | method | fill | fit | answers | vs ChatMemoryBuffer |")
    print("|---|---|---|---|---|---|---|")
    for limit in limits:
        runs = {
            m: [bulk(r, m, limit) for r in records]
            for m in ("ctxfold", "ChatMemoryBuffer", "compress")
        }
        base = sum(r["found"] for r in runs["ChatMemoryBuffer"])
        for method, got in runs.items():
            found = sum(r["found"] for r in got)
            row = {
                "set": name,
                "limit": limit,
                "method": method,
                "fill": statistics.mean(r["fill"] for r in got),
                "fit": sum(r["fits"] for r in got) / len(got),
                "found": found,
                "findable": sum(r["findable"] for r in got),
            }
            rows.append(row)
            ratio = f"{found / base:.2f}x" if base else "-"
            print(
                f"| {name} | {limit} | {method} | {row['fill']:.1%} | {row['fit']:.0%} "
                f"| {found} of {row['findable']} | {ratio} |",
                flush=True,
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="the shared data folder")
    parser.add_argument("--share", type=float, default=0.25)
    parser.add_argument("--sets", default="locomo")
    parser.add_argument("--json", default=None, help="write the rows here too")
    parser.add_argument(
        "--bulk", default=None, help="token limits (comma-separated): put each history at once"
    )
    args = parser.parse_args()
    data = find_data_dir(args.data or Path(__file__).resolve().parents[1])
    if data is None:
        sys.exit("the shared data is not here: put it in ../shared/data or set CTXFOLD_DATA_DIR")
    rows = []
    if args.bulk:
        limits = [int(x) for x in args.bulk.split(",")]
        for name in args.sets.split(","):
            lines = (data / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
            records = [json.loads(line) for line in lines if line.strip()]
            rows += run_bulk(records, name, limits)
        if args.json:
            Path(args.json).write_text(json.dumps({"bulk": limits, "rows": rows}, indent=1))
        return
    print("| data set | method | gets | fit | empty | answers | ms median | ms p95 | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.sets.split(","):
        lines = (data / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        records = [json.loads(line) for line in lines if line.strip()]
        results = {
            method: [replay(r, method, args.share) for r in records]
            for method in ("ctxfold", "ChatMemoryBuffer")
        }
        base = statistics.median(x for r in results["ChatMemoryBuffer"] for x in r["ms"])
        for method, runs in results.items():
            ms = sorted(x for r in runs for x in r["ms"])
            gets = sum(r["gets"] for r in runs)
            findable = sum(r["findable"] for r in runs)
            row = {
                "set": name,
                "method": method,
                "gets": gets,
                "fit": sum(r["fits"] for r in runs) / gets,
                "empty": sum(r["empty"] for r in runs) / gets,
                "answers": sum(r["found"] for r in runs) / findable if findable else None,
                "ms_median": statistics.median(ms),
                "ms_p95": ms[int(0.95 * (len(ms) - 1))],
                "ratio": statistics.median(ms) / base,
            }
            rows.append(row)
            answers = "-" if row["answers"] is None else f"{row['answers']:.1%}"
            print(
                f"| {name} | {method} | {gets} | {row['fit']:.1%} | {row['empty']:.1%} "
                f"| {answers} | {row['ms_median']:.2f} | {row['ms_p95']:.2f} "
                f"| {row['ratio']:.2f}x |",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps({"share": args.share, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
