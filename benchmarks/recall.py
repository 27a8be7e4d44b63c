"""Recall: how much of what a question needs survives when the history is cut to a
budget, with the question as the last user message.

    python benchmarks/recall.py                     # every LoCoMo question, 10% and 3%
    python benchmarks/recall.py --limit 40 --fractions 0.1

For each question of ``../shared/data/locomo.jsonl``, the conversation's history plus
the question as a last user message is cut to ``fraction`` of the history's tokens
(o200k_base; the system prompt and the question on top). Reported per method and budget:
the share of the findable gold answers (found in the whole history) present in the
output outside the question, per question category (1 multi-hop, 2 temporal, 3
open-domain, 4 single-hop) and in all, with the median ms per query, cold (a fresh
compressor; LoCoMo conversations share no message, so each conversation's first query
is cold, the others reuse its analysis as a process would).

Methods, in the same run: ``auto`` (ctxfold's default strategy, which recalls for
the last user message), ``auto + wordllama`` (its recall fused with WordLlama's
similarity), ``auto, query=False`` (no recall), ``session`` (a
``ctxfold.Session`` over the history, asked ``render(query=question)``: its ms is what
recall adds to a render, median of that render's time less a render without a query;
``session + wordllama`` likewise),
LangChain ``trim_messages`` (the newest messages), LlamaIndex ``ChatMemoryBuffer``, and
two baselines written here: ``bm25`` (whole messages ranked by BM25 against the
question's words, kept in time order while they fit) and ``bm25+neighbours`` (the
same, each hit with the message before and after it: the answer is often in the reply).

Recall's settings were tuned on the first two conversations (``tune``) and are
reported on the other three (``held out``) too.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import ENC, chat_memory_buffer_method, text_of, trim_messages_method

import ctxfold
from ctxfold import Message, from_openai
from ctxfold.testing import find_data_dir
from ctxfold.text.wordlists import word_list

#: A method: (messages with the question last, budget) -> (output, seconds).
Method = Callable[[list[dict[str, Any]], int], tuple[list[Message], float]]

_WORD = re.compile(r"[a-z0-9]+")
_STOP = word_list("stop_words")


def _terms(text: str) -> list[str]:
    """Lower-cased words and numbers, stop words out, a plural ``s`` off."""
    out = []
    for w in _WORD.findall(text.lower()):
        if w in _STOP:
            continue
        out.append(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return out


def bm25_method(neighbours: bool) -> Method:
    """Whole messages by BM25 (k1 1.2, b 0.75) against the last message, in time order
    while they fit; with ``neighbours``, each hit with the messages beside it."""

    def run(raw: list[dict[str, Any]], budget: int) -> tuple[list[Message], float]:
        msgs = from_openai(raw)
        started = time.perf_counter()
        pinned = [i for i, m in enumerate(msgs) if m.role == "system"] + [len(msgs) - 1]
        docs = {i: Counter(_terms(msgs[i].text)) for i in range(len(msgs)) if i not in pinned}
        n = len(docs)
        avg = sum(sum(d.values()) for d in docs.values()) / max(n, 1)
        df = Counter(t for d in docs.values() for t in d)
        query = set(_terms(msgs[-1].text))

        def score(d: Counter[str]) -> float:
            length = sum(d.values())
            total = 0.0
            for t in query & d.keys():
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                total += idf * d[t] * 2.2 / (d[t] + 1.2 * (0.25 + 0.75 * length / max(avg, 1)))
            return total

        ranked = sorted(docs, key=lambda i: (-score(docs[i]), -i))
        chosen = set(pinned)
        used = ENC.count_messages([msgs[i] for i in sorted(chosen)])
        for i in ranked:
            group = [i - 1, i, i + 1] if neighbours else [i]
            new = [k for k in group if k in docs and k not in chosen]
            cost = sum(ENC.count_message(msgs[k]) for k in new)
            if new and used + cost <= budget:
                chosen.update(new)
                used += cost
        out = [msgs[i] for i in sorted(chosen)]
        return out, time.perf_counter() - started

    return run


def auto_method(**options: Any) -> Method:
    def run(raw: list[dict[str, Any]], budget: int) -> tuple[list[Message], float]:
        msgs = from_openai(raw)
        started = time.perf_counter()
        try:
            out = list(ctxfold.compress(msgs, budget=budget, **options).messages)
        except ctxfold.BudgetError:
            out = []
        return out, time.perf_counter() - started

    return run


def session_method(**settings: Any) -> Method:
    """A session per conversation and budget, asked with the question as its query;
    the seconds are what the query adds to a render (a render without one, timed
    just before, subtracted). Each session renders once without a query and once
    with a query of its own before the first question is timed, as a session that
    has answered before would have: the timings are of recall, not of building its
    index."""
    sessions: dict[tuple[str, int], ctxfold.Session] = {}

    def run(raw: list[dict[str, Any]], budget: int) -> tuple[list[Message], float]:
        question = str(raw[-1]["content"])
        base = budget - ENC.count_message(from_openai(raw[-1:])[0])  # the history's
        key = (str(raw[1]["content"]), base)
        session = sessions.get(key)
        if session is None:
            store = ctxfold.storage.MemoryStore()
            session = ctxfold.Session(budget=base, store=store, **settings)
            session.add(raw[:-1])
            session.render(query=False)
            session.render(query="What do you remember?")
            sessions[key] = session
        t0 = time.perf_counter()
        session.render(budget, query=False)
        t1 = time.perf_counter()
        out = list(session.render(budget, query=question).messages)
        t2 = time.perf_counter()
        return out, max((t2 - t1) - (t1 - t0), 0.0)

    return run


def _queries(record: dict[str, Any]) -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """The history with each question as the last user message, and the question."""
    raw = record["messages"]
    return [
        ([*raw, {"role": "user", "content": str(q["question"])}], q)
        for q in record["probes"]["questions"]
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="the shared data folder")
    parser.add_argument("--fractions", nargs="*", type=float, default=[0.10, 0.03])
    parser.add_argument("--limit", type=int, default=0, help="questions per conversation")
    parser.add_argument("--json", default=None, help="write the rows here too")
    parser.add_argument("--methods", nargs="*", default=None, help="only these methods")
    args = parser.parse_args()
    data = find_data_dir(args.data or Path(__file__).resolve().parents[1])
    if data is None:
        sys.exit("the shared data is not here: put it in ../shared/data or set CTXFOLD_DATA_DIR")
    lines = (data / "locomo.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    methods: dict[str, Method | None] = {
        "auto": auto_method(),
        "auto + wordllama": auto_method(recall_embedder="wordllama"),
        "auto, query=False": auto_method(query=False),
        "session": session_method(),
        "session + wordllama": session_method(recall_embedder="wordllama"),
        "bm25": bm25_method(neighbours=False),
        "bm25+neighbours": bm25_method(neighbours=True),
        "trim_messages": trim_messages_method(),
        "ChatMemoryBuffer": chat_memory_buffer_method(),
    }
    if args.methods:
        methods = {k: v for k, v in methods.items() if k in args.methods}
    rows = []
    print("| budget | method | cat 1 | cat 2 | cat 3 | cat 4 | all | tune | held out | ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for fraction in args.fractions:
        for name, method in methods.items():
            if method is not None:
                rows.append(measure(name, method, records, fraction, args.limit))
                _print(rows[-1])
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


TUNE = 2  # the first conversations: recall's settings were tuned on these


def measure(
    name: str, method: Method, records: list[dict[str, Any]], fraction: float, limit: int
) -> dict[str, Any]:
    """One method at one budget over every question: the share of findable answers
    shown outside the question, per category and per half, and the median ms."""
    found: Counter[str] = Counter()
    total: Counter[str] = Counter()
    ms: list[float] = []
    for k, record in enumerate(records):
        history = from_openai(record["messages"])
        full = text_of(history).lower()
        budget = int(ENC.count_messages(history) * fraction)
        half = "tune" if k < TUNE else "held out"
        for raw, q in _queries(record)[: limit or None]:
            answer = str(q["answer"]).lower()
            if not answer or answer not in full:
                continue
            question = str(raw[-1]["content"])
            out, seconds = method(raw, budget + ENC.count_message(from_openai(raw[-1:])[0]))
            ms.append(seconds * 1000)
            shown = text_of(out).replace(question, "").lower()
            for cat in (str(q["category"]), "all", half):
                total[cat] += 1
                found[cat] += answer in shown
    share = {c: found[c] / total[c] if total[c] else None for c in total}
    return {"fraction": fraction, "method": name, "share": share, "ms": statistics.median(ms)}


def _print(row: dict[str, Any]) -> None:
    share = row["share"]
    cells = " | ".join(
        "-" if share.get(c) is None else f"{share[c]:.1%}"
        for c in ("1", "2", "3", "4", "all", "tune", "held out")
    )
    print(f"| {row['fraction']:.0%} | {row['method']} | {cells} | {row['ms']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
