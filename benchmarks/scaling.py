"""Cost against the length of the history: 1K to 100K messages (1M+ tokens).

    python benchmarks/scaling.py                          # 1K, 10K and 100K messages
    python benchmarks/scaling.py --sizes 1000 10000 --budget 32000 --json out.json

For each size, each measure runs in a fresh process (its peak resident memory is its
own, its caches cold):

- ``compress``: one cold ``ctxfold.compress`` (auto) of the whole history;
- ``trim``: LangChain's ``trim_messages`` (the newest messages that fit, same counter);
- ``first render``: a fresh ``Session`` given the whole history, rendered once;
- ``turns``: a ``Session`` built message by message, rendered before each assistant
  message, as an agent loop does: the median and the worst render (wall time, and
  the worst in CPU time: a wait for the disk or the machine is no work). The loop is given
  each message as the JSON dict a server receives (a dict of strings, which the
  garbage collector does not track), so a render's time is the session's, not a
  collection over 100,000 message objects the driver itself holds. Besides, less the
  full collections inside them, the worst render that recalled (compacting or not)
  and the worst and the median that compacted without recalling (a compaction works
  on the last note and what came since: its median should not grow with the
  history); the worst full collections
  inside one render; and the CPU time of the render whose recall first searched
  in arrays (importing numpy, once per process: 60-100 ms) beside the worst of
  the others;
- ``load``: ``Session.load`` of that session from its SQLite file, and its render.

Reported: CPU seconds (wall beside), peak MB, the ratio of ``compress`` to ``trim``,
and the exponent of CPU time against size fitted over the sizes (1.0: linear). The
history repeats the bundled example conversations' texts with a running number in
each message, user and assistant alternating; the budget is 32,000 tokens.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MEASURES = ("compress", "trim", "first render", "turns", "load")


def history(n: int) -> list[dict[str, str]]:
    texts: list[str] = []
    for path in sorted((REPO / "examples").glob("*.json")):
        for m in json.loads(path.read_text(encoding="utf-8"))["messages"]:
            if isinstance(m.get("content"), str) and m["content"].strip():
                texts.append(m["content"][:2000])
    roles = ("user", "assistant")
    return [
        {"role": roles[k % 2], "content": f"{texts[k % len(texts)]} (step {k})"} for k in range(n)
    ]


# ------------------------------------------------------- one measure, in a child


def _compress(msgs: list[Any], budget: int, _: Path) -> dict[str, Any]:
    import ctxfold

    ctxfold.compress(msgs, budget=budget, reversible=False)
    return {}


def _trim(msgs: list[Any], budget: int, _: Path) -> dict[str, Any]:
    from langchain_core.messages import trim_messages

    from ctxfold import get_counter
    from langchain_ctx import from_langchain

    counter = get_counter("o200k_base")
    trim_messages(
        msgs,  # LangChain messages: converted before the clock started
        max_tokens=budget,
        strategy="last",
        include_system=True,
        token_counter=lambda ms: counter.count_messages(from_langchain(ms)),
    )
    return {}


def _first_render(msgs: list[Any], budget: int, _: Path) -> dict[str, Any]:
    import ctxfold

    session = ctxfold.Session(budget=budget, store=ctxfold.MemoryStore())
    session.add(msgs)
    session.render()
    return {}


def _turns(msgs: list[Any], budget: int, db: Path) -> dict[str, Any]:
    import gc

    import ctxfold
    from ctxfold.result import RECALL_KEY

    session = ctxfold.Session("scaling", budget=budget, store=f"sqlite:///{db}")
    collecting = [0.0, 0.0]  # seconds of full collections in this render, the last start

    def timed(phase: str, info: dict[str, Any]) -> None:
        if info["generation"] == 2:
            if phase == "start":
                collecting[1] = time.perf_counter()
            else:
                collecting[0] += time.perf_counter() - collecting[1]

    renders: list[float] = []
    cpu: list[float] = []  # a render's CPU time: its wall time less waits (disk, machine)
    own: dict[str, list[float]] = {"compaction": [], "recall": [], "collection": []}
    importing = -1  # the render whose recall first searched in arrays, importing numpy
    gc.callbacks.append(timed)
    for m in msgs:
        if m["role"] == "assistant":
            folded, collecting[0] = session.folded, 0.0
            fresh = "numpy" not in sys.modules
            started, started_cpu = time.perf_counter(), time.process_time()
            result = session.render()
            renders.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
            if fresh and "numpy" in sys.modules:
                importing = len(cpu) - 1
            own["collection"].append(collecting[0] * 1000)
            spent = renders[-1] - own["collection"][-1]  # its own part, less collections
            if any(RECALL_KEY in x.metadata for x in result.messages):
                own["recall"].append(spent)  # compacting or not
            elif session.folded != folded:
                own["compaction"].append(spent)
        session.add(m)
    gc.callbacks.remove(timed)
    return {
        "median_ms": statistics.median(renders),
        "worst_ms": max(renders),
        "worst_cpu_ms": max(cpu),
        "import_cpu_ms": cpu[importing] if importing >= 0 else 0.0,
        "worst_cpu_other_ms": max((c for k, c in enumerate(cpu) if k != importing), default=0.0),
        **{f"worst_{k}_ms": max(v, default=0.0) for k, v in own.items()},
        # what a compaction costs at this size, beside its worst (the machine's spread)
        "median_compaction_ms": statistics.median(own["compaction"] or [0.0]),
    }


def _load(msgs: list[Any], budget: int, db: Path) -> dict[str, Any]:
    import ctxfold

    session = ctxfold.Session.load("scaling", store=f"sqlite:///{db}", budget=budget)
    session.render()
    return {"messages": len(session.history)}


RUN: dict[str, Callable[[list[Any], int, Path], dict[str, Any]]] = {
    "compress": _compress,
    "trim": _trim,
    "first render": _first_render,
    "turns": _turns,
    "load": _load,
}


def child(measure: str, n: int, budget: int, db: Path) -> None:
    import ctxfold

    msgs: list[Any] = ctxfold.from_openai(history(n))
    # The encoding loaded, nothing of the history counted: every measure starts as in a
    # fresh process, its caches cold (counting the history first would leave each
    # message's count cached, and hide the counting from every measure).
    ctxfold.get_counter("o200k_base").count_text("Loads the encoding.")
    if measure == "turns":  # as a server receives them
        msgs = history(n)
    if measure == "trim":  # a LangChain user has LangChain messages, and LangChain loaded
        from langchain_core.messages import trim_messages  # noqa: F401

        from langchain_ctx import to_langchain

        msgs = to_langchain(msgs)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu, wall = time.process_time(), time.perf_counter()
    extra = RUN[measure](msgs, budget, db)
    out = {
        "cpu": time.process_time() - cpu,
        "wall": time.perf_counter() - wall,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "added_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024,
        **extra,
    }
    out["tokens"] = ctxfold.get_counter("o200k_base").count_messages(  # after the peak
        ctxfold.from_openai(history(n))
    )
    print(json.dumps(out))


# ----------------------------------------------------------------------- driver


def _spawn(measure: str, n: int, budget: int, db: Path) -> dict[str, Any] | str:
    done = subprocess.run(
        [sys.executable, __file__, "--child", measure, str(n), str(budget), str(db)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["?"])[-1]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def exponent(points: list[tuple[int, float]]) -> float | None:
    """The slope of log(time) against log(size), by least squares."""
    pts = [(math.log(n), math.log(t)) for n, t in points if t > 0]
    if len(pts) < 2:
        return None
    mx, my = statistics.mean(x for x, _ in pts), statistics.mean(y for _, y in pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=[1_000, 10_000, 100_000])
    parser.add_argument("--budget", type=int, default=32_000)
    parser.add_argument("--measures", nargs="*", choices=MEASURES, default=list(MEASURES))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]), Path(args.child[3]))
        return 0
    if "load" in args.measures and "turns" not in args.measures:
        parser.error("load reopens the session the turns measure builds: add turns")
    rows: dict[int, dict[str, Any]] = {}
    print("| messages | tokens | measure | CPU s | wall s | peak MB | notes |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            db = Path(tmp) / f"session-{n}.db"
            rows[n] = {}
            for measure in args.measures:
                r = _spawn(measure, n, args.budget, db)
                rows[n][measure] = r
                if isinstance(r, str):
                    print(f"| {n} | - | {measure} | failed: {r} ||||", flush=True)
                    continue
                notes = ", ".join(f"{k} {v:.1f}" for k, v in r.items() if k.endswith("_ms"))
                print(
                    f"| {n} | {r['tokens']} | {measure} | {r['cpu']:.2f} | {r['wall']:.2f} "
                    f"| {r['peak_mb']:.0f} | {notes} |",
                    flush=True,
                )
    _summary(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


def _summary(rows: dict[int, dict[str, Any]]) -> None:
    ok = {n: r for n, r in rows.items() if isinstance(r.get("compress"), dict)}
    for n, r in ok.items():
        if isinstance(r.get("trim"), dict):
            ratio = r["compress"]["cpu"] / max(r["trim"]["cpu"], 1e-9)
            print(f"{n} messages: compress / trim_messages CPU {ratio:.1f}x")
        for measure in ("first render", "load"):
            if isinstance(r.get(measure), dict):
                ratio = r[measure]["cpu"] / max(r["compress"]["cpu"], 1e-9)
                print(f"{n} messages: {measure} / compress CPU {ratio:.2f}x")
    for measure in ("compress", "trim", "first render"):
        pts = [(n, r[measure]["cpu"]) for n, r in rows.items() if isinstance(r.get(measure), dict)]
        slope = exponent(pts)
        if slope is not None:
            print(f"{measure}: CPU time grows as size^{slope:.2f}")


if __name__ == "__main__":
    sys.exit(main())
