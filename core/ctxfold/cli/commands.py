"""The commands: compress, report, expand, render, stats and migrate, each from its parsed
arguments to an exit code."""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .._json import loads as json_loads
from ..exceptions import BudgetError
from ..messages import Message
from ..recall import Query
from ..rendering import normalize_renderer
from ..rendering.turns import turns_from_messages
from ..report import report_page
from ..result import CompressionResult
from ..reversible import expand
from ..session.log import migrate, namespace
from ..storage import get_store, sqlite_path
from ..storage.store import NamespacedStore
from ..strategies.base import BaseCompressor, compress_with
from ..strategies.registry import resolve_strategy
from ..tokens import TokenCounter, get_counter, share_budget
from .files import CliError, Conversation, InputFormat, OutputError, load_file, table, write

__all__ = ["compress", "expand_cmd", "migrate_cmd", "render", "report", "stats"]

_ID = re.compile(r"(?:\[expand )?[0-9a-f]{10,64}\]?")
_ACTIONS = ("kept", "compressed", "summarized", "deduplicated", "reverted", "dropped")


def _budget_for(spec: str, messages: Sequence[Message], counter: TokenCounter) -> int:
    """A token count, or a share: the system prompt whole and that share of the rest."""
    try:
        if spec.endswith("%"):
            pct = float(spec[:-1])
            if not 0 <= pct <= 100:
                raise ValueError
            return share_budget(messages, pct / 100, counter)
        value = int(spec)
        if value < 1:
            raise ValueError
        return value
    except ValueError:
        raise CliError(
            f"--budget must be a positive token count (4000) or a percentage (25%), "
            f"got {spec[:40]!r}"
        ) from None


def _parse_options(pairs: Sequence[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--option takes KEY=VALUE, got {pair!r}")
        try:
            options[key] = json_loads(value)
        except ValueError:  # not JSON (or a number past Python's 4,300 digits): text
            options[key] = value
    return options


def _trace(result: CompressionResult, out: TextIO) -> None:
    """One line per decision, in columns as wide as their widest cell."""
    rows = [
        (str(d.index), d.action, d.label, str(d.tokens_before), str(d.tokens_after), d.step)
        for d in result.trace
    ]
    if not rows:
        return
    w = [max(len(row[i]) for row in rows) for i in range(5)]
    for index, action, label, before, after, step in rows:
        line = (
            f"  {index:>{w[0]}}  {action:<{w[1]}}  {label:<{w[2]}}  "
            f"{before:>{w[3]}} -> {after:<{w[4]}}  {step}"
        )
        print(line.rstrip(), file=out)


def _compress_all(
    args: argparse.Namespace, *, store: str | None = None
) -> tuple[list[tuple[Conversation, CompressionResult]], bool, TokenCounter]:
    """Each conversation of ``args.file`` compressed as the options say; with
    ``store``, reversibly, the originals kept there."""
    convs, jsonl = load_file(args.file, InputFormat(args.input_format))
    counter = get_counter(args.counter)
    options = _parse_options(args.option)
    if store is not None:  # reversible, with the originals where they outlive us
        options = {**options, "reversible": True, "store": get_store(store)}
    compressor = resolve_strategy(args.strategy, **options)
    # Without --store, originals would go to this process's memory, gone when it ends:
    # the output is plain unless the options ask otherwise.
    reversible = None if "reversible" in options else False
    query: Query = False if args.no_recall else args.query
    results: list[tuple[Conversation, CompressionResult]] = []
    for conv in convs:
        budget = _budget_for(args.budget, conv.messages, counter)
        try:
            result = compress_with(
                compressor,
                conv.messages,
                budget=budget,
                counter=counter,
                reversible=reversible if isinstance(compressor, BaseCompressor) else None,
                query=query,
            )
        except BudgetError as exc:
            raise CliError(
                f"{conv.label}: {exc} (on the command line: --option overflow=best_effort)",
                code=1,
            ) from None
        results.append((conv, result))
    return results, jsonl, counter


def _summary(
    results: list[tuple[Conversation, CompressionResult]], counter: TokenCounter, default: str
) -> None:
    """The stats table of ``results`` on stderr."""
    actions = [a for a in _ACTIONS if any(r.decision_counts().get(a) for _, r in results)]
    head = ["conversation", "budget", "tokens before", "after", "ratio", "saved", "messages"]
    rows = [[*head, *actions, "ms"]]
    for conv, r in results:
        s, counts = r.stats, r.decision_counts()
        rows.append(
            [
                conv.label,
                str(s.budget),
                str(s.tokens_before),
                str(s.tokens_after),
                f"{s.ratio:.2f}x",
                f"{s.reduction_pct:.1f}%",
                f"{s.messages_before}->{s.messages_after}",
                *(str(counts.get(a, 0)) for a in actions),
                f"{s.elapsed_ms:.1f}",
            ]
        )
    strategy = results[0][1].strategy if results else default
    print(f"strategy: {strategy}, counter: {counter.name}", file=sys.stderr)
    table(rows, sys.stderr)


def compress(args: argparse.Namespace) -> int:
    results, jsonl, counter = _compress_all(args, store=args.store)
    for conv, result in results:
        write(conv, result.messages, jsonl, args.format)
    _summary(results, counter, args.strategy)
    if args.trace:
        for conv, r in results:
            print(f"\ntrace of {conv.label}:", file=sys.stderr)
            _trace(r, sys.stderr)
            for w in r.warnings:
                print(f"  note: {w}", file=sys.stderr)
    return 0


def report(args: argparse.Namespace) -> int:
    results, _, counter = _compress_all(args)
    text = report_page([(conv.label, conv.messages, r) for conv, r in results])
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    _summary(results, counter, args.strategy)
    print(f"report: {args.output}", file=sys.stderr)
    return 0


def expand_cmd(args: argparse.Namespace) -> int:
    path = sqlite_path(args.store)
    if path and not Path(path).exists():  # opening it would create an empty store
        raise CliError(f"no store at {path}; give the --store that compress wrote to")
    store = get_store(args.store)
    if args.session is not None:  # a session writes in its own namespace of the store
        store = NamespacedStore(store, namespace(args.session))
    target = args.target
    if _ID.fullmatch(target.strip()) and not Path(target).exists():  # an id, not a file
        print(expand(target, store=store))
        return 0
    convs, jsonl = load_file(target)
    code = 0
    for conv in convs:
        back = expand(conv.messages, store=store)
        if back.missing:
            print(
                f"ctxfold: {conv.label}: the store lacks {', '.join(back.missing)}; "
                "what it has is expanded, the rest stays as it was",
                file=sys.stderr,
            )
            code = 1
        if back.corrupt:
            print(
                f"ctxfold: {conv.label}: the store's records under {', '.join(back.corrupt)} "
                "are not what was written there; they stay folded",
                file=sys.stderr,
            )
            code = 1
        write(conv, back.messages, jsonl, "json")
    return code


def migrate_cmd(args: argparse.Namespace) -> int:
    """Copy a session an older ctxfold stored into the current format, once."""
    path = sqlite_path(args.store)
    if path and not Path(path).exists():  # opening it would create an empty store
        raise CliError(f"no store at {path}; give the store the session was written to")
    copied = migrate(args.session, store=args.store)
    print(f"session {args.session!r}: {'migrated' if copied else 'already current'}")
    return 0


def render(args: argparse.Namespace) -> int:
    convs, jsonl = load_file(args.file, InputFormat(args.input_format))
    options = {**_parse_options(args.option), "counter": args.counter}
    renderer = normalize_renderer((args.renderer, options))
    if renderer is None:  # pragma: no cover - argparse gives a name
        raise CliError("--renderer needs a renderer name")
    counter = get_counter(args.counter)
    rows = [["conversation", "turns", "tokens before", "after", "calls", "lines", "ms"]]
    outputs: list[tuple[Conversation, list[Message]]] = []
    for conv in convs:
        turns, context = turns_from_messages(conv.messages)
        before = counter.count_messages(conv.messages)  # loads the tokenizer untimed
        start = time.perf_counter()
        try:
            messages, stats = renderer.to_messages(turns, {}, context)
        except BudgetError as exc:
            raise CliError(f"{conv.label}: {exc}", code=1) from None
        elapsed = (time.perf_counter() - start) * 1000
        outputs.append((conv, messages))
        rows.append(
            [
                conv.label,
                str(stats.turns),
                str(before),
                str(stats.tokens),
                f"{stats.tool_calls_shown}/{stats.tool_calls_total}",
                f"{stats.output_lines_shown}/{stats.output_lines_total}",
                f"{elapsed:.1f}",
            ]
        )
    for conv, messages in outputs:
        write(conv, messages, jsonl, args.format)
    print(f"renderer: {renderer.name()}, counter: {counter.name}", file=sys.stderr)
    table(rows, sys.stderr)
    return 0


def stats(args: argparse.Namespace) -> int:
    convs, _ = load_file(args.file, InputFormat(args.input_format))
    counter: TokenCounter = get_counter(args.counter)
    roles = ("system", "user", "assistant", "tool")
    rows = [["conversation", "messages", "tool calls", "tokens", *roles]]
    total = 0
    for conv in convs:
        per_role = dict.fromkeys(roles, 0)
        for m in conv.messages:
            key = "system" if m.role == "developer" else m.role
            per_role[key] += counter.count_message(m)
        tokens = counter.count_messages(conv.messages)
        total += tokens
        calls = sum(len(m.tool_calls) for m in conv.messages)
        rows.append(
            [
                conv.label,
                str(len(conv.messages)),
                str(calls),
                str(tokens),
                *(str(per_role[r]) for r in roles),
            ]
        )
    if len(convs) > 1:
        rows.append(
            [
                "total",
                str(sum(len(c.messages) for c in convs)),
                str(sum(len(m.tool_calls) for c in convs for m in c.messages)),
                str(total),
                *([""] * len(roles)),
            ]
        )
    print(f"counter: {counter.name}")
    table(rows, sys.stdout)
    return 0
