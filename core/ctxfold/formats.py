"""Message formats of other packages (LangChain's, LlamaIndex's, yours): every entry
point that takes messages reads them, and a result gives back the kind it was given.

A format is registered under the top-level package its message classes live in
(``"langchain_core"``, ``"llama_index"``). The wrappers register theirs through the
``ctxfold.formats`` entry-point group, so ``import ctxfold`` imports neither framework:
a format loads the first time one of its messages is seen.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol, runtime_checkable

from ._registry import Registry
from .exceptions import ConfigurationError, InvalidMessageError
from .messages import Message
from .validity import SYSTEM_ROLES
from .wire.anthropic import from_anthropic, read_runs, to_anthropic
from .wire.openai import as_messages, to_openai
from .wire.shapes import Shape, shape_of_list

__all__ = [
    "ANTHROPIC",
    "CTXFOLD",
    "OPENAI",
    "PLAIN",
    "Format",
    "MessageFormat",
    "Request",
    "read_messages",
    "register_format",
]

_log = logging.getLogger("ctxfold")


@runtime_checkable
class MessageFormat(Protocol):
    """How one package's messages convert: ``read`` takes a list of them (ctxfold
    messages and OpenAI dicts may be among them) or the package's own container of
    messages (a prompt value); ``write`` gives the package's messages back."""

    @property
    def name(self) -> str:
        """Short name, for messages and reprs."""
        ...

    def read(self, messages: Any) -> list[Message]:
        """The ctxfold messages of ``messages``."""
        ...

    def write(self, messages: Sequence[Message]) -> Any:
        """``messages`` as the package's own messages (a list, or the container the
        package gives them in)."""
        ...


def _check(name: str, entry: object) -> MessageFormat:
    if not isinstance(entry, MessageFormat):
        raise ConfigurationError(
            f"message format {name!r}: needs a name and read and write methods"
        )
    return entry


REGISTRY: Registry[MessageFormat] = Registry("message format", {}, check=_check)
GROUP = "ctxfold.formats"


@functools.cache
def _declared() -> dict[str, EntryPoint]:
    """The formats installed packages declare, by package name (read once)."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def _lookup(package: str) -> MessageFormat | None:
    """The format of ``package``: registered, or declared and loaded now (only that
    one: a LangChain message never imports LlamaIndex)."""
    fmt = REGISTRY.get(package)
    if fmt is not None or package not in _declared():
        return fmt
    ep = _declared()[package]
    try:
        loaded = _check(package, ep.load())
    except Exception as exc:  # a broken plug-in must not break ctxfold
        _log.warning("message format %r (%s) failed to load: %r", package, ep.value, exc)
        return None
    if package not in REGISTRY:
        REGISTRY.register(package, loaded)
    return REGISTRY.get(package)


def register_format(package: str, fmt: MessageFormat, *, replace: bool = False) -> None:
    """Read and write the messages whose classes live in the top-level ``package``
    with ``fmt`` (an entry point named ``package`` in the ``ctxfold.formats`` group
    does the same without an import)."""
    REGISTRY.register(package, fmt, replace=replace)


@dataclass(frozen=True)
class Format:
    """A :class:`MessageFormat` made of two functions: ``read`` (a package's messages
    to ctxfold's) and ``write`` (back)."""

    name: str
    read: Callable[[Any], list[Message]]
    write: Callable[[Sequence[Message]], Any]

    def __repr__(self) -> str:
        return f"<message format {self.name}>"


#: ctxfold's :class:`Message` objects, and OpenAI chat dicts: the formats the core reads.
CTXFOLD: MessageFormat = Format("ctxfold", as_messages, list)
OPENAI: MessageFormat = Format("openai", as_messages, to_openai)
#: Dicts of plain text, which OpenAI's format and Anthropic's read alike: given back as
#: OpenAI dicts, and no sign of which client a session's messages come from.
PLAIN: MessageFormat = Format("openai", as_messages, to_openai)


def _read_anthropic(messages: Sequence[Any]) -> list[Message]:
    """Anthropic dicts (with ctxfold messages among them, kept as they are)."""
    return as_messages(read_runs(messages))


def _write_anthropic(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Anthropic dicts: a list of them has no place for a system block, so one the
    output holds (a note about earlier messages) opens the first user turn."""
    system, out = to_anthropic(messages)
    if system is None:
        return out
    lead = system if isinstance(system, list) else [{"type": "text", "text": system}]
    if out and out[0]["role"] == "user":
        first = out[0]["content"]
        rest = [{"type": "text", "text": first}] if isinstance(first, str) else first
        return [{"role": "user", "content": [*lead, *rest]}, *out[1:]]
    return [{"role": "user", "content": lead}, *out]


def _write_anthropic_with_system(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Anthropic dicts after a leading system message, as the input had them."""
    system, out = to_anthropic(messages)
    return out if system is None else [{"role": "system", "content": system}, *out]


#: Anthropic Messages-API dicts, and the same after a leading system message (not the
#: API's own form, which takes the system prompt apart: a :class:`Request` does).
ANTHROPIC: MessageFormat = Format("anthropic", _read_anthropic, _write_anthropic)
ANTHROPIC_WITH_SYSTEM: MessageFormat = Format(
    "anthropic", _read_anthropic, _write_anthropic_with_system
)


@dataclass(frozen=True)
class Request:
    """A whole request object (``{"model": ..., "system": ..., "messages": [...]}``):
    read as its messages (Anthropic's ``system`` first), written back as the same
    request with the messages (and ``system``) replaced."""

    kind: Shape
    fields: Mapping[str, Any]

    @property
    def name(self) -> str:
        """``"anthropic request"`` or ``"openai request"``."""
        return f"{self.kind.value.lower()} request"

    def read(self, request: Mapping[str, Any]) -> list[Message]:
        """The request's messages, its top-level ``system`` first."""
        messages = request["messages"]
        if self.kind is Shape.ANTHROPIC:
            system = request.get("system")
            return as_messages(from_anthropic(messages, system=system))
        return as_messages(messages)

    def write(self, messages: Sequence[Message]) -> dict[str, Any]:
        """The request with ``messages`` in its place."""
        out = {k: v for k, v in self.fields.items() if k not in ("messages", "system")}
        if self.kind is Shape.ANTHROPIC:
            system, out["messages"] = to_anthropic(messages)
            if system is not None:
                out["system"] = system
        else:
            out["messages"] = to_openai(messages)
        return out


def _format_of(item: object) -> MessageFormat | None:
    if isinstance(item, Message):
        return CTXFOLD
    if isinstance(item, Mapping):
        return OPENAI
    package = type(item).__module__.partition(".")[0]
    return None if package == "builtins" else _lookup(package)


def _request(messages: Mapping[str, Any]) -> Request:
    """The request ``messages`` is, or an error saying what was expected."""
    inner = messages.get("messages")
    if not isinstance(inner, list):
        keys = ", ".join(repr(k) for k in list(messages)[:6])
        raise InvalidMessageError(
            "expected a list of messages (OpenAI or Anthropic dicts, ctxfold.Message or "
            f"a framework's messages), got a single dict with keys {keys}"
            + (
                "; a message goes in a list: [message]"
                if "role" in messages
                else "; a request object needs its list under 'messages'"
            )
        )
    shape = shape_of_list(inner)
    if "system" in messages:
        if shape is Shape.OPENAI:
            raise InvalidMessageError(
                "a request with a top-level 'system' is Anthropic's, but its messages are "
                "OpenAI's; put the system prompt first in the messages instead"
            )
        shape = Shape.ANTHROPIC
    return Request(Shape.ANTHROPIC if shape is Shape.ANTHROPIC else Shape.OPENAI, messages)


def read_messages(messages: Any) -> tuple[list[Message], MessageFormat]:
    """``messages`` as ctxfold messages, and the format they came in: ctxfold messages
    (:data:`CTXFOLD`), OpenAI chat dicts (:data:`OPENAI`) or Anthropic's
    (:data:`ANTHROPIC`), told apart by their shape (:mod:`ctxfold.wire.shapes`; a list
    showing both is refused), a registered package's messages (that of the first whose
    format is known), a registered package's container of messages (a LangChain prompt
    value), or a whole request object (``{"messages": [...], "system": ...}``, given
    back as one). Raises :class:`ctxfold.InvalidMessageError` for what no format
    reads."""
    if isinstance(messages, Mapping):
        request = _request(messages)
        return request.read(messages), request
    whole = isinstance(messages, (str, bytes))  # not a list: as_messages says so
    fmt = None if whole else _format_of(messages)
    if fmt is None and not whole and isinstance(messages, Iterable):
        messages = list(messages)
        fmt = next((f for f in map(_format_of, messages) if f is not None), None)
    shape = shape_of_list(messages) if fmt in (CTXFOLD, OPENAI) else None
    if shape is Shape.ANTHROPIC:
        msgs = _read_anthropic(messages)
        system = any(m.role in SYSTEM_ROLES for m in msgs[:1])
        return msgs, ANTHROPIC_WITH_SYSTEM if system else ANTHROPIC
    if shape is Shape.EITHER and all(isinstance(m, Mapping) for m in messages):
        return as_messages(messages), PLAIN
    if fmt is None or fmt in (CTXFOLD, OPENAI):
        return as_messages(messages), fmt or CTXFOLD
    return as_messages(fmt.read(messages)), fmt
