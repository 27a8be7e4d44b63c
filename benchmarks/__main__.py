"""Every benchmark in one run, with a Markdown report and plots.

    python -m benchmarks                        # small: 3 conversations per data set
    python -m benchmarks --size tiny --check    # what CI runs: fails below the baseline
    python -m benchmarks --size full --out results/

Stages, each on the shared conversations (``../shared/data``; skipped with one line
when absent) except ``cost``, which builds histories from the bundled examples:

- ``compare``: ctxfold and its peers at 25% and 10% of each conversation (fit, tokens
  kept, answers or identifiers kept, valid requests, ms); a peer that is not installed
  is skipped with one line;
- ``replay``: whole conversations turn by turn through the default ``Session``,
  ``compress`` each turn and ``trim_messages`` (memory, fill, repeated prefix, cost);
- ``next_action``: the agent runs turn by turn through the same three; *retention*:
  the share of the identifiers each next tool call uses (and the history showed) that
  the render before it shows (``benchmarks/next_action.py``);
- ``recall``: LoCoMo questions asked last, at 10% and 3%;
- ``agent``: the conversations through ``create_agent`` with ``CompressionMiddleware``
  and with a ``trim_messages`` middleware (fit and valid per model call, ms);
- ``anthropic``: the agent runs as Anthropic request dicts with signed thinking blocks,
  through ``compress`` and a ``Session`` (fit with thinking counted, valid Anthropic
  requests; *retention*: the share of outputs that alter no thinking block, send the
  tool loop's newest thinking and the newest turn whole where it fits);
- ``logs``: generated agent runs with long, repetitive tool output (test runs, cluster
  events, request logs, stack traces, compiler output, search hits), through
  ``compress`` at 25% and 10%, a ``Session`` turn by turn at 8000 and 4000 tokens and
  ``trim_messages`` (*retention*: the gold identifiers of the lines that matter found
  in the output; see ``benchmarks/logs.py``); needs no shared data;
- ``cost``: one cold ``compress`` and one ``trim_messages`` from 1K to 1M tokens.

Writes ``report.md``, ``results.json``, ``retention.png`` (what each method keeps
against the tokens it keeps), ``latency.png`` (per-turn ms against history length) and
``cost.png`` to ``--out``. ``--check`` compares fit, validity and retention with
``benchmarks/baseline.json`` (ctxfold's rows, recorded at one size by ``--record``) and
exits 1 on any that fell below it (of the stages it ran; ``--record`` replaces only
those stages' rows).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compare  # noqa: E402
import next_action  # noqa: E402
import recall  # noqa: E402
import replay  # noqa: E402

import ctxfold  # noqa: E402
from ctxfold.testing import find_data_dir  # noqa: E402

SIZES = {"tiny": 1, "small": 3, "full": 0}  # conversations per data set (0: all)
SETS = ("locomo", "mini_swe_agent", "swe_agent", "tau_airline")
BASELINE = HERE / "baseline.json"
CHECKED = ("fit", "valid", "retention")  # what --check holds to the baseline


@dataclass
class Row:
    """One method on one data set at one budget."""

    bench: str
    dataset: str
    budget: str
    method: str
    fit: float | None = None
    valid: float | None = None
    retention: float | None = None
    kept: float | None = None
    ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.bench}|{self.dataset}|{self.budget}|{self.method}"


class Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.started = max(total, 1), 0, time.perf_counter()
        self.stage = ""

    def step(self, label: str) -> None:
        self.done += 1
        filled = 30 * self.done // self.total
        elapsed = time.perf_counter() - self.started
        bar = "#" * filled + "." * (30 - filled)
        line = f"[{bar}] {self.done}/{self.total} {elapsed:5.0f}s {label[:50]}"
        if sys.stderr.isatty():  # one line, redrawn
            print(f"\r{line:<100}", end="", file=sys.stderr, flush=True)
        elif label.split()[0] != self.stage:  # a log: a line per stage
            print(line, file=sys.stderr, flush=True)
        self.stage = label.split()[0]

    def close(self) -> None:
        if sys.stderr.isatty():
            print(file=sys.stderr)


def _records(data: Path, name: str, limit: int) -> list[dict[str, Any]]:
    lines = (data / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()][: limit or None]


# ------------------------------------------------------------------------- stages


def stage_compare(data: Path, limit: int, bar: Progress) -> Iterator[Row]:
    methods: dict[str, compare.Method | None] = {
        "ctxfold auto": compare.ctxfold_method("auto"),
        "ctxfold sliding_window": compare.ctxfold_method("sliding_window"),
        "trim_messages": compare.trim_messages_method(),
        "ChatMemoryBuffer": compare.chat_memory_buffer_method(),
        "contextpress": compare.contextpress_method(),
    }
    for name in [n for n, m in methods.items() if m is None]:
        print(f"compare: {name} is not installed, skipped", file=sys.stderr)
    for dataset in SETS:
        records = _records(data, dataset, limit)
        for fraction in (0.25, 0.10):
            for name, method in methods.items():
                bar.step(f"compare {dataset} {fraction:.0%} {name}")
                if method is None:
                    continue
                r = compare.evaluate(records, method, fraction, repeat=1)
                kept = r["answers"] if r["answers"] is not None else r["ids"]
                yield Row(
                    "compare",
                    dataset,
                    f"{fraction:.0%}",
                    name,
                    r["fit"],
                    r["valid"],
                    kept,
                    r["kept"],
                    r["ms"],
                )


REPLAYED = ("session", "compress", "trim_messages")


def stage_replay(data: Path, limit: int, bar: Progress) -> Iterator[Row]:
    for dataset in SETS:
        records = _records(data, dataset, limit)
        for budget in (8000, 4000):
            runs = {}
            for method in REPLAYED:
                bar.step(f"replay {dataset} {budget} {method}")
                runs[method] = [
                    replay.replay(r, replay.METHODS[method], budget, 5) for r in records
                ]
            trim_cost = replay.summarize(runs["trim_messages"])["cost"]
            for method, rs in runs.items():
                s = replay.summarize(rs)
                yield Row(
                    "replay",
                    dataset,
                    str(budget),
                    method,
                    s["fit"],
                    s["valid"],
                    s["memory"],
                    s["fill"],
                    s["median_ms"],
                    {
                        "asked": s["asked"],
                        "repeated": s["repeated"],
                        "cost": s["cost"] / trim_cost,
                        "p95_ms": s["p95_ms"],
                        "latency": [
                            (h, t) for r in rs for h, t in zip(r.history, r.times, strict=True)
                        ],
                    },
                )


def stage_next_action(data: Path, limit: int, bar: Progress) -> Iterator[Row]:
    for dataset in next_action.SETS:
        convs = next_action.load(data, dataset, limit)
        for budget in (8000, 4000):
            bar.step(f"next_action {dataset} {budget}")
            for _, half, method, s in next_action.run_support(convs, [budget], REPLAYED):
                if half == "all":
                    yield Row(
                        "next_action",
                        dataset,
                        str(budget),
                        method,
                        retention=s["support"],
                        ms=s["median_ms"],
                        extra={"mean per conv": s["mean_support"], "calls": s["calls"]},
                    )


def stage_recall(data: Path, limit: int, bar: Progress) -> Iterator[Row]:
    records = _records(data, "locomo", limit)
    methods = {
        "ctxfold auto": recall.auto_method(),
        "ctxfold session": recall.session_method(),
        "trim_messages": recall.trim_messages_method(),
    }
    for fraction in (0.10, 0.03):
        for name, method in methods.items():
            bar.step(f"recall {fraction:.0%} {name}")
            if method is None:
                continue
            questions = 20 if limit else 0
            r = recall.measure(name, method, records, fraction, questions)
            yield Row(
                "recall", "locomo", f"{fraction:.0%}", name, retention=r["share"]["all"], ms=r["ms"]
            )


def stage_agent(data: Path, limit: int, bar: Progress) -> Iterator[Row]:
    from agent import replay_one  # needs langchain and langgraph: imported when run

    for dataset in SETS:
        convs = [ctxfold.from_openai(r["messages"]) for r in _records(data, dataset, limit)]
        for method in ("ctxfold", "trim_messages"):
            bar.step(f"agent {dataset} {method}")
            runs = [replay_one(msgs, 0.25, method) for msgs in convs]
            calls = sum(r["calls"] for r in runs)
            ms = [x for r in runs for x in r["ms"]]
            yield Row(
                "agent",
                dataset,
                "25%",
                method,
                sum(r["fit"] for r in runs) / calls,
                sum(r["valid"] for r in runs) / calls,
                ms=statistics.median(ms),
                extra={"calls": calls},
            )


def stage_anthropic(data: Path, limit: int, bar: Progress) -> Iterator[Row]:
    import anthropic_format as anthropic  # the benchmark module beside this one

    for dataset in anthropic.SETS:
        records = _records(data, dataset, limit)
        for share in anthropic.SHARES:
            bar.step(f"anthropic {dataset} {share:.0%}")
            got = [anthropic.measure(r, share) for r in records]
            for method in ("compress", "session"):
                marks = [m for g in got for m in g[method]]
                if not marks:
                    continue
                whole = [m["thinking"] and m["loop"] and m["continuation"] for m in marks]
                yield Row(
                    "anthropic",
                    dataset,
                    f"{share:.0%}",
                    f"ctxfold {method}",
                    statistics.mean(m["fit"] for m in marks),
                    statistics.mean(m["valid"] for m in marks),
                    statistics.mean(whole),
                    extra={
                        k: statistics.mean(m[k] for m in marks)
                        for k in ("thinking", "loop", "continuation")
                    },
                )


def stage_logs(limit: int, bar: Progress) -> Iterator[Row]:
    import logs  # the benchmark module beside this one

    records = logs.records_for(list(logs.FAMILIES), limit or logs.PER_FAMILY, logs.TOKENS)
    results = logs.run_all(records, list(logs.METHODS), bar.step)
    for (family, budget, half, method), s in results.items():
        if half != "all":
            continue
        extra = {k: s[k] for k in ("ids_renders", "lines", "via_list", "task", "list", "sentence")}
        row = Row("logs", family, budget, method, s["fit"], s["valid"], s["ids"])
        yield replace(row, ms=s["median_ms"], extra=extra)


def stage_cost(sizes: list[int], bar: Progress) -> Iterator[Row]:
    base = ctxfold.from_openai(
        json.loads((HERE.parent / "examples" / "coding_agent_sqlfluff.json").read_text())[
            "messages"
        ]
    )
    counter = compare.ENC
    unit = counter.count_messages(base[1:])
    for size in sizes:
        bar.step(f"cost {size:,} tokens")
        msgs = base[:1] + base[1:] * max(1, round(size / unit))
        tokens = counter.count_messages(msgs)
        budget = ctxfold.share_budget(msgs, 0.1, counter)
        for name, run in (("ctxfold auto", _cold_compress), ("trim_messages", _trim)):
            started = time.perf_counter()
            run(msgs, budget)
            ms = (time.perf_counter() - started) * 1000
            yield Row("cost", "examples", f"{tokens}", name, ms=ms, extra={"tokens": tokens})


def _trim(msgs: list[ctxfold.Message], budget: int) -> Any:
    from langchain_ctx import to_langchain

    return compare.trim(to_langchain(msgs), budget)


def _cold_compress(msgs: list[ctxfold.Message], budget: int) -> Any:
    ctxfold.clear_caches()
    return ctxfold.compress(msgs, budget=budget, reversible=False)


# ------------------------------------------------------------------------ outputs


def _cell(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def report(rows: list[Row], meta: dict[str, Any]) -> str:
    """The Markdown report: a table per stage (a stage's own measures after the common
    ones; *kept*: the share of tokens kept, or a session's fill of the budget)."""
    out = [
        f"# ctxfold benchmarks ({meta['size']})",
        "",
        f"{meta['date']}, {meta['machine']}, {meta['seconds']:.0f} s.",
        "",
    ]
    for bench in dict.fromkeys(r.bench for r in rows):
        mine = [r for r in rows if r.bench == bench]
        extra = [
            k
            for k in dict.fromkeys(k for r in mine for k in r.extra)
            if all(not isinstance(r.extra.get(k), list) for r in mine)
        ]
        head = ["data set", "budget", "method", "fit", "valid", "retention", "kept", "ms", *extra]
        out += [f"## {bench}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in mine:
            cells = [
                r.dataset,
                r.budget,
                r.method,
                r.fit,
                r.valid,
                r.retention,
                r.kept,
                r.ms,
                *(r.extra.get(k) for k in extra),
            ]
            out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        out.append("")
    return "\n".join(out)


def plots(rows: list[Row], out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plots skipped: matplotlib is not installed", file=sys.stderr)
        return []
    made = []
    drawn = [
        (
            "retention.png",
            "compare",
            "tokens kept (median share)",
            "retention",
            lambda r: [(r.kept, r.retention)] if r.kept is not None else [],
            False,
        ),
        (
            "latency.png",
            "replay",
            "history (tokens)",
            "ms per turn",
            lambda r: r.extra.get("latency", []),
            True,
        ),
        ("cost.png", "cost", "history (tokens)", "ms", lambda r: [(r.extra["tokens"], r.ms)], True),
    ]
    for name, bench, xlabel, ylabel, points, log in drawn:
        fig, ax = plt.subplots(figsize=(7, 4))
        for method in dict.fromkeys(r.method for r in rows if r.bench == bench):
            pts = [p for r in rows if r.bench == bench and r.method == method for p in points(r)]
            pts = [p for p in pts if p[1] is not None]
            if pts:
                ax.scatter(*zip(*pts, strict=True), s=8 if log else 30, label=method, alpha=0.7)
        if log:
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        made.append(name)
    return made


def check(rows: list[Row], size: str) -> list[str]:
    """What fell below the recorded baseline of ``size``."""
    if not BASELINE.exists():
        return [f"no baseline at {BASELINE}: record one with --record"]
    base = json.loads(BASELINE.read_text()).get(size)
    if base is None:
        return [f"the baseline holds no '{size}' run: record one with --size {size} --record"]
    found = {r.key: r for r in rows}
    ran = {r.bench for r in rows}
    worse = []
    for key, floors in base.items():
        if key.split("|")[0] not in ran:
            continue  # a stage not run here (--only)
        row = found.get(key)
        if row is None:
            print(f"check: {key} was not run here (a peer not installed?)", file=sys.stderr)
            continue
        for metric in CHECKED:
            now, then = getattr(row, metric), floors.get(metric)
            if then is not None and (now is None or now < then - 1e-9):
                worse.append(f"{key}: {metric} {now} < baseline {then}")
    return worse


def ours(row: Row) -> bool:
    """ctxfold's own rows (a peer's numbers move with the peer's releases)."""
    return row.method.startswith("ctxfold") or row.method in ("session", "compress")


def record_baseline(rows: list[Row], size: str) -> None:
    """This run's fit, validity and retention of ctxfold's rows, as the floor of
    ``size`` (of the stages it ran: the others' rows stay as recorded)."""
    base = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    ran = {r.bench for r in rows}
    kept = {k: v for k, v in base.get(size, {}).items() if k.split("|")[0] not in ran}
    base[size] = kept | {
        r.key: {m: getattr(r, m) for m in CHECKED}
        for r in rows
        if ours(r) and any(getattr(r, m) is not None for m in CHECKED)
    }
    BASELINE.write_text(json.dumps(base, indent=1, sort_keys=True) + "\n")


# --------------------------------------------------------------------------- main


STAGES: dict[str, Callable[[Path, int, Progress], Iterator[Row]]] = {
    "compare": stage_compare,
    "replay": stage_replay,
    "next_action": stage_next_action,
    "recall": stage_recall,
    "agent": stage_agent,
    "anthropic": stage_anthropic,
}
UNSHARED = ("logs", "cost")  # the stages that need no shared data
COST_SIZES = {
    "tiny": [1_000, 10_000, 100_000],
    "small": [1_000, 10_000, 100_000, 300_000],
    "full": [1_000, 10_000, 100_000, 1_000_000],
}


def _steps(stage: str) -> int:
    per = {
        "compare": len(SETS) * 2 * 5,
        "replay": len(SETS) * 2 * 3,
        "next_action": len(next_action.SETS) * 2,
        "recall": 6,
        "agent": len(SETS) * 2,
        "anthropic": 6,
        "logs": 8,
    }
    return per[stage]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--only", nargs="*", choices=[*STAGES, *UNSHARED], default=None)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--check", action="store_true", help="exit 1 below the baseline")
    parser.add_argument("--record", action="store_true", help="write this run as baseline")
    args = parser.parse_args(argv)
    stages = args.only or [*STAGES, *UNSHARED]
    data = find_data_dir(HERE.parent)
    if data is None and set(stages) - set(UNSHARED):
        print(
            "no shared data (../shared/data or $CTXFOLD_DATA_DIR): only the logs and cost "
            "stages run",
            file=sys.stderr,
        )
        stages = [s for s in stages if s in UNSHARED]
    limit = SIZES[args.size]
    costs = COST_SIZES[args.size]
    bar = Progress(
        sum(_steps(s) for s in stages if s != "cost") + (len(costs) if "cost" in stages else 0)
    )
    started = time.perf_counter()
    rows: list[Row] = []
    for stage in stages:
        if stage == "cost":
            rows += stage_cost(costs, bar)
        elif stage == "logs":
            rows += stage_logs(limit, bar)
        else:
            assert data is not None
            rows += STAGES[stage](data, limit, bar)
    bar.close()
    meta = {
        "size": args.size,
        "date": time.strftime("%Y-%m-%d"),
        "machine": _machine(),
        "seconds": time.perf_counter() - started,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.md").write_text(report(rows, meta), encoding="utf-8")
    (args.out / "results.json").write_text(
        json.dumps({"meta": meta, "rows": [r.__dict__ for r in rows]}, indent=1, default=str)
    )
    made = plots(rows, args.out)
    print(
        f"wrote {args.out / 'report.md'}, results.json, {', '.join(made) or 'no plots'}",
        file=sys.stderr,
    )
    if args.record:
        record_baseline(rows, args.size)
        print(f"recorded the baseline of '{args.size}' in {BASELINE}", file=sys.stderr)
    if args.check:
        worse = check(rows, args.size)
        for line in worse:
            print(f"below the baseline: {line}", file=sys.stderr)
        if worse:
            return 1
        print("check: nothing below the baseline", file=sys.stderr)
    return 0


def _machine() -> str:
    import os
    import platform

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


if __name__ == "__main__":
    sys.exit(main())
