"""The shared agent runs as a coding assistant sends them to Anthropic's API: each
run converted to Anthropic's Messages format with a signed thinking block opening
every assistant turn, compressed by ``compress`` and rendered turn by turn by the
default ``Session``, both given the Anthropic dicts as they are.

    python benchmarks/anthropic_format.py                       # every agent set, 25% and 10%
    python benchmarks/anthropic_format.py --limit 3 --json out.json

Per output: ``fit`` (ctxfold's count, thinking counted, within the budget), ``valid``
(a request the Messages API takes: user first, turns alternating, every ``tool_use``
answered in the next turn, read back by ``from_anthropic``), ``thinking`` (no thinking
block altered: each one sent is byte for byte one of the input's), ``loop`` (in a tool
loop, the newest assistant turn's thinking is sent, as Anthropic requires),
``continuation`` (the newest turn sent whole where it fits the budget) and ``same``
(``compress`` decides for the Anthropic dicts as for the same run given as OpenAI
dicts with the thinking as parts). ``counted`` is ctxfold's count of the whole run over
the count of its request JSON's text, thinking included (how much of what is sent a
counter sees: 1.0 is all of it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import itertools

from compare import ENC, shared_data

import ctxfold
from ctxfold import MemoryStore, Session, from_anthropic, from_openai, to_anthropic
from ctxfold.result import without_recall

SETS = ("swe_agent", "mini_swe_agent", "tau_airline")
SHARES = (0.25, 0.10)


def with_thinking(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every assistant turn opened by a thinking block about what the turn does (its
    own words and calls, restated), signed with a 344-character signature."""
    out = []
    for k, turn in enumerate(turns):
        if turn["role"] == "assistant":
            content = turn["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            said = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            calls = [
                f"{b['name']}({json.dumps(b['input'])[:200]})"
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            thought = (
                f"The last result matters for what comes next. {said[:600]} "
                f"Next: {'; '.join(calls) or 'answer'}. I should check it worked before moving on."
            )
            sig = hashlib.sha256(f"{k}{thought}".encode()).hexdigest() * 6
            turn = {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": thought, "signature": sig[:344]},
                    *blocks,
                ],
            }
        out.append(turn)
    return out


def thinking(turns: list[dict[str, Any]]) -> list[str]:
    return [
        json.dumps(b, sort_keys=True)
        for t in turns
        if isinstance(t["content"], list)
        for b in t["content"]
        if b.get("type") == "thinking"
    ]


def valid(turns: list[dict[str, Any]], system: Any) -> bool:
    roles = [t["role"] for t in turns]
    if not roles or roles[0] != "user" or any(a == b for a, b in itertools.pairwise(roles)):
        return False
    for k, t in enumerate(turns[:-1]):
        calls = [
            b["id"]
            for b in t["content"]
            if isinstance(t["content"], list) and b.get("type") == "tool_use"
        ]
        nxt = turns[k + 1]["content"]
        answered = (
            [
                b.get("tool_use_id")
                for b in nxt
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]
            if isinstance(nxt, list)
            else []
        )
        if calls and answered != calls:
            return False
    try:
        from_anthropic(turns, system=system)
    except ctxfold.InvalidMessageError:
        return False
    return True


def judge(
    result: ctxfold.CompressionResult, run: list[dict[str, Any]], system: Any
) -> dict[str, bool]:
    """One output's measures (``run``: the Anthropic turns it was made from)."""
    given_as = result.as_given()
    out = given_as if isinstance(given_as, dict) else {"messages": given_as}
    if out["messages"] and out["messages"][0]["role"] == "system":
        out = {"system": out["messages"][0]["content"], "messages": out["messages"][1:]}
    turns, sys_out = out["messages"], out.get("system")
    budget = result.stats.budget
    given = set(thinking(run))
    last_in = max(k for k, t in enumerate(run) if t["role"] == "assistant")
    last_out = max((k for k, t in enumerate(turns) if t["role"] == "assistant"), default=None)
    results = run[-1]["content"] if isinstance(run[-1]["content"], list) else []
    in_loop = last_in == len(run) - 2 and any(b.get("type") == "tool_result" for b in results)
    before = from_anthropic(run, system=system)
    newest = [m for m in before if m.metadata.get("anthropic_turn") == len(run) - 1]
    room = budget - ENC.count_messages([m for m in before if m.role == "system"])
    shown = without_recall(list(result.messages))
    return {
        "fit": ENC.count_messages(from_anthropic(turns, system=sys_out)) <= budget,
        "valid": valid(turns, sys_out),
        "thinking": all(b in given for b in thinking(turns)),
        "loop": not in_loop
        or (last_out is not None and thinking([turns[last_out]]) == thinking([run[last_in]])),
        "continuation": ENC.count_messages(newest) > room or shown[-len(newest) :] == newest,
    }


def fate(d: ctxfold.Decision) -> tuple[str, str]:
    return ("kept" if d.action in ("kept", "compressed") else d.action, d.reason)


def measure(record: dict[str, Any], share: float) -> dict[str, Any]:
    msgs = from_openai(record["messages"])
    system, turns = to_anthropic(msgs)
    if turns and turns[-1]["role"] == "assistant":
        turns = turns[:-1]  # end in the tool loop: the newest calls' results came
    run = with_thinking(turns)
    whole = from_anthropic(run, system=system)
    total = ENC.count_messages(whole)
    floor = ENC.count_messages(whole[:1]) + 600
    budget = max(int(total * share), floor)
    request = {"system": system, "messages": run}
    result = ctxfold.compress(request, budget=budget, store=MemoryStore(key=b"k" * 32))
    marks = [judge(result, run, system)]
    openai = ctxfold.compress(
        ctxfold.to_openai(whole), budget=budget, store=MemoryStore(key=b"k" * 32)
    )
    same = list(map(fate, result.trace)) == list(map(fate, openai.trace))
    session = Session(budget=budget, store=MemoryStore(key=b"k" * 32))
    if system is not None:
        session.add({"role": "system", "content": system})
    session_marks = []
    for k, turn in enumerate(run):
        session.add(turn)
        if turn["role"] == "user" and k:
            session_marks.append(judge(session.render(), run[: k + 1], system))
    return {
        "compress": marks,
        "session": session_marks,
        "same": same,
        "counted": total / readable(request),
    }


def readable(request: dict[str, Any]) -> int:
    """Tokens of every text the model reads in ``request``: the system prompt, texts,
    thinking, each call's input as JSON and each result's text."""
    texts = [request["system"]] if isinstance(request.get("system"), str) else []
    for turn in request["messages"]:
        content = turn["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for b in blocks:
            inner = b.get("content") if b.get("type") == "tool_result" else None
            if isinstance(inner, list):
                texts += [x.get("text", "") for x in inner]
            elif isinstance(inner, str):
                texts.append(inner)
            texts.append(b.get("text") or b.get("thinking") or "")
            if b.get("type") == "tool_use":
                texts.append(json.dumps(b["input"], ensure_ascii=False, separators=(",", ":")))
    return sum(ENC.count_text(t) for t in texts if t)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="runs per set (0: all)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    data = shared_data()
    if data is None:
        print("no shared data (../shared/data or $CTXFOLD_DATA_DIR): nothing to measure")
        return 0
    rows = []
    for name in SETS:
        lines = (data / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        records = [json.loads(x) for x in lines if x.strip()][: args.limit or None]
        for share in SHARES:
            got = [measure(r, share) for r in records]
            for method in ("compress", "session"):
                marks = [m for g in got for m in g[method]]
                row = {
                    "set": name,
                    "share": f"{share:.0%}",
                    "method": method,
                    "outputs": len(marks),
                }
                row.update(
                    {k: statistics.mean(m[k] for m in marks) for k in marks[0]} if marks else {}
                )
                if method == "compress":
                    row["same"] = statistics.mean(g["same"] for g in got)
                    counted = [g["counted"] for g in got if g["counted"]]
                    row["counted"] = statistics.median(counted) if counted else None
                rows.append(row)
                print(json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
