"""The single-user-coalesced renderer: a system message and one user message holding
the task, tools, data, expected output, the newest calls with their results, the newest
printed lines, the last turn's error and the turns left."""

from __future__ import annotations

import re
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..exceptions import BudgetError
from ..messages import Message
from ..text.adapters import ERROR_LINE
from ..text.shortening import shorten
from ..tokens import TokenCounter, get_counter
from .base import (
    _COMMON,
    DEFAULT_SYSTEM,
    BaseRenderer,
    RenderStats,
    _count,
    _optional_positive,
    _paragraphs,
    _positive,
    _texts,
    _tools,
    tool_line,
)
from .turns import Turn

__all__ = ["SingleUserCoalesced", "value_sample"]

# ------------------------------------------------------------- single user, coalesced


class _Repr(reprlib.Repr):
    """reprlib with no memory addresses (``<Foo object>``), so a rendering is the same
    in every process, and a ``__repr__`` that raises said, not propagated."""

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            text = _ADDRESS.sub("", repr(x))
        except Exception as exc:
            return f"<{type(x).__name__}: repr failed with {type(exc).__name__}>"
        if len(text) > self.maxother:
            i = max(0, (self.maxother - 3) // 2)
            j = max(0, self.maxother - 3 - i)
            text = text[:i] + "..." + text[len(text) - j :]
        return text


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_REPR = _Repr()
_REPR.maxlevel = 2
_REPR.maxstring = 80
_REPR.maxother = 80
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdeque = 5
_REPR.maxdict = 5


def value_sample(value: Any, max_chars: int) -> str:
    """A bounded description of a value: its type, its size, and a sample of it."""
    kind = type(value).__name__
    shape = getattr(value, "shape", None)
    size = ""
    if isinstance(shape, tuple):
        size = f" shape={shape}"
    elif hasattr(value, "__len__") and not isinstance(value, str):
        try:
            size = f" len={len(value)}"
        except TypeError:
            size = ""
    elif isinstance(value, str) and len(value) > max_chars:
        size = f" len={len(value)}"
    try:
        sample = _REPR.repr(value)
    except Exception as exc:  # a repr that raises must not break the rendering
        sample = f"<repr failed: {type(exc).__name__}>"
    if len(sample) > max_chars:
        sample = sample[: max(max_chars - 3, 0)] + "..."
    return f"{kind}{size} = {sample}"


def _ints_said(numbers: Sequence[int]) -> str:
    if len(numbers) == 1:
        return str(numbers[0])
    return ", ".join(str(n) for n in numbers[:-1]) + f" and {numbers[-1]}"


@dataclass
class _Entry:
    """A tool call or a printed line, with the turn it came from (oldest go first)."""

    turn: int
    text: str


class SingleUserCoalesced(BaseRenderer):
    """A system message and one user message that holds, in order: the mission, the
    tools and the data in memory (each value's type, size and a bounded sample), the
    expected output, the newest tool calls with their results, the newest printed
    lines, an error block when the last turn failed, and the turns left.

    The results of the calls shown stay visible, shortened by the engine's adapters to
    ``max_result_tokens`` with the identifiers of what was cut listed (an agent shown
    only ``name(args)`` guesses what came back). Errors the agent recovered from are
    collapsed to one line. With ``budget``, the oldest calls and lines are dropped until
    the messages fit; :class:`BudgetError` if the fixed parts alone do not.

    Options (defaults in ``DEFAULTS``): ``system``, ``mission``, ``tools``,
    ``expected_output``, ``max_turns`` (for "Turns left: N"), ``max_tool_calls`` (20),
    ``max_output_lines`` (15), ``max_result_tokens``, ``max_argument_tokens``,
    ``max_error_tokens``, ``max_line_chars``, ``max_memory_items``,
    ``max_value_chars``, ``budget``, ``counter``.
    """

    label = "single_user_coalesced"
    DEFAULTS = MappingProxyType(
        {
            "system": DEFAULT_SYSTEM,
            "mission": "",
            "tools": (),
            "expected_output": "",
            "max_turns": None,
            "max_tool_calls": 20,
            "max_output_lines": 15,
            "max_result_tokens": 400,
            "max_argument_tokens": 150,
            "max_error_tokens": 600,
            "max_line_chars": 400,
            "max_memory_items": 30,
            "max_value_chars": 200,
            "budget": None,
            "counter": "o200k_base",
        }
    )
    CHECKS = MappingProxyType(
        {
            **_COMMON,
            "tools": _tools,
            "expected_output": _texts,
            "max_turns": _optional_positive,
            "max_tool_calls": _count,
            "max_output_lines": _count,
            "max_result_tokens": _positive,
            "max_argument_tokens": _positive,
            "max_error_tokens": _positive,
            "max_line_chars": _positive,
            "max_memory_items": _count,
            "max_value_chars": _positive,
            "budget": _optional_positive,
        }
    )

    def _render(
        self, turns: tuple[Turn, ...], memory: Mapping[str, Any], opts: dict[str, Any]
    ) -> tuple[list[Message], RenderStats]:
        counter = get_counter(opts["counter"])
        head = self._head(memory, opts)
        calls, shortened = self._calls(turns, opts, counter)
        lines = self._lines(turns, opts)
        last_failed = bool(turns) and turns[-1].failed
        recovered = [t for t, turn in enumerate(turns[:-1], 1) if turn.failed]
        tail: list[str] = []
        if recovered:
            tail.append(
                f"Earlier failed turn{'s' * (len(recovered) > 1)} "
                f"{_ints_said(recovered)}, since recovered from (details not repeated)."
            )
        if last_failed:
            tail.append(self._error_block(len(turns), turns[-1], opts, counter))
        if opts["max_turns"] is not None:
            left = opts["max_turns"] - len(turns)
            tail.append(
                "This is your final turn: give your final answer now."
                if left <= 1
                else f"Turns left: {left}"
            )
        system = [Message("system", "\n\n".join(_paragraphs(opts["system"])))]
        if not system[0].text:
            system = []
        n_calls = min(len(calls), opts["max_tool_calls"])
        n_lines = min(len(lines), opts["max_output_lines"])

        def build(nc: int, nl: int) -> list[Message]:
            body = [*head]
            if nc or calls:
                body.append(self._calls_section(calls, nc))
            if nl or lines:
                body.append(self._lines_section(lines, nl))
            body += tail
            text = "\n\n".join(body) or "This is the first turn."  # never an empty message
            return [*system, Message("user", text)]

        messages = build(n_calls, n_lines)
        tokens = counter.count_messages(messages)
        budget = opts["budget"]
        while budget is not None and tokens > budget:
            if not n_calls and not n_lines:
                raise BudgetError(
                    f"{self.label}: the task, tools, data and error block take {tokens} "
                    f"tokens, over the budget of {budget}; raise the budget or shorten "
                    "them (max_value_chars, max_memory_items, max_error_tokens)",
                    required=tokens,
                    budget=budget,
                )
            oldest_call = calls[len(calls) - n_calls].turn if n_calls else None
            oldest_line = lines[len(lines) - n_lines].turn if n_lines else None
            if oldest_line is None or (oldest_call is not None and oldest_call <= oldest_line):
                n_calls -= 1
            else:
                n_lines -= 1
            messages = build(n_calls, n_lines)
            tokens = counter.count_messages(messages)
        shown = calls[len(calls) - n_calls :]
        return messages, RenderStats(
            self.label,
            len(turns),
            len(messages),
            tokens,
            len(calls),
            n_calls,
            len(lines),
            n_lines,
            sum(shortened[len(calls) - n_calls + k] for k in range(len(shown))),
            len(recovered),
        )

    # -------------------------------------------------------------- the sections

    @staticmethod
    def _head(memory: Mapping[str, Any], opts: dict[str, Any]) -> list[str]:
        out: list[str] = []
        mission = "\n\n".join(p for p in _paragraphs(opts["mission"]) if p)
        if mission:
            out.append(f"## Task\n{mission}")
        if opts["tools"]:
            out.append("## Tools\n" + "\n".join(f"- {tool_line(t)}" for t in opts["tools"]))
        if memory:
            items = list(memory.items())
            shown = items[: opts["max_memory_items"]]
            rows = [f"- {k}: {value_sample(v, opts['max_value_chars'])}" for k, v in shown]
            if len(items) > len(shown):
                rows.append(f"- ... and {len(items) - len(shown)} more")
            out.append("## Data\n" + "\n".join(rows))
        expected = "\n\n".join(_paragraphs(opts["expected_output"]))
        if expected:
            out.append(f"## Expected output\n{expected}")
        return out

    @staticmethod
    def _calls(
        turns: tuple[Turn, ...], opts: dict[str, Any], counter: TokenCounter
    ) -> tuple[list[_Entry], list[bool]]:
        """One entry per call of every turn, oldest first, and whether its text was
        cut. Only the newest ``max_tool_calls`` can be shown, so only they are
        rendered; the others stay empty (they are counted, never shown)."""
        flat = [(t, c) for t, turn in enumerate(turns, 1) for c in turn.tool_calls]
        keep_from = max(len(flat) - opts["max_tool_calls"], 0)
        last = len(turns)
        entries: list[_Entry] = []
        shortened: list[bool] = []
        for k, (t, c) in enumerate(flat):
            if k < keep_from:
                entries.append(_Entry(t, ""))
                shortened.append(False)
                continue
            args = shorten(c.arguments, opts["max_argument_tokens"], counter)
            head = f"### turn {t}: {c.name}({args})"
            if c.error is not None:
                if t == last and c.error == turns[-1].error:  # said once, in the error block
                    body, cut = "error: in the error block below", False
                elif t == last:
                    err = shorten(c.error, opts["max_error_tokens"], counter)
                    body, cut = f"error:\n{err}", err != c.error
                else:
                    body, cut = f"error (recovered from): {_gist(c.error)}", True
            elif c.result is None:
                body, cut = "(no result)", False
            else:
                res = shorten(c.result, opts["max_result_tokens"], counter)
                body, cut = res, res != c.result
            entries.append(_Entry(t, f"{head}\n{body}"))
            shortened.append(cut)
        return entries, shortened

    @staticmethod
    def _lines(turns: tuple[Turn, ...], opts: dict[str, Any]) -> list[_Entry]:
        width = opts["max_line_chars"]
        flat = [(t, ln) for t, turn in enumerate(turns, 1) for ln in turn.output]
        keep_from = max(len(flat) - opts["max_output_lines"], 0)
        return [
            _Entry(t, "" if k < keep_from else _clip(ln, width)) for k, (t, ln) in enumerate(flat)
        ]

    @staticmethod
    def _calls_section(calls: list[_Entry], n: int) -> str:
        shown = calls[len(calls) - n :] if n else []
        if len(shown) < len(calls):
            title = f"## Recent tool calls (the last {n} of {len(calls)}, oldest first)"
        else:
            title = f"## Tool calls ({len(calls)}, oldest first)"
        return "\n\n".join([title, *(e.text for e in shown)]) if shown else title + "\n(none)"

    @staticmethod
    def _lines_section(lines: list[_Entry], n: int) -> str:
        shown = lines[len(lines) - n :] if n else []
        if len(shown) < len(lines):
            title = f"## Printed output (the last {n} of {len(lines)} lines)"
        else:
            title = "## Printed output"
        return "\n".join([title, *(e.text for e in shown)]) if shown else title + "\n(none)"

    @staticmethod
    def _error_block(number: int, turn: Turn, opts: dict[str, Any], counter: TokenCounter) -> str:
        limit = opts["max_error_tokens"]
        parts = [f"## Error in the last turn (turn {number})"]
        if turn.program.strip():
            parts.append(f"Program:\n```\n{shorten(turn.program, limit, counter)}\n```")
        parts.append(shorten(turn.error or "", limit, counter))
        return "\n".join(parts)


_EXCEPTION = re.compile(r"^[\w.]*(?:Error|Exception|Exit|Interrupt)\b")


def _gist(error: str) -> str:
    """An error in one line: its last line that names an exception (a traceback's
    last line), else its last line that speaks of an error, else its first line."""
    lines = [ln.strip() for ln in error.splitlines() if ln.strip()]
    named = [ln for ln in lines if _EXCEPTION.match(ln)] or [
        ln for ln in lines if ERROR_LINE.search(ln)
    ]
    return _clip(named[-1] if named else (lines or [""])[0], 200)


def _clip(line: str, width: int) -> str:
    if len(line) <= width:
        return line
    return f"{line[:width]}... [{len(line) - width} more chars]"
