"""Turn rendering: an agent's turns (and memory) become the messages of its next call.

Rendering happens at the start of every turn, never at storage time: the turns are the
record, the messages a view of them. A renderer is a pure function of
``(turns, memory, options)``: the same input gives the same messages, nothing is
written anywhere, the input is not touched.

- :class:`FullHistory`: the turns as the ordinary chat history they came from.
- :class:`SingleUserCoalesced`: a system message and one user message holding the task,
  the tools and data, the expected output, the newest tool calls with their results,
  the newest printed lines, the last turn's error, and the turns left.
- :class:`PressureTriggered`: the full history while it fits, a coalesced rendering (or
  any compressor) once a token or turn trigger fires.

A renderer option is normalized like a strategy option (:func:`normalize_renderer`);
a sub-agent's renderer inherits its parent's options (:meth:`BaseRenderer.child`).
"""

from __future__ import annotations

import inspect
import re
import reprlib
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Protocol, runtime_checkable

from ._adapters import _ERROR
from ._compressor import Compressor
from ._messages import Message, ToolCall
from ._registry import normalize, normalize_option
from ._summarize import shorten
from ._tokens import TokenCounter, get_counter
from ._turns import Turn, as_turns
from .exceptions import BudgetError, ConfigurationError, CtxfoldError

__all__ = [
    "DEFAULT_SYSTEM",
    "BaseRenderer",
    "FullHistory",
    "PressureTriggered",
    "RenderStats",
    "Renderer",
    "SingleUserCoalesced",
    "normalize_renderer",
    "register_renderer",
    "render",
    "renderers",
]

#: The system message :class:`SingleUserCoalesced` writes when none is given.
DEFAULT_SYSTEM = (
    "You are an agent working in turns. Each turn you get the task, the tools and data "
    "you have, and what your earlier turns did; decide the next step."
)


@dataclass(frozen=True)
class RenderStats:
    """What a rendering showed and left out.

    ``tool_calls_*`` and ``output_lines_*`` count the calls and printed lines of all
    turns (``total``) and those in the messages (``shown``); ``results_shortened`` the
    results cut to their allowance; ``errors_recovered`` the failed turns before the
    last, collapsed to one line. ``trigger`` is what made a :class:`PressureTriggered`
    switch (``"tokens"``, ``"turns"``), ``None`` while the full history fits.
    """

    renderer: str
    turns: int
    messages: int
    tokens: int
    tool_calls_total: int = 0
    tool_calls_shown: int = 0
    output_lines_total: int = 0
    output_lines_shown: int = 0
    results_shortened: int = 0
    errors_recovered: int = 0
    trigger: str | None = None

    @property
    def tool_calls_dropped(self) -> int:
        """Calls of older turns the rendering left out."""
        return self.tool_calls_total - self.tool_calls_shown

    @property
    def output_lines_dropped(self) -> int:
        """Printed lines of older turns the rendering left out."""
        return self.output_lines_total - self.output_lines_shown


@runtime_checkable
class Renderer(Protocol):
    """Turns an agent's turns into the messages of its next model call. This is a
    Protocol: any object with these two methods works.

    ``to_messages`` must be pure: the same turns, memory and options give the same
    messages, and nothing (the input included) is changed.
    """

    def name(self) -> str:
        """A short name for traces and stats."""
        ...

    def to_messages(
        self,
        turns: Sequence[Turn],
        memory: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> tuple[list[Message], RenderStats]:
        """The messages for the next call, and what they show."""
        ...


# ------------------------------------------------------------------ option checks


def _texts(value: Any) -> str | tuple[str, ...]:
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TypeError("a string or a sequence of strings")


def _optional_texts(value: Any) -> str | tuple[str, ...] | None:
    return None if value is None else _texts(value)


def _count(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise TypeError("a whole number, 0 or more")


def _optional_count(value: Any) -> int | None:
    return None if value is None else _count(value)


def _positive(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    raise TypeError("a whole number above 0")


def _optional_positive(value: Any) -> int | None:
    return None if value is None else _positive(value)


def _counter(value: Any) -> Any:
    get_counter(value)  # raises ConfigurationError for what it cannot use
    return value


def _tools(value: Any) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise TypeError("a sequence of tools (functions, tool dicts, strings)")
    tools = tuple(value)
    for t in tools:
        tool_line(t)  # raises for a tool it cannot describe
    return tools


Check = Callable[[Any], Any]
_COMMON: dict[str, Check] = {
    "system": _optional_texts,
    "mission": _texts,
    "counter": _counter,
}


class BaseRenderer:
    """Base class of the built-in renderers: options checked when given, merged over the
    class's ``DEFAULTS`` (and the call's ``options`` over those), stats counted.

    Subclasses set ``label``, ``DEFAULTS`` and ``CHECKS`` (option name -> check) and
    implement :meth:`_render`.
    """

    label: ClassVar[str] = "renderer"
    DEFAULTS: ClassVar[Mapping[str, Any]] = MappingProxyType({})
    CHECKS: ClassVar[Mapping[str, Check]] = MappingProxyType({})

    def __init__(self, **options: Any) -> None:
        self._options = MappingProxyType(self._checked({**self.DEFAULTS, **options}))

    @property
    def options(self) -> Mapping[str, Any]:
        """The effective options (defaults with the given ones over them), read-only."""
        return self._options

    @classmethod
    def accepts(cls, key: str) -> bool:
        """Whether ``key`` is one of this renderer's options."""
        return key in cls.CHECKS

    def name(self) -> str:
        """The renderer's registered name."""
        return self.label

    def child(self, **overrides: Any) -> BaseRenderer:
        """The renderer for a sub-agent: these options, with ``overrides`` over them."""
        return type(self)(**{**self._options, **overrides})

    def _checked(self, options: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in options.items():
            check = self.CHECKS.get(key)
            if check is None:
                known = ", ".join(sorted(self.CHECKS))
                raise ConfigurationError(
                    f"{self.label}: unknown option {key!r}; its options are: {known}"
                )
            try:
                out[key] = check(value)
            except TypeError as exc:
                raise ConfigurationError(
                    f"{self.label}: option {key}={value!r} is not valid; use {exc}"
                ) from None
        return out

    def to_messages(
        self,
        turns: Sequence[Turn],
        memory: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> tuple[list[Message], RenderStats]:
        """Render ``turns`` (and ``memory``) with this renderer's options, ``options``
        merged over them for this call.

        Raises:
            InvalidTurnError: a malformed turn (its index is named).
            ConfigurationError: an unknown or invalid option.
            BudgetError: a ``budget`` the fixed parts alone exceed.
        """
        opts = {**self._options, **self._checked(options or {})}
        if memory is None:
            memory = {}
        elif not isinstance(memory, Mapping):
            raise ConfigurationError(
                f"memory must be a mapping of names to values, got {type(memory).__name__}"
            )
        return self._render(as_turns(turns), memory, opts)

    def _render(
        self, turns: tuple[Turn, ...], memory: Mapping[str, Any], opts: dict[str, Any]
    ) -> tuple[list[Message], RenderStats]:
        raise NotImplementedError

    def __repr__(self) -> str:
        changed = {k: v for k, v in self._options.items() if self.DEFAULTS.get(k) != v}
        args = ", ".join(f"{k}={v!r}" for k, v in changed.items())
        return f"{type(self).__name__}({args})"


def _paragraphs(value: str | tuple[str, ...] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else value


# ------------------------------------------------------------------ full history


class FullHistory(BaseRenderer):
    """The turns as an ordinary chat history: the system and mission messages, then per
    turn the assistant message (program and calls), a tool message per answered call,
    and one user message with the printed lines and the error, if any.

    ``memory`` is not rendered (the turns' output shows what the agent printed of it).
    Of a history read by :func:`turns_from_messages`, this gives the messages back.
    """

    label = "full_history"
    DEFAULTS = MappingProxyType({"system": None, "mission": "", "counter": "o200k_base"})
    CHECKS = MappingProxyType(dict(_COMMON))

    def _render(
        self, turns: tuple[Turn, ...], memory: Mapping[str, Any], opts: dict[str, Any]
    ) -> tuple[list[Message], RenderStats]:
        out = [Message("system", s) for s in _paragraphs(opts["system"])]
        out += [Message("user", s) for s in _paragraphs(opts["mission"]) if s]
        calls = lines = 0
        for t, turn in enumerate(turns, 1):
            ids = [c.id or f"call_{t}_{k}" for k, c in enumerate(turn.tool_calls, 1)]
            out.append(
                Message(
                    "assistant",
                    turn.program,
                    tool_calls=tuple(
                        ToolCall(i, c.name, c.arguments)
                        for i, c in zip(ids, turn.tool_calls, strict=True)
                    ),
                )
            )
            for i, c in zip(ids, turn.tool_calls, strict=True):
                if c.result is not None:
                    out.append(Message("tool", c.result, tool_call_id=i))
                elif c.error is not None:
                    out.append(
                        Message("tool", c.error, tool_call_id=i, metadata={"is_error": True})
                    )
            said = "\n".join(turn.output) if turn.output else ""
            if turn.error is not None:
                said = f"{said}\n\nError:\n{turn.error}" if said else f"Error:\n{turn.error}"
            if turn.output or turn.error is not None:
                out.append(Message("user", said))
            calls += len(turn.tool_calls)
            lines += len(turn.output)
        counter = get_counter(opts["counter"])
        return out, RenderStats(
            self.label,
            len(turns),
            len(out),
            counter.count_messages(out),
            calls,
            calls,
            lines,
            lines,
        )


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


def tool_line(tool: Any) -> str:
    """One line describing a tool: a string as it is; an OpenAI or Anthropic tool dict,
    a function, a LangChain or LlamaIndex tool, or any object with ``name`` and
    ``description`` as ``name(parameters): first line of the description``."""
    if isinstance(tool, str):
        return tool.strip()
    if isinstance(tool, Mapping):
        spec = tool.get("function", tool)
        if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
            raise TypeError("tool dicts with a 'name' (OpenAI or Anthropic form)")
        schema = spec.get("parameters", spec.get("input_schema")) or {}
        props = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
        params = ", ".join(str(p) for p in props) if isinstance(props, Mapping) else ""
        return _described(f"{spec['name']}({params})", spec.get("description"))
    meta = getattr(tool, "metadata", None)  # a LlamaIndex tool keeps them there
    for holder in (tool, meta):
        name = getattr(holder, "name", None)
        if isinstance(name, str) and not inspect.isroutine(tool) and not isinstance(tool, type):
            head = name
            args = getattr(tool, "args", None)  # a LangChain tool's parameters
            if isinstance(args, Mapping):
                head = f"{name}({', '.join(str(a) for a in args)})"
            return _described(head, getattr(holder, "description", None))
    if callable(tool):
        fname = getattr(tool, "__name__", type(tool).__name__)
        try:
            sig = str(inspect.signature(tool, eval_str=True))
        except (TypeError, ValueError, NameError, SyntaxError):
            try:  # annotations that do not resolve here: as they are written
                sig = str(inspect.signature(tool)).replace("'", "")
            except (TypeError, ValueError):
                sig = "(...)"
        return _described(f"{fname}{sig}", inspect.getdoc(tool))
    raise TypeError("tools as strings, tool dicts, functions, or objects with a name")


def _described(head: str, description: Any) -> str:
    if not isinstance(description, str) or not description.strip():
        return head
    lines = [ln.strip() for ln in description.strip().splitlines() if ln.strip()]
    if lines[0].startswith(f"{head.split('(')[0]}("):  # a description that opens with
        head, lines = lines[0], lines[1:]  # the signature (LlamaIndex's FunctionTool)
    return f"{head}: {lines[0]}" if lines else head


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
        ln for ln in lines if _ERROR.search(ln)
    ]
    return _clip(named[-1] if named else (lines or [""])[0], 200)


def _clip(line: str, width: int) -> str:
    if len(line) <= width:
        return line
    return f"{line[:width]}... [{len(line) - width} more chars]"


# ------------------------------------------------------------------ pressure


def _renderer_or_compressor(value: Any) -> Renderer | Compressor:
    if isinstance(value, (Renderer, Compressor)) and not isinstance(value, type):
        return value
    try:
        found = normalize_renderer(value)
    except ConfigurationError as not_renderer:
        try:
            compressor = normalize(value)
        except ConfigurationError:
            raise TypeError(f"a renderer or a compressor ({not_renderer})") from None
        if compressor is None:
            raise TypeError("a renderer or a compressor, not None") from None
        return compressor
    if found is None:
        raise TypeError("a renderer or a compressor (a name, a class or an instance)")
    return found


def _renderer(value: Any) -> Renderer:
    found = normalize_renderer(value)
    if found is None:
        raise TypeError("a renderer (a name, a class or an instance)")
    return found


class PressureTriggered(BaseRenderer):
    """The full history while it fits; once a trigger fires, the ``fallback``.

    ``trigger_tokens``: switch when the full rendering takes more tokens than this.
    ``trigger_turns``: switch when there are more turns than this. At least one is
    needed. ``fallback`` is a renderer (default :class:`SingleUserCoalesced`) or a
    compressor (``"auto"``, any strategy) that compresses the full rendering to
    ``budget`` (default ``trigger_tokens``). ``full`` is the renderer used while no
    trigger fires (default :class:`FullHistory`). Other options (``mission``,
    ``tools``, ``max_turns``, ...) go to whichever renderer takes them.

    A compressor fallback is as pure as the compressor: ``auto`` writes the text it
    folds to its verbatim store unless ``reversible=False``.
    """

    label = "pressure"
    DEFAULTS = MappingProxyType(
        {
            "full": "full_history",
            "fallback": "single_user_coalesced",
            "trigger_tokens": None,
            "trigger_turns": None,
            "budget": None,
            "counter": "o200k_base",
        }
    )
    _OWN: ClassVar[Mapping[str, Check]] = MappingProxyType(
        {
            "full": _renderer,
            "fallback": _renderer_or_compressor,
            "trigger_tokens": _optional_positive,
            "trigger_turns": _optional_count,
            "budget": _optional_positive,
            "counter": _counter,
        }
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        o = self._options
        if o["trigger_tokens"] is None and o["trigger_turns"] is None:
            raise ConfigurationError(
                "pressure: give trigger_tokens= and/or trigger_turns= (when to switch "
                "from the full history)"
            )
        if isinstance(o["fallback"], Compressor) and not (o["budget"] or o["trigger_tokens"]):
            raise ConfigurationError(
                "pressure: a compressor fallback needs budget= or trigger_tokens= (the "
                "budget it compresses to)"
            )

    def _checked(self, options: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in options.items():
            check = self._OWN.get(key)
            if check is None:  # an option for the renderers: checked as they check it
                check = SingleUserCoalesced.CHECKS.get(key) or FullHistory.CHECKS.get(key)
            if check is None:
                raise ConfigurationError(
                    f"pressure: unknown option {key!r}; it takes {sorted(self._OWN)} and "
                    "the options of its full and fallback renderers"
                )
            try:
                out[key] = check(value)
            except (TypeError, CtxfoldError) as exc:
                raise ConfigurationError(
                    f"pressure: option {key}={value!r} is not valid; use {exc}"
                ) from None
        return out

    @classmethod
    def accepts(cls, key: str) -> bool:
        return key in cls._OWN or any(_takes(r, key) for r in (SingleUserCoalesced, FullHistory))

    def _render(
        self, turns: tuple[Turn, ...], memory: Mapping[str, Any], opts: dict[str, Any]
    ) -> tuple[list[Message], RenderStats]:
        passed = {k: v for k, v in opts.items() if k not in self._OWN}
        passed["counter"] = opts["counter"]
        full: Renderer = opts["full"]
        messages, stats = full.to_messages(turns, memory, _for(full, passed))
        trigger = None
        if opts["trigger_turns"] is not None and len(turns) > opts["trigger_turns"]:
            trigger = "turns"
        elif opts["trigger_tokens"] is not None and stats.tokens > opts["trigger_tokens"]:
            trigger = "tokens"
        if trigger is None:
            return messages, stats
        fallback = opts["fallback"]
        if isinstance(fallback, Compressor):
            budget = opts["budget"] or opts["trigger_tokens"]
            result = fallback.compress(messages, budget=budget, counter=opts["counter"])
            out = list(result.messages)
            kept = set(out)
            said = [m for m in messages if m.role == "user"][
                len(_paragraphs(passed.get("mission"))) :
            ]
            return out, RenderStats(
                f"{self.label}:{type(fallback).__name__}",
                len(turns),
                len(out),
                result.stats.tokens_after,
                stats.tool_calls_total,
                sum(len(m.tool_calls) for m in out),
                stats.output_lines_total,
                min(
                    sum(len(m.text.split("\n")) for m in said if m in kept),
                    stats.output_lines_total,
                ),
                trigger=trigger,
            )
        if opts["budget"] is not None and _takes(fallback, "budget"):
            passed.setdefault("budget", opts["budget"])
        out, fstats = fallback.to_messages(turns, memory, _for(fallback, passed))
        return out, RenderStats(
            f"{self.label}:{fstats.renderer}",
            fstats.turns,
            fstats.messages,
            fstats.tokens,
            fstats.tool_calls_total,
            fstats.tool_calls_shown,
            fstats.output_lines_total,
            fstats.output_lines_shown,
            fstats.results_shortened,
            fstats.errors_recovered,
            trigger,
        )


def _takes(renderer: Any, key: str) -> bool:
    accepts = getattr(renderer, "accepts", None)
    return bool(accepts(key)) if callable(accepts) else False


def _for(renderer: Renderer, options: Mapping[str, Any]) -> dict[str, Any]:
    """The options a renderer takes (a renderer without ``accepts`` gets them all)."""
    if not callable(getattr(renderer, "accepts", None)):
        return dict(options)
    return {k: v for k, v in options.items() if _takes(renderer, k)}


# ------------------------------------------------------------------ registry, normalize

RendererFactory = Callable[..., Renderer]
_lock = threading.Lock()
_registry: dict[str, RendererFactory] = {
    SingleUserCoalesced.label: SingleUserCoalesced,
    FullHistory.label: FullHistory,
    PressureTriggered.label: PressureTriggered,
}


def renderers() -> Mapping[str, RendererFactory]:
    """A read-only view of the registered renderer names and their factories."""
    with _lock:
        return MappingProxyType(dict(_registry))


def register_renderer(name: str, factory: RendererFactory, *, replace: bool = False) -> None:
    """Make ``factory`` (a renderer class or a function returning one) available by
    ``name``. Raises :class:`ConfigurationError` if the name is taken, unless ``replace``."""
    if not isinstance(name, str) or not name:
        raise ConfigurationError("a renderer name must be a non-empty string")
    if not callable(factory):
        raise ConfigurationError(f"renderer {name!r}: factory must be callable")
    with _lock:
        if not replace and name in _registry:
            raise ConfigurationError(
                f"renderer {name!r} is already registered; pass replace=True to override it"
            )
        _registry[name] = factory


_RENDER_FORMS = (
    "None/False (off), True (single_user_coalesced), a renderer name "
    "(single_user_coalesced, full_history, pressure, or one registered), a renderer class "
    "or instance, (renderer, {options}), or a dict {'renderer': ..., **options}"
)


def normalize_renderer(
    option: Any, *, parent: Renderer | None = None, **overrides: Any
) -> Renderer | None:
    """Turn a rendering option into a renderer, or ``None`` for off.

    ``None``/``False`` -> ``None`` (the default: no rendering); ``True`` ->
    :class:`SingleUserCoalesced` with its defaults; a name or a class -> that renderer
    with its defaults; an instance -> itself; ``(renderer, options)`` or
    ``{"renderer": renderer, **options}`` -> options merged over the defaults
    (``overrides`` over those). With ``parent`` (a sub-agent's parent's renderer), the
    parent's options that the new renderer takes come between its defaults and the
    options given: a sub-agent inherits what it does not set.
    """

    def resolve(target: Any, options: dict[str, Any]) -> Renderer:
        if target is True:
            target = SingleUserCoalesced
        if isinstance(target, str):
            with _lock:
                factory = _registry.get(target)
            if factory is None:
                names = ", ".join(sorted(renderers()))
                raise ConfigurationError(f"unknown renderer {target!r}; registered: {names}")
            target = factory
        if isinstance(target, Renderer) and not isinstance(target, type):
            if not options:
                return target
            if isinstance(target, BaseRenderer):
                return target.child(**options)
            raise ConfigurationError(
                "options were given with a renderer instance; configure the instance "
                "instead, or pass its class or name with the options"
            )
        if callable(target):
            inherited = dict(getattr(parent, "options", {}) or {})
            options = {
                **{k: v for k, v in inherited.items() if _takes(target, k)},
                **options,
            }
            try:
                made = target(**options)
            except TypeError as exc:
                raise ConfigurationError(
                    f"renderer {target!r} rejected its options: {exc}"
                ) from None
            if not isinstance(made, Renderer):
                raise ConfigurationError(f"{target!r} did not produce a renderer")
            return made
        raise ConfigurationError(
            f"cannot use {target!r} as a rendering option; use {_RENDER_FORMS}"
        )

    return normalize_option(option, overrides, resolve, keys=("renderer",))


def render(
    turns: Sequence[Turn | Mapping[str, Any]],
    memory: Mapping[str, Any] | None = None,
    *,
    renderer: Any = True,
    **options: Any,
) -> tuple[list[Message], RenderStats]:
    """Render an agent's turns into the messages of its next call.

    Args:
        turns: :class:`Turn` objects (or dicts of their fields), oldest first.
        memory: the mapping the agent keeps between turns (shown as data).
        renderer: any form :func:`normalize_renderer` takes (default: coalesced).
        **options: this call's options (``mission``, ``tools``, ``max_turns``, ...).

    Returns:
        ``(messages, stats)``; ``ctxfold.to_openai(messages)`` gives OpenAI dicts.
    """
    chosen = normalize_renderer(renderer)
    if chosen is None:
        raise ConfigurationError("render() needs a renderer; renderer=None turns rendering off")
    return chosen.to_messages(as_turns(turns), memory, options)
