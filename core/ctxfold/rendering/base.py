"""What every renderer shares: the :class:`Renderer` protocol, :class:`RenderStats`,
the checks of renderer options and :class:`BaseRenderer`."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..exceptions import ConfigurationError
from ..messages import Message
from ..tokens import get_counter
from .turns import Turn, as_turns

__all__ = ["DEFAULT_SYSTEM", "BaseRenderer", "Check", "RenderStats", "Renderer", "tool_line"]

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


def _takes(renderer: Any, key: str) -> bool:
    accepts = getattr(renderer, "accepts", None)
    return bool(accepts(key)) if callable(accepts) else False


def _for(renderer: Renderer, options: Mapping[str, Any]) -> dict[str, Any]:
    """The options a renderer takes (a renderer without ``accepts`` gets them all)."""
    if not callable(getattr(renderer, "accepts", None)):
        return dict(options)
    return {k: v for k, v in options.items() if _takes(renderer, k)}
