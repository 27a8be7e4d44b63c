"""The ``ctxfold`` command: compress a conversation file, expand a compressed one back,
write an HTML report of a compression, render an agent run's turns afresh, or report
token counts, or migrate a session an older ctxfold stored.

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
import os
import sys
from collections.abc import Sequence

from .._registry import closest
from ..exceptions import CtxfoldError
from ..storage.spec import scrub
from .commands import compress, expand_cmd, migrate_cmd, render, report, stats
from .files import CliError, InputFormat, load_file

__all__ = ["CliError", "build_parser", "load_file", "main"]


def _version() -> str:
    from .. import __version__  # the package is imported by now: no cycle

    return __version__


class _Parser(argparse.ArgumentParser):
    """An argument parser that names a misspelt flag and the closest one
    (``--budgt``: did you mean ``--budget``) before it reports what is missing: argparse
    itself reports a required flag first, so a typo read as "--budget is required"."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._check_flags(sys.argv[1:] if args is None else list(args))
        return super().parse_known_args(args, namespace)

    def _check_flags(self, args: list[str]) -> None:
        """A usage error (exit 2) for the first ``--flag`` this parser does not know,
        nor abbreviates; a parser with subcommands reads only up to its subcommand."""
        known = [f for f in self._option_string_actions if f.startswith("--")]
        commands = self._subparsers is not None
        for arg in args:
            if arg == "--" or (commands and not arg.startswith("-")):
                return
            flag = arg.split("=", 1)[0]
            if not flag.startswith("--") or flag in known:
                continue
            if self.allow_abbrev and any(f.startswith(flag) for f in known):
                continue  # an abbreviation: argparse reads it (or says it is ambiguous)
            self.error(f"unrecognized argument {flag}{closest(flag, known)}")


def _recall_options(parser: argparse.ArgumentParser) -> None:
    q = parser.add_mutually_exclusive_group()
    q.add_argument(
        "--query",
        help="recall the older passages this text bears on (default: the last message, "
        "when it is the user's and asks something)",
    )
    q.add_argument("--no-recall", action="store_true", help="recall nothing for a query")


def _formats(parser: argparse.ArgumentParser, *, output: bool = True) -> None:
    parser.add_argument(
        "--input-format",
        choices=[f.value for f in InputFormat],
        default="auto",
        help="auto (default: OpenAI or Anthropic messages, told by their shape), openai, "
        "anthropic (a request {'system': ..., 'messages': [...]} or its list), or "
        "claude-code (a coding assistant's session log, JSONL)",
    )
    if output:
        parser.add_argument(
            "--format",
            choices=("json", "openai", "anthropic", "text"),
            default="json",
            help="output: JSON as given (default), OpenAI's or Anthropic's messages, or a "
            "readable transcript",
        )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``ctxfold`` command."""
    parser = _Parser(
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
        help="JSON (a list of OpenAI or Anthropic messages, or {'messages': [...]}), JSONL "
        "(one conversation per line), a coding assistant's session log, or - for stdin",
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
    _formats(c)
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
    c.set_defaults(run=compress)
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
    _formats(p, output=False)
    _recall_options(p)
    p.set_defaults(run=report)
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
        help="read only what the ctxfold.Session with this id wrote (without it, every "
        "session's part of the store is searched)",
    )
    e.set_defaults(run=expand_cmd)
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
    _formats(r)
    r.set_defaults(run=render)
    m = sub.add_parser(
        "migrate",
        help="copy a session stored by an older ctxfold into the current format, once "
        "(run it only on a store whose records you trust)",
    )
    m.add_argument("session", metavar="SESSION_ID", help="the id of the ctxfold.Session")
    m.add_argument("--store", required=True, help="the store the session lives in")
    m.set_defaults(run=migrate_cmd)
    s = sub.add_parser("stats", help="report token counts of conversations in a file")
    s.add_argument("file")
    s.add_argument("--counter", default="o200k_base")
    _formats(s, output=False)
    s.set_defaults(run=stats)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (see the module's docstring)."""
    args = build_parser().parse_args(argv)
    store = getattr(args, "store", None) or ""  # its credentials never shown
    try:
        code: int = args.run(args)
        if sys.stdout is not None:
            sys.stdout.flush()  # a full disk shows here, not at exit
    except CliError as exc:
        return _fail(str(exc), exc.code, store)
    except CtxfoldError as exc:
        return _fail(str(exc), 2, store)
    except BrokenPipeError:  # the reader took what it wanted (`| head`): not a failure
        _quiet_stdout()
        return 0
    except OSError as exc:
        _quiet_stdout()
        return _fail(f"cannot write the output: {exc.strerror or exc}", 3, store)
    except Exception as exc:  # a bug: one line, not a traceback
        if os.environ.get("CTXFOLD_DEBUG"):
            raise
        return _fail(f"unexpected {type(exc).__name__}: {exc} (please report it)", 3, store)
    return code


def _fail(message: str, code: int, store: str) -> int:
    """Print ``message`` (the ``--store`` spec's credentials masked) and return ``code``."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # then the code says it
        print(f"ctxfold: {scrub(message, store)}", file=sys.stderr)
    return code


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush does not fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
