"""Turn rendering on the shared agent runs: what the coalesced rendering costs and keeps.

    python benchmarks/render.py
    python benchmarks/render.py --datasets swe_agent --repeat 5

Each conversation is read into turns (``ctxfold.turns_from_messages``) and rendered as
the agent would see it at its last turn, per data set:

- full / coalesced: median tokens of ``FullHistory`` (the history as it was) and of
  ``SingleUserCoalesced`` with its defaults (20 calls, 15 lines), and their ratio;
- ids: of the probe identifiers found in the full history, the share in the coalesced
  rendering, and in ``trim_messages`` (LangChain, strategy "last", system kept) and
  ``auto`` given the coalesced rendering's token count as their budget (same size);
- run: tokens sent over the whole run (renderings at 10 points of it, summed) for the
  full history, the coalesced rendering and ``PressureTriggered(trigger_tokens=8000)``,
  as a share of the full history's;
- ms: median milliseconds of one rendering at the last turn, cold (caches cleared) and
  at the next turn (the turn before rendered first, as an agent loop does).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import ctxfold
from ctxfold import TiktokenCounter, from_openai, to_openai
from ctxfold.rendering import FullHistory, PressureTriggered, SingleUserCoalesced
from ctxfold.testing import find_data_dir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import ENC, ctxfold_method, text_of, trim_messages_method

AGENT_SETS = ("mini_swe_agent", "swe_agent", "tau_airline")
POINTS = 10


def found(ids: list[str], full: str, shown: str) -> tuple[int, int]:
    present = [i for i in ids if i in full]
    return sum(i in shown for i in present), len(present)


def run(records: list[dict[str, Any]], repeat: int) -> dict[str, Any]:
    trim = trim_messages_method()
    auto = ctxfold_method("auto")
    full_r, coal_r = FullHistory(), SingleUserCoalesced()
    pressure = PressureTriggered(trigger_tokens=8000)
    fulls, coals, cold, warm = [], [], [], []
    kept = {"coalesced": [0, 0], "trim_messages": [0, 0], "auto": [0, 0]}
    sent = {"full": 0, "coalesced": 0, "pressure": 0}
    for rec in records:
        turns, options = ctxfold.turns_from_messages(from_openai(rec["messages"]))
        if not turns:
            continue
        full, fstats = full_r.to_messages(turns, {}, options)
        times = []
        for _ in range(repeat):
            ctxfold.clear_caches()  # cold: no memo, and a counter with an empty cache
            fresh = {**options, "counter": TiktokenCounter(ENC.encoding)}
            t = time.perf_counter()
            out, stats = coal_r.to_messages(turns, {}, fresh)
            times.append(time.perf_counter() - t)
        cold.append(statistics.median(times) * 1000)
        ctxfold.clear_caches()
        coal_r.to_messages(turns[:-1], {}, options)
        t = time.perf_counter()
        coal_r.to_messages(turns, {}, options)
        warm.append((time.perf_counter() - t) * 1000)
        fulls.append(fstats.tokens)
        coals.append(stats.tokens)
        ids = rec.get("probes", {}).get("identifiers", [])
        full_text = text_of(full)
        for name, shown in (
            ("coalesced", out),
            ("trim_messages", trim(to_openai(full), stats.tokens)[0] if trim else None),
            ("auto", auto(to_openai(full), stats.tokens)[0]),
        ):
            if shown is None:
                continue
            f, n = found(ids, full_text, text_of(shown))
            kept[name][0] += f
            kept[name][1] += n
        for k in sorted({max(1, round(len(turns) * p / POINTS)) for p in range(1, POINTS + 1)}):
            part = turns[:k]
            sent["full"] += full_r.to_messages(part, {}, options)[1].tokens
            sent["coalesced"] += coal_r.to_messages(part, {}, options)[1].tokens
            sent["pressure"] += pressure.to_messages(part, {}, options)[1].tokens
    return {
        "n": len(fulls),
        "full": statistics.median(fulls),
        "coalesced": statistics.median(coals),
        "ratio": statistics.median(f / c for f, c in zip(fulls, coals, strict=True)),
        "ids": {k: (f / n if n else None) for k, (f, n) in kept.items()},
        "run": {k: v / sent["full"] for k, v in sent.items()},
        "ms_cold": statistics.median(cold),
        "ms_next_turn": statistics.median(warm),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", default=list(AGENT_SETS))
    parser.add_argument("--repeat", type=int, default=3, help="cold renderings per run")
    args = parser.parse_args(argv)
    data = find_data_dir(Path(__file__).resolve().parent)
    if data is None:
        print("skipped: the shared conversations are not in ../shared/data", file=sys.stderr)
        return 0
    print(
        "| set | n | full tokens | coalesced | ratio | ids coalesced | trim same size "
        "| auto same size | run: coalesced / pressure | ms cold | ms next turn |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.datasets:
        path = data / f"{name}.jsonl"
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        r = run(records, args.repeat)

        def pct(x: float | None) -> str:
            return "-" if x is None else f"{100 * x:.1f}%"

        print(
            f"| {name} | {r['n']} | {r['full']:.0f} | {r['coalesced']:.0f} | "
            f"{r['ratio']:.2f}x | {pct(r['ids']['coalesced'])} | "
            f"{pct(r['ids']['trim_messages'])} | {pct(r['ids']['auto'])} | "
            f"{pct(r['run']['coalesced'])} / {pct(r['run']['pressure'])} | "
            f"{r['ms_cold']:.1f} | {r['ms_next_turn']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
