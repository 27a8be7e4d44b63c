"""Replay the shared conversations through ``langchain.agents.create_agent`` and compare
what its model receives under ctxfold's ``CompressionMiddleware`` and under a
middleware that calls LangChain's ``trim_messages`` on every model call.

    python benchmarks/agent.py                    # every conversation, 25%
    python benchmarks/agent.py --limit 5 --share 0.1 --json agent.json

Each conversation of ``../shared/data`` is replayed with ``langchain_ctx.testing``'s
scripted model (the recorded assistant messages) and recorded tools (the recorded
results), one ``invoke`` per user turn on one thread, ``InMemorySaver`` as the
checkpointer. The budget holds the system prompt and the tool schemas plus ``share`` of
the history's tokens (o200k_base). Both middlewares receive the same requests.

Reported per data set and method: model calls; *fit*: calls within the budget (system
prompt, tool schemas and history counted); *valid*: calls with no orphan tool result,
no call without its result, and a turn order strict chat APIs accept where the
recorded conversation keeps it (LoCoMo has two user or two assistant turns in a row);
*complete*:
conversations whose final state holds every recorded message; per-call overhead (the
middleware's own time before the model is called: median and p95 in ms, pooled over
calls, and the median's ratio to ``trim_messages``'s in the same run); the whole
replay's seconds.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import trim
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AnyMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxfold import Message
from ctxfold.testing import find_data_dir, load_conversations
from langchain_ctx import CompressionMiddleware
from langchain_ctx.testing import Replay

Handler = Callable[[ModelRequest[Any]], ModelResponse[Any]]


class TrimMiddleware(AgentMiddleware[Any, Any, Any]):
    """``trim_messages`` on every model call, as the benchmarks run it, to the budget
    less the system prompt (tool schemas are not counted: trim cannot see them)."""

    def __init__(self, budget: int) -> None:
        super().__init__()
        self.budget = budget

    def wrap_model_call(self, request: ModelRequest[Any], handler: Handler) -> Any:
        system = request.system_message
        messages: list[AnyMessage] = trim(
            [system, *request.messages] if system else request.messages, self.budget
        )
        if system is not None:
            messages = messages[1:]
        return handler(request.override(messages=messages))


class Timed(AgentMiddleware[Any, Any, Any]):
    """Times ``inner``'s work on each model call: from its start to the model's call."""

    def __init__(self, inner: AgentMiddleware[Any, Any, Any]) -> None:
        super().__init__()
        self.inner = inner
        self.state_schema = inner.state_schema
        self.ms: list[float] = []

    @property
    def name(self) -> str:
        return f"timed_{self.inner.name}"

    def wrap_model_call(self, request: ModelRequest[Any], handler: Handler) -> Any:
        started = time.perf_counter()

        def timed(req: ModelRequest[Any]) -> ModelResponse[Any]:
            self.ms.append((time.perf_counter() - started) * 1000)
            return handler(req)

        return self.inner.wrap_model_call(request, timed)


def replay_one(msgs: list[Message], share: float, method: str) -> dict[str, Any]:
    """One conversation through one method: the calls' checks and the overhead."""
    replay = Replay.of(msgs)
    budget = replay.budget_for(share, expand_tool=method == "ctxfold")
    inner: AgentMiddleware[Any, Any, Any] = (
        CompressionMiddleware(budget=budget) if method == "ctxfold" else TrimMiddleware(budget)
    )
    timed = Timed(inner)
    agent = create_agent(
        replay.model,
        replay.tools,
        system_prompt=replay.system_prompt,
        middleware=[timed],
        checkpointer=InMemorySaver(),
    )
    started = time.perf_counter()
    state = replay.run(agent, {"configurable": {"thread_id": "t"}, "recursion_limit": 10_000})
    seconds = time.perf_counter() - started
    problems = [c.problems(budget, strict=replay.strict) for c in replay.model.calls]
    over = [any("over the budget" in p for p in found) for found in problems]
    invalid = [any("over the budget" not in p for p in found) for found in problems]
    return {
        "calls": len(problems),
        "fit": len(problems) - sum(over),
        "valid": len(problems) - sum(invalid),
        "complete": replay.holds_all(state["messages"]),
        "ms": timed.ms,
        "seconds": seconds,
    }


def _p95(values: list[float]) -> float:
    return sorted(values)[int(0.95 * (len(values) - 1))] if values else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="the shared data folder")
    parser.add_argument("--share", type=float, default=0.25)
    parser.add_argument("--limit", type=int, default=0, help="conversations per data set")
    parser.add_argument("--sets", default="locomo,mini_swe_agent,swe_agent,tau_airline")
    parser.add_argument("--json", default=None, help="write the rows here too")
    args = parser.parse_args()
    data = find_data_dir(args.data or Path(__file__).resolve().parents[1])
    if data is None:
        sys.exit("the shared data is not here: put it in ../shared/data or set CTXFOLD_DATA_DIR")
    rows = []
    print(
        "| data set | method | convs | calls | fit | valid | complete | ms med | p95 | ratio | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.sets.split(","):
        convs = list(load_conversations(data / f"{name}.jsonl"))
        if args.limit:
            convs = convs[: args.limit]
        results = {
            method: [replay_one(msgs, args.share, method) for _, msgs in convs]
            for method in ("ctxfold", "trim_messages")
        }
        trim_median = statistics.median(ms for r in results["trim_messages"] for ms in r["ms"])
        for method, runs in results.items():
            ms = [x for r in runs for x in r["ms"]]
            calls = sum(r["calls"] for r in runs)
            row = {
                "set": name,
                "method": method,
                "conversations": len(runs),
                "calls": calls,
                "fit": sum(r["fit"] for r in runs) / calls,
                "valid": sum(r["valid"] for r in runs) / calls,
                "complete": sum(r["complete"] for r in runs) / len(runs),
                "ms_median": statistics.median(ms),
                "ms_p95": _p95(ms),
                "ratio": statistics.median(ms) / trim_median,
                "seconds": sum(r["seconds"] for r in runs),
            }
            rows.append(row)
            print(
                f"| {name} | {method} | {row['conversations']} | {calls} | {row['fit']:.1%} "
                f"| {row['valid']:.1%} | {row['complete']:.0%} | {row['ms_median']:.2f} "
                f"| {row['ms_p95']:.2f} | {row['ratio']:.2f}x | {row['seconds']:.1f} |",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps({"share": args.share, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
