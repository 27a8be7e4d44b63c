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
from .exceptions import ConfigurationError
from .messages import Message, as_messages, to_openai

__all__ = ["CTXFOLD", "OPENAI", "Format", "MessageFormat", "read_messages", "register_format"]

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

    def write(self, messages: Sequence[Message]) -> list[Any]:
        """``messages`` as the package's own messages."""
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
    write: Callable[[Sequence[Message]], list[Any]]

    def __repr__(self) -> str:
        return f"<message format {self.name}>"


#: ctxfold's :class:`Message` objects, and OpenAI chat dicts: the formats the core reads.
CTXFOLD: MessageFormat = Format("ctxfold", as_messages, list)
OPENAI: MessageFormat = Format("openai", as_messages, to_openai)


def _format_of(item: object) -> MessageFormat | None:
    if isinstance(item, Message):
        return CTXFOLD
    if isinstance(item, Mapping):
        return OPENAI
    package = type(item).__module__.partition(".")[0]
    return None if package == "builtins" else _lookup(package)


def read_messages(messages: Any) -> tuple[list[Message], MessageFormat]:
    """``messages`` as ctxfold messages, and the format they came in (that of the
    first message whose format is known: :data:`CTXFOLD`, :data:`OPENAI` or a
    registered package's): a list, or a registered package's container of messages
    (a LangChain prompt value). Raises :class:`ctxfold.InvalidMessageError` for what
    no format reads."""
    whole = isinstance(messages, (Mapping, str, bytes))  # not a list: as_messages says so
    fmt = None if whole else _format_of(messages)
    if fmt is None and not whole and isinstance(messages, Iterable):
        messages = list(messages)
        fmt = next((f for f in map(_format_of, messages) if f is not None), None)
    if fmt is None or fmt in (CTXFOLD, OPENAI):
        return as_messages(messages), fmt or CTXFOLD
    return as_messages(fmt.read(messages)), fmt
