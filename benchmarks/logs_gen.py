"""Agent conversations with long, repetitive tool output, and their gold: the
generator behind ``benchmarks/logs.py``. Pure Python, no data files: a conversation is
a function of its family, its seed and its size.

Six families of tool output, each format varied by seed:

- ``tests``: a test run (pytest, unittest or ``go test``), hundreds of passing tests and
  a few failing ones with their assertion;
- ``cluster``: ``kubectl`` pods, events, ``describe`` and logs, one pod in
  CrashLoopBackOff and why;
- ``access``: a web service's request log (logfmt, JSON or plain), one ERROR line naming
  an exception and the source line it was raised at;
- ``traces``: an application log with one Python or Java stack trace among INFO lines;
- ``compiler``: gcc, rustc or tsc output, many warnings and one or two errors;
- ``search``: grep or ripgrep hits for several words, where only the hits holding the
  term the task names matter.

A conversation: a system prompt, the user's task, then assistant turns (a short plan
and one tool call, its arguments a command) each answered by a tool result. Its gold:
every line that matters (the message it is in, its text) with the identifiers on it,
each of a kind (``test``, ``location``, ``assertion``, ``pod``, ``reason``,
``exception``, ``code``, ``module``, ``hit``). No assistant turn, system prompt or task
names a gold identifier: what an output shows of one came from the tool output.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from logs_runs import compiler, search, tests
from logs_services import access, cluster, traces
from logs_world import NOUNS, VERBS, Output, World

FAMILIES: dict[str, Callable[[World, list[int]], tuple[str, list[Output]]]] = {
    "tests": tests,
    "cluster": cluster,
    "access": access,
    "traces": traces,
    "compiler": compiler,
    "search": search,
}


# ------------------------------------------------------------------ conversations

SYSTEM = (
    "You are a software engineering agent working in a terminal. Use the bash tool to run "
    "commands and read their output. Think before each step, keep your messages short, "
    "and say what you found when you are done."
)


def _small(w: World) -> Output:
    """A short tool result that does not matter (a listing, the log, a config file)."""
    rng = w.rng
    kind = rng.choice(["ls", "git", "config"])
    if kind == "ls":
        area = rng.choice(w.areas)
        names = [f.split("/")[1] for f in w.files if f.startswith(area + "/")]
        rows = [f"-rw-r--r--  1 dev dev {rng.randint(200, 40000):>6}  {n}.src" for n in names]
        return Output(f"Let me see what is in {area}.", f"ls -la src/{area}", rows)
    if kind == "git":
        log = [
            f"{rng.getrandbits(28):07x} {rng.choice(VERBS).title()} {rng.choice(NOUNS)} handling"
            for _ in range(rng.randint(5, 10))
        ]
        return Output("Let me check the recent commits.", "git log --oneline -10", log)
    conf = [
        f"{rng.choice(NOUNS)}_{rng.choice(['enabled', 'url', 'size'])} = {rng.randint(0, 99)}"
        for _ in range(rng.randint(5, 15))
    ]
    return Output("Let me read the settings.", "cat config/settings.ini", ["[main]", *conf])


def _shares(rng: random.Random, total: int, parts: int) -> list[int]:
    weights = [rng.uniform(0.5, 1.5) for _ in range(parts)]
    return [int(total * x / sum(weights)) for x in weights]


def generate(family: str, seed: int, tokens: tuple[int, int] = (30_000, 80_000)) -> dict[str, Any]:
    """One conversation of ``family`` (a key of :data:`FAMILIES`) for ``seed``, of
    about ``tokens`` tokens (a range the size is drawn from): ``{"family", "seed",
    "task", "messages" (OpenAI dicts), "gold" (one dict per line that matters:
    ``message``, ``line``, ``ids`` as ``[kind, identifier]`` pairs)}``."""
    rng = random.Random(f"{family}/{seed}")
    w = World.make(rng)
    total = rng.randint(*tokens)
    task, outs = FAMILIES[family](w, _shares(rng, total, rng.randint(2, 4)))
    first, rest = outs[0], outs[1:]
    rest += [_small(w) for _ in range(rng.randint(1, 3))]
    rng.shuffle(rest)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task},
    ]
    gold: list[dict[str, Any]] = []
    for k, out in enumerate([first, *rest]):
        call = f"call_{rng.getrandbits(40):010x}"
        arguments = json.dumps({"command": out.command})
        messages.append(
            {
                "role": "assistant",
                "content": out.plan,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "bash", "arguments": arguments},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call, "content": "\n".join(out.lines)})
        gold += [
            {"message": len(messages) - 1, "line": out.lines[i], "ids": [list(x) for x in ids]}
            for i, ids in sorted(out.gold.items())
        ]
        del k
    return {"family": family, "seed": seed, "task": task, "messages": messages, "gold": gold}
