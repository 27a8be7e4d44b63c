"""What compression keeps of long, repetitive tool output in agent conversations:
test runs, cluster events, request logs, stack traces, compiler output and search hits.

    python benchmarks/logs.py                        # 16 conversations per family
    python benchmarks/logs.py --limit 2 --families tests search --json out.json

Needs no data: ``logs_gen`` generates every conversation from its family and seed
(30-80K o200k tokens each, several tool results, the lines that matter and the
identifiers on them as gold). Even seeds are the ``tune`` half, odd ones the
``other`` half; both are reported, and together (``all``).

Methods, in the same run:

- ``compress``: ``ctxfold.compress`` (auto, cold caches) at 25% and 10%: the system
  prompt plus that share of the other tokens (``share_budget``, as ``compare.py``);
- ``session``: the default :class:`ctxfold.Session`, rendered before every assistant
  turn and once at the end (as ``replay.py``), at 8000 and 4000 tokens;
- ``trim_messages``: LangChain's ``trim_messages`` (strategy "last", system kept), once
  at each share and turn by turn at each budget.

Per output: ``ids``, the share of the gold identifiers (of the lines that matter) found
in the output's text and tool-call arguments (a whole-word match: ``x.py:21`` is not
found in ``x.py:212``); ``lines``, the share of the lines that matter shown whole;
``via list``, of the identifiers found, the share found only in a note's list of
identifiers (``Also mentioned: ...``); ``task``, whether the user's task is in the
output; ``list``, the share of the notes' tokens that is that list; ``sentence``, the
share of notes holding any line besides their head and the list; ``fit`` (tokens <=
budget) and ``valid`` (tool calls keep their results), over every output; ms, the
median per compression or per render (a session's ``add`` plus ``render``). For a
turn-by-turn method, the other measures are of the last render; ``ids_renders`` is the
mean share over the renders from the first one that is not the history as it is (the
first compaction) on.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import ENC, budget_for, text_of, trim_messages_method
from logs_gen import FAMILIES, generate
from replay import Replay, SessionReplay, TrimReplay

import ctxfold
from ctxfold import Message, TiktokenCounter, from_openai
from ctxfold.result import is_note
from ctxfold.strategies.auto.policy import POLICY
from ctxfold.testing import ContractViolation, check_tool_integrity

SHARES = (0.25, 0.10)
BUDGETS = (8000, 4000)
HALVES = ("tune", "other", "all")
PER_FAMILY = 16  # conversations per family by default
TOKENS = (30_000, 80_000)  # the range a conversation's size is drawn from


def found(ident: str, text: str) -> bool:
    """Whether ``ident`` is in ``text`` as a whole: not part of a longer word or number
    (``x.py:21`` is not in ``x.py:212``)."""
    pattern = r"(?<![\w])" + re.escape(ident) + r"(?![\w])"
    return re.search(pattern, text) is not None


def gold_ids(record: dict[str, Any], before: int | None = None) -> list[str]:
    """The distinct gold identifiers of ``record``'s lines that matter (of the messages
    before ``before`` only, when given)."""
    lines = [g for g in record["gold"] if before is None or g["message"] < before]
    return list(dict.fromkeys(ident for g in lines for _, ident in g["ids"]))


@dataclass
class Note:
    """One ctxfold note of an output: its tokens, its list's, whether it says more."""

    tokens: int
    listed: int
    sentence: bool


def notes_of(out: list[Message]) -> list[Note]:
    """The notes of ``out``, each split into its head, its identifier list (the lines
    ``auto`` writes after ``Also mentioned:``) and the rest."""
    notes = []
    for m in out:
        if not is_note(m):
            continue
        lines = m.text.split("\n")
        listed = [x for x in lines[1:] if x.startswith(POLICY.also)]
        rest = [x for x in lines[1:] if x.strip() and not x.startswith(POLICY.also)]
        tokens = ENC.count_text(m.text)
        notes.append(Note(tokens, sum(ENC.count_text(x) for x in listed), bool(rest)))
    return notes


def without_lists(out: list[Message]) -> str:
    """The text of ``out`` with the notes' identifier lists left out."""
    kept = []
    for m in out:
        if is_note(m):
            text = "\n".join(x for x in m.text.split("\n") if not x.startswith(POLICY.also))
            m = m.with_text(text) or m
        kept.append(m)
    return text_of(kept)


@dataclass
class Mark:
    """What one output kept of one conversation's gold."""

    found: int
    total: int
    lines: int
    line_total: int
    listed: int  # ids found only in a note's list
    task: bool
    fit: bool
    valid: bool
    notes: list[Note]


def mark(record: dict[str, Any], history: list[Message], out: list[Message], budget: int) -> Mark:
    """Measure ``out``, an output for ``history`` (a prefix of ``record``'s messages)."""
    k = len(history)
    text = text_of(out)
    ids = gold_ids(record, k)
    hits = [i for i in ids if found(i, text)]
    bare = without_lists(out) if hits else ""
    gold = [g for g in record["gold"] if g["message"] < k]
    try:
        check_tool_integrity(history, out)
        valid = bool(out)
    except ContractViolation:
        valid = False
    return Mark(
        found=len(hits),
        total=len(ids),
        lines=sum(g["line"].strip() in text for g in gold),
        line_total=len(gold),
        listed=sum(not found(i, bare) for i in hits),
        task=record["task"] in text,
        fit=bool(out) and ENC.count_messages(out) <= budget,
        valid=valid,
        notes=notes_of(out),
    )


@dataclass
class Run:
    """One method on one conversation at one budget: its last output's mark, the marks
    from the first compaction on, every output's, and the ms of each compression or
    render."""

    last: Mark
    after: list[Mark] = field(default_factory=list)
    every: list[Mark] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)


def compress_once(record: dict[str, Any], share: float) -> Run:
    """``ctxfold.compress`` (auto) at ``share``, cold caches and a fresh counter."""
    msgs = from_openai(record["messages"])
    budget = budget_for(msgs, share)
    ctxfold.clear_caches()
    counter = TiktokenCounter(ENC.encoding)
    started = time.perf_counter()
    try:
        out = list(ctxfold.compress(msgs, budget=budget, counter=counter).messages)
    except ctxfold.BudgetError:
        out = []
    ms = (time.perf_counter() - started) * 1000
    m = mark(record, msgs, out, budget)
    return Run(m, [m], [m], [ms])


def trim_once(record: dict[str, Any], share: float) -> Run | None:
    """LangChain ``trim_messages`` at ``share`` (``None`` when it is not installed)."""
    method = trim_messages_method()
    if method is None:
        return None
    msgs = from_openai(record["messages"])
    budget = budget_for(msgs, share)
    out, seconds = method(record["messages"], budget)
    m = mark(record, msgs, out, budget)
    return Run(m, [m], [m], [seconds * 1000])


def turn_by_turn(record: dict[str, Any], make: Callable[[int], Replay], budget: int) -> Run:
    """Render before every assistant message and once at the end, as ``replay.py``."""
    msgs = from_openai(record["messages"])
    rep = make(budget)
    points = [k for k, m in enumerate(msgs) if m.role == "assistant" and k > 0] + [len(msgs)]
    marks, ms, last, compacted = [], [], 0, False
    for k in points:
        started = time.perf_counter()
        try:
            out = rep.turn(msgs[last:k])
        except ctxfold.BudgetError:
            out = []
        ms.append((time.perf_counter() - started) * 1000)
        last = k
        compacted = compacted or [m.to_openai() for m in out] != [m.to_openai() for m in msgs[:k]]
        marks.append((compacted, mark(record, msgs[:k], out, budget)))
    after = [m for c, m in marks if c and m.total]
    return Run(marks[-1][1], after, [m for _, m in marks], ms)


def _pooled(pairs: Iterable[tuple[int, int]]) -> float | None:
    pairs = list(pairs)
    total = sum(t for _, t in pairs)
    return sum(f for f, _ in pairs) / total if total else None


def summarize(runs: list[Run]) -> dict[str, Any]:
    """The measures of ``runs`` (one method, one budget, several conversations)."""
    last = [r.last for r in runs]
    notes = [n for m in last for n in m.notes]
    renders = [m.found / m.total for r in runs for m in r.after if m.total]
    return {
        "conversations": len(runs),
        "ids": _pooled((m.found, m.total) for m in last),
        "ids_renders": statistics.mean(renders) if renders else None,
        "lines": _pooled((m.lines, m.line_total) for m in last),
        "via_list": _pooled((m.listed, m.found) for m in last),
        "task": statistics.mean(m.task for m in last),
        "notes": len(notes),
        "list": _pooled((n.listed, n.tokens) for n in notes),
        "sentence": statistics.mean(n.sentence for n in notes) if notes else None,
        "fit": statistics.mean(m.fit for r in runs for m in r.every),
        "valid": statistics.mean(m.valid for r in runs for m in r.every),
        "median_ms": statistics.median(t for r in runs for t in r.ms),
    }


METHODS: dict[str, tuple[tuple[Any, ...], Callable[[dict[str, Any], Any], Run | None]]] = {
    "compress": (SHARES, compress_once),
    "trim_messages": (SHARES, trim_once),
    "session": (BUDGETS, lambda r, b: turn_by_turn(r, SessionReplay, b)),
    "trim_messages turns": (BUDGETS, lambda r, b: turn_by_turn(r, TrimReplay, b)),
}


def label(budget: float) -> str:
    """A budget as the table shows it: a share (``25%``) or tokens (``8000``)."""
    return f"{budget:.0%}" if isinstance(budget, float) else str(budget)


def run_all(
    records: list[dict[str, Any]], methods: list[str], on_step: Callable[[str], None] | None = None
) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    """Every method at each of its budgets on ``records``, summarized per family (and
    ``all`` families) and half: ``{(family, budget, half, method): measures}``."""
    runs: dict[tuple[str, str, str], list[tuple[dict[str, Any], Run]]] = {}
    for name in methods:
        budgets, one = METHODS[name]
        for b in budgets:
            if on_step:
                on_step(f"logs {name} {label(b)}")
            for r in records:
                got = one(r, b)
                if got is not None:
                    runs.setdefault((r["family"], label(b), name), []).append((r, got))
    out: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    families = list(dict.fromkeys(r["family"] for r in records))
    for name in methods:
        for b in METHODS[name][0]:
            for family in [*families, "all"] if len(families) > 1 else families:
                pairs = [
                    p
                    for f in (families if family == "all" else [family])
                    for p in runs.get((f, label(b), name), [])
                ]
                for half in HALVES:
                    chosen = [x for r, x in pairs if half == "all" or _half(r["seed"]) == half]
                    if chosen:
                        out[(family, label(b), half, name)] = summarize(chosen)
    return out


def _half(seed: int) -> str:
    return "tune" if seed % 2 == 0 else "other"


def _cell(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


COLUMNS = ("ids", "ids_renders", "lines", "via_list", "task", "list", "sentence", "fit", "valid")


def table(results: dict[tuple[str, str, str, str], dict[str, Any]]) -> str:
    """The results as a Markdown table, one row per family, budget, half and method."""
    head = ["family", "budget", "half", "method", *COLUMNS, "notes", "median ms"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (family, budget, half, method), s in results.items():
        cells = [family, budget, half, method, *(s[c] for c in COLUMNS), s["notes"]]
        rows.append("| " + " | ".join(map(_cell, cells)) + f" | {s['median_ms']:.1f} |")
    return "\n".join(rows)


def records_for(families: list[str], limit: int, tokens: tuple[int, int]) -> list[dict[str, Any]]:
    """``limit`` conversations (seeds 0 to ``limit`` - 1) of each family."""
    return [generate(f, seed, tokens) for f in families for seed in range(limit)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="*", choices=list(FAMILIES), default=list(FAMILIES))
    parser.add_argument("--limit", type=int, default=PER_FAMILY, help="conversations per family")
    parser.add_argument("--tokens", nargs=2, type=int, default=list(TOKENS))
    parser.add_argument("--methods", nargs="*", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    records = records_for(args.families, args.limit, tuple(args.tokens))
    results = run_all(records, args.methods, lambda s: print(s, file=sys.stderr, flush=True))
    # Sorted so that a family's rows and each half's sit together.
    order = {h: i for i, h in enumerate(HALVES)}
    ordered = dict(sorted(results.items(), key=lambda kv: (order[kv[0][2]],)))
    print(table(ordered))
    print(f"\n{len(records)} conversations, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if args.json:
        data = {"/".join(k): v for k, v in ordered.items()}
        args.json.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
