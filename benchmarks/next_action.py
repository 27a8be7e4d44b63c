"""Next-action support: does a render still show what the agent's next tool call uses?

    python benchmarks/next_action.py                       # the agent runs, 8K and 4K
    python benchmarks/next_action.py --limit 3 --budgets 8000 --json out.json

Each conversation of ``../shared/data`` is replayed message by message. Before every
assistant message that makes tool calls, the history so far is rendered to the budget
by each method (the methods of ``benchmarks/replay.py``, driven as it drives them):

- ``session``: :class:`ctxfold.Session` with its defaults (add each message, render);
- ``compress``: ``ctxfold.compress`` from scratch at the same points (warm caches);
- ``trim_messages``: LangChain's ``trim_messages`` (strategy "last", system kept).

*Support*: of the identifiers that the next assistant message's tool-call arguments
use and that the history before it already showed (in any earlier message's text or
arguments), the share findable, as substrings, in the render's text and arguments. An
identifier the agent makes up fresh (a new file name) is not scored: no render could
have shown it. Reported pooled over the scored calls and as the mean of the
conversations' shares, with the number of calls scored (those with at least one such
identifier) and the median ms per render. A render that fails (``BudgetError``) shows
nothing.

*Tool inputs*: of all identifiers in the tool-call arguments of a whole conversation,
the share findable in ``ctxfold.compress`` of the whole conversation at 25% and 10%
(the system prompt plus that share of the rest, as ``benchmarks/compare.py`` budgets),
beside ``trim_messages`` at the same budget.

Identifiers are found by :func:`identifiers`, a small extractor of this benchmark's
own, independent of ctxfold's (a measure must not share the biases of what it
measures): the tokens of argument values that look like identifiers (paths, file and
dotted names, snake or camel names, names with a digit, ids, numbers of 3+ digits,
dates, ``--flags``, uppercase codes given as a whole value, quoted search patterns),
less common English words and the conversation's tool names. Both measures are also
given by kind (:func:`kind_of`): *names* (paths, dotted and snake names, flags, codes),
*numbers* (a line, a line range, a version) and *text* (a quoted phrase: a message a
script prints, a phrase searched for), which weigh unlike for the agent's next step.

Conversations are split as ``benchmarks/replay.py`` splits them: ``tune`` (the first
half of each set), ``other`` (the second half), and ``all``. SWE-agent's runs mostly
act through fenced commands in the text, not tool calls: only the calls are scored.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import budget_for, shared_data, text_of, trim
from replay import METHODS, Replay

import ctxfold
from ctxfold import Message, TiktokenCounter, from_openai

SETS = ("mini_swe_agent", "swe_agent", "tau_airline")
REPLAYED = ("session", "compress", "trim_messages")
SHARES = (0.25, 0.10)

# ------------------------------------------------------------------- identifiers

_WORDS = """
    a about after all also an and any are as at be been before but by can could do does
    done each else end error false file files find first for from get has have how if in
    into is it its just last line lines list new next no none not now null of off on one
    only or other out over print read run same see set should so some than that the then
    there these this to true try up use used using value values was we were what when
    where which while will with without yes you your eof test tests self main
"""
#: Words that are identifiers in no useful sense (matched lowercased).
COMMON = frozenset(_WORDS.split())

_TOKEN = re.compile(r"[A-Za-z0-9_./\-]+")  # what an identifier is made of
_QUOTED = re.compile(r"\"([^\"\n]{3,80})\"|'([^'\n]{3,80})'")
_FLAG = re.compile(r"--[A-Za-z][A-Za-z0-9_\-]*")
_DOTTED = re.compile(r"(?:^|[A-Za-z0-9_])\.[A-Za-z_]")  # a dotted name, .env
_CAMEL = re.compile(r"[a-z][A-Z]")
_NUMERIC = re.compile(r"[0-9][0-9.,:/\-]*[0-9]")
_CODE = re.compile(r"[A-Z0-9]{3,12}")


def _looks_like_identifier(tok: str, whole: bool) -> bool:
    """Whether one cleaned token is identifier-shaped (``whole``: the token is a whole
    argument value, where an uppercase code such as an airport's is an id)."""
    if _FLAG.fullmatch(tok):
        return True
    letters = any(c.isalpha() for c in tok)
    digits = sum(c.isdigit() for c in tok)
    if _NUMERIC.fullmatch(tok):
        return digits >= 3
    if not letters or (tok.startswith(".") and len(tok) < 4):  # no letters, or *.py's .py
        return False
    return bool(
        "/" in tok
        or "_" in tok
        or digits
        or _DOTTED.search(tok)
        or _CAMEL.search(tok)
        or (whole and _CODE.fullmatch(tok))
    )


def _clean(tok: str) -> str:
    """A token less what surrounds an identifier in text: a sentence's dot, a leading
    ``./``, a dash that is no flag's."""
    if tok.startswith("--"):
        return tok.rstrip("-./")
    return tok.removeprefix("./").rstrip(".").strip("-").rstrip("/")


_ESCAPE = re.compile(r"\\[nrt]")  # an escaped newline or tab inside code: a space


def _from_text(text: str, whole: bool, skip: frozenset[str]) -> set[str]:
    text = _ESCAPE.sub(" ", text)
    found: set[str] = set()
    for m in _QUOTED.finditer(text):
        pattern = (m.group(1) or m.group(2)).strip()
        words = re.findall(r"[A-Za-z]+", pattern.lower())
        if len(pattern) >= 3 and not all(w in COMMON or w in skip for w in words):
            found.add(pattern)
    for raw in _TOKEN.findall(text):
        tok = _clean(raw)
        if len(tok) < 3 or tok.lower() in COMMON or tok in skip:
            continue
        if _looks_like_identifier(tok, whole and tok == text.strip()):
            found.add(tok)
    return found


def _values(obj: Any) -> Iterator[str]:
    """Every scalar value of parsed arguments, as text (keys are the tool's schema)."""
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _values(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _values(v)
    elif obj is not None and not isinstance(obj, bool):
        yield str(obj)


def identifiers(arguments: str, skip: frozenset[str] = frozenset()) -> set[str]:
    """The identifiers of one tool call's arguments (JSON text; text that is not JSON
    is read as one value), less the names in ``skip`` (the tool names)."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        parsed = arguments
    found: set[str] = set()
    for value in _values(parsed):
        found |= _from_text(value, True, skip)
    return found


class Kind(Enum):
    """What an identifier is, reported apart: a name an agent looks up or acts on, a
    number (a line, a line range, a count), or quoted text (a printed message, a
    phrase searched for)."""

    NAME = "name"
    NUMBER = "number"
    TEXT = "text"


_NUMBERISH = re.compile(r"[0-9][0-9.,:/\-]*[a-z]?")  # 870, 845,865p, 1.14, 2024-01-02


def kind_of(identifier: str) -> Kind:
    """The :class:`Kind` of one identifier :func:`identifiers` found."""
    if any(c.isspace() for c in identifier):
        return Kind.TEXT
    if _NUMBERISH.fullmatch(identifier):
        return Kind.NUMBER
    return Kind.NAME


def tool_names(msgs: list[Message]) -> frozenset[str]:
    return frozenset(c.name for m in msgs for c in m.tool_calls)


# ----------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class Call:
    """One assistant message with tool calls: where it is, and the identifiers of its
    arguments that the history before it showed."""

    index: int
    shown: frozenset[str]


def calls_to_score(msgs: list[Message]) -> list[Call]:
    """Every assistant message with tool calls after the first message, with the
    identifiers it uses that an earlier message's text or arguments holds."""
    skip = tool_names(msgs)
    calls, seen = [], ""
    for k, m in enumerate(msgs):
        if k and m.role == "assistant" and m.tool_calls:
            used = set().union(*(identifiers(c.arguments, skip) for c in m.tool_calls))
            calls.append(Call(k, frozenset(i for i in used if i in seen)))
        seen += text_of([m]) + "\n"
    return calls


@dataclass
class Support:
    """What one method's renders showed of one conversation's next actions."""

    found: int = 0
    scored: int = 0  # identifiers scored
    calls: int = 0  # calls with at least one identifier scored
    times: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    kinds: Counter[tuple[Kind, bool]] = field(default_factory=Counter)  # (kind, found)

    @property
    def share(self) -> float | None:
        return self.found / self.scored if self.scored else None


def support(msgs: list[Message], make: Callable[[int], Replay], budget: int) -> Support:
    """Replay ``msgs`` with one method; before each call, the share of its shown
    identifiers that the render still shows."""
    rep, run, last = make(budget), Support(), 0
    for call in calls_to_score(msgs):
        t = time.perf_counter()
        try:
            out = rep.turn(msgs[last : call.index])
        except ctxfold.BudgetError as exc:  # nothing sent: nothing shown
            run.errors.append(f"message {call.index}: {exc}")
            out = []
        run.times.append((time.perf_counter() - t) * 1000)
        last = call.index
        if call.shown:
            text = text_of(out)
            kept = [i in text for i in call.shown]
            run.kinds.update(zip(map(kind_of, call.shown), kept, strict=True))
            run.found += sum(kept)
            run.scored += len(call.shown)
            run.calls += 1
    return run


def by_kind(kinds: Counter[tuple[Kind, bool]]) -> dict[str, dict[str, Any]]:
    """For each :class:`Kind`, the share kept and how many were scored."""
    out = {}
    for kind in Kind:
        total = kinds[kind, True] + kinds[kind, False]
        out[kind.value] = {"kept": kinds[kind, True] / total if total else None, "n": total}
    return out


def tool_inputs(msgs: list[Message], share: float, method: str) -> Counter[tuple[Kind, bool]]:
    """Every identifier of the conversation's tool-call arguments, counted by
    (:class:`Kind`, found in one render of the whole conversation at ``share``)."""
    skip = tool_names(msgs)
    ids = set().union(*(identifiers(c.arguments, skip) for m in msgs for c in m.tool_calls))
    if not ids:
        return Counter()
    budget = budget_for(msgs, share)
    if method == "compress":
        counter = TiktokenCounter("o200k_base")
        try:
            out = list(ctxfold.compress(msgs, budget=budget, counter=counter).messages)
        except ctxfold.BudgetError:
            out = []
    else:
        from langchain_ctx import from_langchain, to_langchain

        out = from_langchain(trim(to_langchain(msgs), budget))
    text = text_of(out)
    return Counter((kind_of(i), i in text) for i in ids)


def summarize(runs: list[Support]) -> dict[str, Any]:
    """Pooled support, the mean of the conversations' supports, calls, median ms."""
    scored = sum(r.scored for r in runs)
    shares = [s for r in runs if (s := r.share) is not None]
    times = [t for r in runs for t in r.times]
    kinds = sum((r.kinds for r in runs), Counter[tuple[Kind, bool]]())
    return {
        "conversations": len(runs),
        "support": sum(r.found for r in runs) / scored if scored else None,
        "mean_support": statistics.mean(shares) if shares else None,
        "calls": sum(r.calls for r in runs),
        "identifiers": scored,
        "renders": len(times),
        "median_ms": statistics.median(times) if times else None,
        "by_kind": by_kind(kinds),
        "errors": [e for r in runs for e in r.errors][:5],
    }


def _f(x: float | None, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def _kinds(by: dict[str, dict[str, Any]]) -> str:
    """The shares kept by kind, as ``0.97 (120) / 0.80 (40) / 0.51 (30)``."""
    return " / ".join(f"{_f(v['kept'])} ({v['n']})" for v in by.values())


def _halves(n: int) -> dict[str, slice]:
    tune = n // 2
    return {"tune": slice(0, tune), "other": slice(tune, None), "all": slice(None)}


def load(data: Path, name: str, limit: int) -> list[list[Message]]:
    """The first ``limit`` conversations (0: all) of one data set."""
    lines = (data / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [from_openai(json.loads(line)["messages"]) for line in lines if line.strip()][
        : limit or None
    ]


def run_support(
    convs: list[list[Message]], budgets: Sequence[int], methods: Sequence[str]
) -> Iterator[tuple[int, str, str, dict[str, Any]]]:
    """(budget, half, method, summary) for each budget and method."""
    for budget in budgets:
        runs = {m: [support(msgs, METHODS[m], budget) for msgs in convs] for m in methods}
        for half, pick in _halves(len(convs)).items():
            for method, rs in runs.items():
                yield budget, half, method, summarize(rs[pick])


def run_tool_inputs(
    convs: list[list[Message]], methods: list[str]
) -> Iterator[tuple[float, str, str, dict[str, Any]]]:
    """(share, half, method, summary) for each share and method: the share of
    identifiers found, how many, and both by :class:`Kind`."""
    for share in SHARES:
        for method in methods:
            got = [tool_inputs(msgs, share, method) for msgs in convs]
            for half, pick in _halves(len(convs)).items():
                kinds = sum(got[pick], Counter[tuple[Kind, bool]]())
                total = kinds.total()
                found = sum(n for (_, kept), n in kinds.items() if kept)
                yield (
                    share,
                    half,
                    method,
                    {
                        "found": found / total if total else None,
                        "identifiers": total,
                        "by_kind": by_kind(kinds),
                    },
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", default=list(SETS))
    parser.add_argument("--budgets", nargs="*", type=int, default=[8000, 4000])
    parser.add_argument("--methods", nargs="*", default=list(REPLAYED), choices=REPLAYED)
    parser.add_argument("--limit", type=int, default=0, help="conversations per data set")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args(argv)
    data = shared_data()
    if data is None:
        return 0
    report: dict[str, Any] = {"support": {}, "tool_inputs": {}}
    loaded = {name: load(data, name, args.limit) for name in args.datasets}
    print("Next-action support\n")
    print(
        "| data set | budget | half | method | support | mean per conv | calls | median ms "
        "| names / numbers / text |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, convs in loaded.items():
        for budget, half, method, s in run_support(convs, args.budgets, args.methods):
            report["support"][f"{name}/{budget}/{half}/{method}"] = s
            print(
                f"| {name} | {budget} | {half} | {method} | {_f(s['support'])} | "
                f"{_f(s['mean_support'])} | {s['calls']} | {_f(s['median_ms'], '.2f')} | "
                f"{_kinds(s['by_kind'])} |",
                flush=True,
            )
            for e in s["errors"] if half == "all" else ():
                print(f"  {method}: {e}", file=sys.stderr)
    print("\nIdentifiers from tool inputs (whole conversation, one render)\n")
    print("| data set | budget | half | method | found | identifiers | names / numbers / text |")
    print("|---|---|---|---|---|---|---|")
    methods = [m for m in ("compress", "trim_messages") if m in args.methods]
    for name, convs in loaded.items():
        for share, half, method, t in run_tool_inputs(convs, methods):
            report["tool_inputs"][f"{name}/{share:.0%}/{half}/{method}"] = t
            print(
                f"| {name} | {share:.0%} | {half} | {method} | {_f(t['found'])} | "
                f"{t['identifiers']} | {_kinds(t['by_kind'])} |"
            )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
