"""Replay whole conversations turn by turn through what a user gets by default, and
compare it with compressing from scratch and with what applications do today: the
benchmark that judges any change to selection, recall, sessions or the wrappers.

    python benchmarks/replay.py                          # every data set, 8K and 4K
    python benchmarks/replay.py --limit 2 --budgets 8000 --questions 20 --json out.json

Each conversation of ``../shared/data`` is replayed message by message; before every
assistant message (and once at the end) the history so far is rendered to the budget
with the default query, as the wrappers render it. Methods, in the same run:

- ``session``: :class:`ctxfold.Session` with its defaults (auto, cache-stable, default
  watermarks and recall); a turn's time is its ``add`` plus its ``render``;
- ``compress``: ``ctxfold.compress`` (auto) from scratch every turn (warm caches, as in
  a long-running process);
- ``trim_messages``: LangChain's ``trim_messages`` (strategy "last", system kept);
- ``resummarize``: the shape of LangChain's summarization middleware: the history is
  kept as sent until it passes the budget, then everything but the newest messages (up
  to half the budget, whole tool exchanges) is replaced by one summary message, the
  previous summary included; the summarizer is a deterministic stand-in (the first
  words of each message, cut to a tenth of the budget), so its time is not an LLM's;
- ``middleware`` and ``memory`` (with ``--wrappers``, on the first ``--wrapper-limit``
  conversations of each set): LangChain's ``CompressionMiddleware`` views and
  LlamaIndex's ``CompressedChatMemory``, fed the same turns.

Per render: fit, validity (tool calls whole; a request strict chat APIs accept when the
history is one), continuation (the render ends with the newest message,
:func:`ctxfold.testing.check_continuation`), fill (tokens / budget, over the renders
whose history is over the budget), repeated (the share of the tokens sent that repeat
the previous render's prefix byte for byte: what a prompt cache bills at 0.1x), cost
(input tokens with that prefix at 0.1x, relative to trim_messages) and per-turn ms. At
the end: ``memory``, the share of findable gold answers (LoCoMo) or identifiers (agent
runs) in a render of the whole history with no question asked; ``asked`` (LoCoMo),
the same when each gold question is appended as the next user turn and rendered (a
session takes the question up from its stored compaction, as a new process would).

Conversations are split into halves: ``tune`` (the first half of each set; settings
were tuned there) and ``other``, reported separately and together.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import ENC, shared_data, text_of, trim

import ctxfold
from ctxfold import Message, Session, TiktokenCounter, from_openai
from ctxfold.storage import MemoryStore
from ctxfold.testing import (
    ContractViolation,
    check_continuation,
    check_tool_integrity,
)
from ctxfold.units import group_units
from ctxfold.validity import turn_order_problems


class Replay(Protocol):
    """One method replaying one conversation."""

    def turn(self, new: list[Message]) -> list[Message]:
        """Take the messages new since the last turn; the render for the next call."""

    def recall(self) -> list[Message]:
        """A render of the whole history with no question asked."""

    def ask(self, question: str) -> list[Message]:
        """A render of the whole history with ``question`` as the next user turn (the
        replay itself is not changed)."""


def _counter() -> TiktokenCounter:
    return TiktokenCounter(ENC.encoding)


class SessionReplay:
    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.session = Session(budget=budget, store=MemoryStore(), counter=_counter())

    def turn(self, new: list[Message]) -> list[Message]:
        self.session.add(new)
        return list(self.session.render().messages)

    def recall(self) -> list[Message]:
        return list(self.session.render(query=False).messages)

    def ask(self, question: str) -> list[Message]:
        s = self.session
        fork = Session.resume(
            [*s.history, Message("user", question)],
            s.compaction,
            budget=self.budget,
            counter=s.counter,
        )
        return list(fork.render().messages)


class CompressReplay:
    def __init__(self, budget: int) -> None:
        self.budget, self.history, self.counter = budget, [], _counter()

    def turn(self, new: list[Message]) -> list[Message]:
        self.history.extend(new)
        return self._run(self.history, None)

    def recall(self) -> list[Message]:
        return self._run(self.history, False)

    def ask(self, question: str) -> list[Message]:
        return self._run([*self.history, Message("user", question)], None)

    def _run(self, msgs: list[Message], query: bool | None) -> list[Message]:
        result = ctxfold.compress(msgs, budget=self.budget, counter=self.counter, query=query)
        return list(result.messages)


class TrimReplay:
    def __init__(self, budget: int) -> None:
        from langchain_ctx import from_langchain, to_langchain

        self.budget, self.history = budget, []
        self.to, self.back = to_langchain, from_langchain

    def turn(self, new: list[Message]) -> list[Message]:
        self.history.extend(self.to(new))
        return self.recall()

    def recall(self) -> list[Message]:
        return self.back(trim(self.history, self.budget))

    def ask(self, question: str) -> list[Message]:
        asked = [*self.history, *self.to([Message("user", question)])]
        return self.back(trim(asked, self.budget))


def _fake_summary(messages: list[Message], limit: int) -> str:
    """A deterministic stand-in for an LLM summary: each message's first words."""
    lines = [f"{m.role}: {' '.join(m.text.split()[:12])}" for m in messages if m.text]
    words = "\n".join(lines).split(" ")
    while words and ENC.count_text(" ".join(words)) > limit:
        words = words[: len(words) * 3 // 4]
    return " ".join(words)


class ResummarizeReplay:
    def __init__(self, budget: int) -> None:
        self.budget, self.state = budget, []  # what is sent: system, summary, kept

    def turn(self, new: list[Message]) -> list[Message]:
        self.state = self._fitted([*self.state, *new])
        return list(self.state)

    def recall(self) -> list[Message]:
        return list(self.state)

    def ask(self, question: str) -> list[Message]:
        return self._fitted([*self.state, Message("user", question)])

    def _fitted(self, state: list[Message]) -> list[Message]:
        budget = self.budget
        if ENC.count_messages(state) <= budget:
            return state
        system = [m for m in state[:1] if m.role == "system"]
        rest = state[len(system) :]
        keep_from, used = len(rest), 0
        for u in reversed(group_units(rest).units):
            cost = sum(ENC.count_message(rest[i]) for i in u.indices)
            if used + cost > budget // 2:
                break
            used, keep_from = used + cost, u.start
        summary = _fake_summary(rest[:keep_from], budget // 10)
        note = Message("user", f"Here is a summary of the conversation to date:\n{summary}")
        return [*system, note, *rest[keep_from:]]


class MiddlewareReplay:
    """LangChain's ``CompressionMiddleware`` views, its record kept as agent state."""

    def __init__(self, budget: int) -> None:
        from langchain_ctx import CompressionMiddleware, from_langchain, to_langchain

        self.mw = CompressionMiddleware(budget, max_threads=4, counter=_counter())
        self.to, self.back = to_langchain, from_langchain
        self.history: list[Any] = []
        self.saved: Any = None

        self.asked = 0

    def turn(self, new: list[Message]) -> list[Message]:
        self.history.extend(self.to(new))
        view = self.mw.views.view("replay", self.history, saved=self.saved)
        self.saved = view.record or self.saved
        return self.back(view.messages)

    def recall(self) -> list[Message]:
        return self.back(self.mw.views.view("replay", self.history, saved=self.saved).messages)

    def ask(self, question: str) -> list[Message]:
        # Another worker takes the thread up from the record kept in the agent's state.
        self.asked += 1
        asked = [*self.history, *self.to([Message("user", question)])]
        return self.back(self.mw.views.view(self.asked, asked, saved=self.saved).messages)


class MemoryReplay:
    """LlamaIndex's ``CompressedChatMemory`` over a chat store, read each turn."""

    def __init__(self, budget: int) -> None:
        from llamaindex_ctx import CompressedChatMemory, from_llamaindex, to_llamaindex

        self.memory = CompressedChatMemory.from_defaults(token_limit=budget, counter=_counter())
        self.to, self.back = to_llamaindex, from_llamaindex

    def turn(self, new: list[Message]) -> list[Message]:
        self.memory.put_messages(self.to(new))
        return self.back(self.memory.get())

    def recall(self) -> list[Message]:
        return self.back(self.memory.get())

    def ask(self, question: str) -> list[Message]:
        return self.back(self.memory.get(input=question))


METHODS: dict[str, Callable[[int], Replay]] = {
    "session": SessionReplay,
    "compress": CompressReplay,
    "trim_messages": TrimReplay,
    "resummarize": ResummarizeReplay,
}
WRAPPERS: dict[str, Callable[[int], Replay]] = {
    "middleware": MiddlewareReplay,
    "memory": MemoryReplay,
}


# ----------------------------------------------------------------------- measures


def _shared_prefix_tokens(before: list[Message], after: list[Message]) -> int:
    """Tokens of the messages ``after`` begins with that ``before`` also began with."""
    total = 0
    for a, b in zip(before, after, strict=False):
        if a.to_openai() != b.to_openai():
            break
        total += ENC.count_message(b)
    return total


def _found(record: dict[str, Any], out: list[Message], kind: str) -> tuple[int, int]:
    """(found, findable) of the record's ``identifiers`` or gold ``answers`` in ``out``."""
    full, shown = text_of(from_openai(record["messages"])), text_of(out)
    probes = record.get("probes", {})
    if kind == "identifiers":
        ids = [i for i in probes.get("identifiers", []) if i in full]
        return sum(i in shown for i in ids), len(ids)
    full, shown = full.lower(), shown.lower()
    answers = [str(q["answer"]).lower() for q in probes.get("questions", [])]
    answers = [a for a in answers if a and a in full]
    return sum(a in shown for a in answers), len(answers)


def _asked(record: dict[str, Any], rep: Replay, limit: int) -> tuple[int, int]:
    """(found, findable): each findable gold answer outside the question, with its
    question asked as the next user turn."""
    full = text_of(from_openai(record["messages"])).lower()
    questions = [
        q
        for q in record.get("probes", {}).get("questions", [])
        if str(q["answer"]).lower() and str(q["answer"]).lower() in full
    ][: limit or None]
    found = 0
    for q in questions:
        try:
            out = rep.ask(q["question"])
        except ctxfold.BudgetError:
            continue  # nothing sent: not found
        shown = text_of([m for m in out if m.text != q["question"]]).lower()
        found += str(q["answer"]).lower() in shown
    return found, len(questions)


@dataclass
class Run:
    """What one method did on one conversation."""

    times: list[float] = field(default_factory=list)
    history: list[int] = field(default_factory=list)  # the history's tokens at each render
    fills: list[float] = field(default_factory=list)
    sent: int = 0
    repeated: int = 0
    cost: float = 0.0
    renders: int = 0
    fit: int = 0
    valid: int = 0
    continued: int = 0
    memory: tuple[int, int] = (0, 0)
    asked: tuple[int, int] = (0, 0)
    errors: list[str] = field(default_factory=list)


def replay(
    record: dict[str, Any], make: Callable[[int], Replay], budget: int, questions: int
) -> Run:
    """Replay one conversation with one method; what each render cost and kept."""
    msgs = from_openai(record["messages"])
    rep = make(budget)
    points = [k for k, m in enumerate(msgs) if m.role == "assistant" and k > 0] + [len(msgs)]
    cum = [0]
    for m in msgs:
        cum.append(cum[-1] + ENC.count_message(m))
    run, prev, last = Run(), [], 0
    for k in points:
        t = time.perf_counter()
        try:
            out = rep.turn(msgs[last:k])
        except ctxfold.BudgetError as exc:  # what must be kept is over: no request
            run.errors.append(f"render {run.renders + 1}: {exc}")
            out = []
        run.times.append((time.perf_counter() - t) * 1000)
        run.history.append(cum[k])
        last = k
        tokens = ENC.count_messages(out)
        shared = _shared_prefix_tokens(prev, out)
        run.renders += 1
        run.sent += tokens
        run.repeated += shared
        run.cost += (tokens - shared) + 0.1 * shared
        run.fit += bool(out) and tokens <= budget
        if cum[k] + 3 > budget:
            run.fills.append(tokens / budget)
        try:
            check_tool_integrity(msgs[:k], out)
            run.valid += bool(turn_order_problems(msgs[:k])) or not turn_order_problems(out)
        except ContractViolation as exc:
            run.errors.append(f"render {run.renders}: {exc}")
        try:
            check_continuation(msgs[:k], out)
            run.continued += 1
        except ContractViolation as exc:
            run.errors.append(f"render {run.renders}: {exc}")
        prev = out
    kind = "answers" if record.get("probes", {}).get("questions") else "identifiers"
    try:
        run.memory = _found(record, rep.recall(), kind)
    except ctxfold.BudgetError:
        run.memory = (0, _found(record, msgs, kind)[1])
    if kind == "answers" and questions >= 0:
        run.asked = _asked(record, rep, questions)
    return run


def summarize(runs: list[Run]) -> dict[str, Any]:
    times = [t for r in runs for t in r.times]
    fills = [f for r in runs for f in r.fills]
    renders = sum(r.renders for r in runs)
    sent = sum(r.sent for r in runs)

    def share(pairs: list[tuple[int, int]]) -> float | None:
        total = sum(t for _, t in pairs)
        return sum(f for f, _ in pairs) / total if total else None

    return {
        "conversations": len(runs),
        "renders": renders,
        "median_ms": statistics.median(times),
        "p95_ms": statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0],
        "fill": statistics.mean(fills) if fills else None,
        "repeated": sum(r.repeated for r in runs) / max(sent, 1),
        "cost": sum(r.cost for r in runs),
        "fit": sum(r.fit for r in runs) / renders,
        "valid": sum(r.valid for r in runs) / renders,
        "continued": sum(r.continued for r in runs) / renders,
        "memory": share([r.memory for r in runs]),
        "asked": share([r.asked for r in runs]),
        "errors": [e for r in runs for e in r.errors][:5],
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--datasets", nargs="*", default=["locomo", "mini_swe_agent", "swe_agent", "tau_airline"]
    )
    parser.add_argument("--budgets", nargs="*", type=int, default=[8000, 4000])
    parser.add_argument("--methods", nargs="*", default=list(METHODS))
    parser.add_argument("--limit", type=int, default=0, help="conversations per data set")
    parser.add_argument(
        "--questions", type=int, default=0, help="questions asked per conversation (0: all)"
    )
    parser.add_argument("--wrappers", action="store_true", help="also the wrappers")
    parser.add_argument("--wrapper-limit", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)
    data = shared_data()
    if data is None:
        return 0
    report: dict[str, Any] = {}
    print(
        "| data set | budget | half | method | memory | asked | fill | repeated | cost vs trim "
        "| fit | valid | continued | median ms | p95 ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.datasets:
        lines = (data / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        records = [json.loads(line) for line in lines][: args.limit or None]
        tune = len(records) // 2
        for budget in args.budgets:
            methods = {k: METHODS[k] for k in args.methods}
            if args.wrappers:
                methods.update(WRAPPERS)
            runs: dict[str, list[Run]] = {}
            for method, make in methods.items():
                chosen = records[: args.wrapper_limit] if method in WRAPPERS else records
                runs[method] = [replay(r, make, budget, args.questions) for r in chosen]
            for half, pick in (
                ("tune", slice(0, tune)),
                ("other", slice(tune, None)),
                ("all", slice(None)),
            ):
                base = (
                    summarize(runs["trim_messages"][pick])["cost"]
                    if "trim_messages" in runs and runs["trim_messages"][pick]
                    else None
                )
                for method, rs in runs.items():
                    if not rs[pick]:
                        continue
                    s = summarize(rs[pick])
                    report[f"{name}/{budget}/{half}/{method}"] = s
                    rel = f"{s['cost'] / base:.2f}x" if base and method not in WRAPPERS else "-"
                    print(
                        f"| {name} | {budget} | {half} | {method} | {_pct(s['memory'])} | "
                        f"{_pct(s['asked'])} | {_pct(s['fill'])} | {s['repeated']:.3f} | {rel} | "
                        f"{s['fit']:.1%} | {s['valid']:.1%} | {s['continued']:.1%} | "
                        f"{s['median_ms']:.2f} | {s['p95_ms']:.2f} |",
                        flush=True,
                    )
                    for e in s["errors"] if half == "all" else ():
                        print(f"  {method}: {e}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
