"""The ``ctxfold`` command: compress a conversation file, expand a compressed one back,
write an HTML report of a compression, render an agent run's turns afresh, or report
token counts.

Exit codes: 0 success, 1 a conversation cannot fit its budget (or, for ``expand``, the
store lacks some originals or holds altered ones), 2 bad input or usage, 3 the output
cannot be written (a full disk, no stdout or a failing one) or another failure of the
environment. A reader that stops early (``| head``) is no failure: it got what it asked
for, and the exit code does not depend on whether the output fitted the pipe's buffer.
The command never shows a traceback (``CTXFOLD_DEBUG=1`` lets an unexpected error
through, for a bug report).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ._json import TooDeepError
from ._json import loads as json_loads
from .exceptions import BudgetError, CtxfoldError, InvalidMessageError
from .messages import Message, from_openai, to_openai
from .recall import Query
from .rendering import normalize_renderer
from .rendering.turns import turns_from_messages
from .report import report_page
from .result import CompressionResult
from .reversible import expand
from .session.log import namespace
from .storage import get_store, sqlite_path
from .storage.store import NamespacedStore
from .strategies.base import BaseCompressor, compress_with
from .strategies.registry import resolve_strategy
from .tokens import TokenCounter, get_counter, share_budget

__all__ = ["main"]

_ID = re.compile(r"(?:\[expand )?[0-9a-f]{10,64}\]?")
_ACTIONS = ("kept", "compressed", "summarized", "deduplicated", "reverted", "dropped")


class CliError(Exception):
    """A one-line reason to print before exiting with ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Conversation:
    label: str
    record: dict[str, Any] | None  # the surrounding record, or None for a bare list
    messages: list[Message]


def _read_text(path: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise CliError(f"cannot read {path}: {reason}") from None


def _parse(path: str, text: str) -> tuple[list[Any], bool]:
    """Return the JSON values in the file and whether it was JSONL."""
    try:
        return [json_loads(text)], False
    except TooDeepError as exc:
        raise CliError(f"{path}: {exc}; ctxfold reads no deeper JSON") from None
    except json.JSONDecodeError as whole:
        values: list[Any] = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                values.append(json_loads(line))
            except TooDeepError as exc:
                raise CliError(f"{path}, line {n}: {exc}; ctxfold reads no deeper JSON") from None
            except json.JSONDecodeError as exc:
                err = whole if n == 1 else exc
                where = f"line {err.lineno if n == 1 else n}, column {err.colno}"
                raise CliError(f"{path} is not valid JSON or JSONL ({where}: {err.msg})") from None
        if not values:
            raise CliError(f"{path} is empty; expected a JSON list of messages or JSONL") from None
        return values, True


def load_file(path: str) -> tuple[list[Conversation], bool]:
    """Read OpenAI-format conversations from a JSON or JSONL file (``-`` for stdin)."""
    values, jsonl = _parse(path, _read_text(path))
    convs: list[Conversation] = []
    for n, value in enumerate(values):
        label = f"{path}:{n + 1}" if jsonl else path
        if isinstance(value, dict) and isinstance(value.get("messages"), list):
            record: dict[str, Any] | None = value
            raw = value["messages"]
            label = str(value.get("id", label))
        elif isinstance(value, list):
            record, raw = None, value
        else:
            raise CliError(
                f"{label}: expected a list of messages or an object with a 'messages' list"
            )
        try:
            convs.append(Conversation(label, record, from_openai(raw)))
        except InvalidMessageError as exc:
            raise CliError(f"{label}: invalid message: {exc}") from None
    return convs, jsonl


def _budget_for(spec: str, messages: Sequence[Message], counter: TokenCounter) -> int:
    """A token count, or a share: the system prompt whole and that share of the rest."""
    try:
        if spec.endswith("%"):
            pct = float(spec[:-1])
            if not 0 <= pct <= 100:
                raise ValueError
            return share_budget(messages, pct / 100, counter)
        value = int(spec)
        if value < 0:
            raise ValueError
        return value
    except ValueError:
        raise CliError(
            f"--budget must be a token count (4000) or a percentage (25%), got {spec!r}"
        ) from None


def _parse_options(pairs: Sequence[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--option takes KEY=VALUE, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def _render_text(messages: Sequence[Message]) -> str:
    lines: list[str] = []
    for m in messages:
        head = m.role + (f" ({m.name})" if m.name else "")
        if m.tool_call_id:
            head += f" -> {m.tool_call_id}"
        lines.append(f"[{head}]")
        if m.text:
            lines.append(m.text)
        lines.extend(f"  call {c.id}: {c.name}({c.arguments})" for c in m.tool_calls)
        lines.append("")
    return "\n".join(lines)


def _table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip(), file=out)
        if n == 0:
            print("  ".join("-" * w for w in widths), file=out)


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
    convs, jsonl = load_file(args.file)
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
    _table(rows, sys.stderr)


def _cmd_compress(args: argparse.Namespace) -> int:
    results, jsonl, counter = _compress_all(args, store=args.store)
    for conv, result in results:
        _write(conv, result.messages, jsonl, args.format)
    _summary(results, counter, args.strategy)
    if args.trace:
        for conv, r in results:
            print(f"\ntrace of {conv.label}:", file=sys.stderr)
            _trace(r, sys.stderr)
            for w in r.warnings:
                print(f"  note: {w}", file=sys.stderr)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    results, _, counter = _compress_all(args)
    text = report_page([(conv.label, conv.messages, r) for conv, r in results])
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    _summary(results, counter, args.strategy)
    print(f"report: {args.output}", file=sys.stderr)
    return 0


def _cmd_expand(args: argparse.Namespace) -> int:
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
            hint = "" if args.session else " (written by a session? add --session <its id>)"
            print(
                f"ctxfold: {conv.label}: the store lacks {', '.join(back.missing)}{hint}; "
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
        _write(conv, back.messages, jsonl, "openai")
    return code


def _write(conv: Conversation, messages: Sequence[Message], jsonl: bool, fmt: str) -> None:
    """One conversation's messages to stdout, in the shape it was read in."""
    if fmt == "text":
        _emit(_render_text(messages) + "\n", escape=True)
        return
    payload: Any = to_openai(messages)
    if conv.record is not None:
        payload = {**conv.record, "messages": payload}
    indent = None if jsonl else 2
    text = json.dumps(payload, ensure_ascii=False, indent=indent)
    if not _encodable(text):  # a lone surrogate (valid JSON escapes, no UTF-8 form)
        text = json.dumps(payload, ensure_ascii=True, indent=indent)
    _emit(text + "\n")


def _encodable(text: str) -> bool:
    try:
        text.encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _emit(text: str, *, escape: bool = False) -> None:
    """Write to stdout; what the output cannot hold is escaped (``escape``), and a
    stdout that is closed or fails is an :class:`OutputError`."""
    out = sys.stdout
    if out is None:
        raise OutputError("there is no standard output to write to")
    if escape and not _encodable(text):
        encoding = getattr(out, "encoding", None) or "utf-8"
        text = text.encode(encoding, "backslashreplace").decode(encoding)
    try:
        out.write(text)
    except ValueError as exc:  # a closed stream
        raise OutputError(f"cannot write the output: {exc}") from None


class OutputError(CliError):
    """The output cannot be written: exit code 3."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=3)


def _cmd_render(args: argparse.Namespace) -> int:
    convs, jsonl = load_file(args.file)
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
        _write(conv, messages, jsonl, args.format)
    print(f"renderer: {renderer.name()}, counter: {counter.name}", file=sys.stderr)
    _table(rows, sys.stderr)
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    convs, _ = load_file(args.file)
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
    _table(rows, sys.stdout)
    return 0


def _version() -> str:
    from . import __version__  # the package is imported by now: no cycle

    return __version__


def _recall_options(parser: argparse.ArgumentParser) -> None:
    q = parser.add_mutually_exclusive_group()
    q.add_argument(
        "--query",
        help="recall the older passages this text bears on (default: the last message, "
        "when it is the user's and asks something)",
    )
    q.add_argument("--no-recall", action="store_true", help="recall nothing for a query")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``ctxfold`` command."""
    parser = argparse.ArgumentParser(
        prog="ctxfold",
        description="Compress LLM conversations to a token budget.",
        epilog=(
            "exit codes: 0 success; 1 a conversation cannot fit its budget (expand: "
            "originals missing or altered); 2 bad input or usage; 3 the output cannot be "
            "written (full disk, closed or failing stdout); a reader that stops early "
            "(| head) is no failure"
        ),
    )
    parser.add_argument("--version", action="version", version=f"ctxfold {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compress", help="compress conversations from a JSON or JSONL file")
    c.add_argument(
        "file",
        help="OpenAI-format JSON (a list of messages or {'messages': [...]}),"
        " JSONL (one conversation per line), or - for stdin",
    )
    c.add_argument(
        "--budget",
        required=True,
        help="tokens (4000), or a share (25%%): the system prompt whole plus that share of "
        "the other tokens of each conversation",
    )
    c.add_argument("--strategy", default="auto", help="strategy name (default: auto)")
    c.add_argument(
        "--counter",
        default="o200k_base",
        help="o200k_base, cl100k_base, a model name such as gpt-4o, or approx",
    )
    c.add_argument(
        "--format",
        choices=("openai", "text"),
        default="openai",
        help="output: OpenAI JSON (default) or a readable transcript",
    )
    c.add_argument("--trace", action="store_true", help="print every decision to stderr")
    c.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a strategy option, e.g. --option keep_first=1 (repeatable)",
    )
    c.add_argument(
        "--store",
        help="keep the originals here and make the output reversible: "
        "sqlite:///originals.db (or a .db path) or redis://host:6379/0",
    )
    _recall_options(c)
    c.set_defaults(run=_cmd_compress)
    p = sub.add_parser(
        "report",
        help="compress, and write one self-contained HTML page showing the conversation "
        "before and after, each decision, the folded originals and a chart",
    )
    p.add_argument("file", help="a conversation file, as for compress")
    p.add_argument("--budget", required=True, help="as for compress")
    p.add_argument("-o", "--output", default="report.html", help="default: report.html")
    p.add_argument("--strategy", default="auto", help="strategy name (default: auto)")
    p.add_argument("--counter", default="o200k_base")
    p.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="as for compress"
    )
    _recall_options(p)
    p.set_defaults(run=_cmd_report)
    e = sub.add_parser(
        "expand", help="give back what a reversible compression folded (see compress --store)"
    )
    e.add_argument(
        "target",
        help="a compressed JSON or JSONL file (or - for stdin): prints the original "
        "conversation; or an id from '[ctxfold round <id>...]' or '[expand <id>]': "
        "prints its original text",
    )
    e.add_argument("--store", required=True, help="the store given to compress --store")
    e.add_argument(
        "--session",
        metavar="ID",
        help="the id of the ctxfold.Session that wrote the target (it keeps its records "
        "in a namespace of its own in the store)",
    )
    e.set_defaults(run=_cmd_expand)
    r = sub.add_parser(
        "render",
        help="read an agent run into turns and render them afresh (as at its next turn)",
    )
    r.add_argument("file", help="a conversation file, as for compress")
    r.add_argument(
        "--renderer",
        default="single_user_coalesced",
        help="single_user_coalesced (default), full_history, pressure, or a registered name",
    )
    r.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a renderer option, e.g. --option max_tool_calls=10 or --option budget=4000",
    )
    r.add_argument("--counter", default="o200k_base")
    r.add_argument("--format", choices=("openai", "text"), default="openai")
    r.set_defaults(run=_cmd_render)
    s = sub.add_parser("stats", help="report token counts of conversations in a file")
    s.add_argument("file")
    s.add_argument("--counter", default="o200k_base")
    s.set_defaults(run=_cmd_stats)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (see the module's docstring)."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
        if sys.stdout is not None:
            sys.stdout.flush()  # a full disk shows here, not at exit
    except CliError as exc:
        return _fail(str(exc), exc.code)
    except CtxfoldError as exc:
        return _fail(str(exc), 2)
    except BrokenPipeError:  # the reader took what it wanted (`| head`): not a failure
        _quiet_stdout()
        return 0
    except OSError as exc:
        _quiet_stdout()
        return _fail(f"cannot write the output: {exc.strerror or exc}", 3)
    except Exception as exc:  # a bug: one line, not a traceback
        if os.environ.get("CTXFOLD_DEBUG"):
            raise
        return _fail(f"unexpected {type(exc).__name__}: {exc} (please report it)", 3)
    return code


def _fail(message: str, code: int) -> int:
    with contextlib.suppress(OSError, ValueError, AttributeError):  # then the code says it
        print(f"ctxfold: {message}", file=sys.stderr)
    return code


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush does not fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
