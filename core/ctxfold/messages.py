"""The message model: :class:`Message`, its :class:`ToolCall` and :class:`ContentPart`,
and its own dict form (:meth:`Message.to_openai`). Reading and writing lists of them
in a client's wire format is :mod:`ctxfold.wire`'s (:mod:`ctxfold.wire.openai`,
:mod:`ctxfold.wire.anthropic`), which imports this module and never the reverse."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from .exceptions import InvalidMessageError

__all__ = [
    "ROLES",
    "ContentPart",
    "Message",
    "ToolCall",
    "content_from_wire",
    "content_to_wire",
    "dumps",
    "speaker_tag",
    "transcript",
    "uses_tools",
]

#: Roles a message may have. ``developer`` is OpenAI's newer name for ``system``.
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


def dumps(value: Any) -> str:
    """``value`` as compact JSON text (not ASCII-escaped): how parts and fields are kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class ToolCall:
    """One function call an assistant message makes.

    ``arguments`` is the JSON text exactly as the model produced it (it may be invalid
    JSON; it is carried through untouched).
    """

    id: str
    name: str
    arguments: str = "{}"
    type: str = "function"

    def to_openai(self) -> dict[str, Any]:
        """Return the OpenAI ``tool_calls`` entry."""
        return {
            "id": self.id,
            "type": self.type,
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class ContentPart:
    """One part of multi-part content.

    A text part has ``type == "text"`` and its ``text``; any other part (an image, an
    audio clip, a file, a thinking block) is carried through untouched, its fields kept
    as JSON text in ``extra`` so the part stays immutable.
    """

    type: str
    text: str | None = None
    extra: str = "{}"

    @classmethod
    def from_dict(cls, part: Mapping[str, Any]) -> ContentPart:
        """Build a part from an OpenAI or Anthropic content block."""
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise InvalidMessageError(
                "each content part must be an object with a string 'type', got "
                f"{type(part).__name__}"
            )
        text = part.get("text")
        if text is not None and not isinstance(text, str):
            raise InvalidMessageError("a content part's 'text' must be a string")
        rest = {k: v for k, v in part.items() if k not in ("type", "text")}
        return cls(type=part["type"], text=text, extra=dumps(rest) if rest else "{}")

    @property
    def data(self) -> dict[str, Any]:
        """The part's fields other than ``type`` and ``text`` (a fresh dict)."""
        loaded: dict[str, Any] = json.loads(self.extra)
        return loaded

    @property
    def is_text(self) -> bool:
        """True for a part whose text a compressor may read and rewrite."""
        return self.text is not None

    def to_dict(self) -> dict[str, Any]:
        """Return the part as a content block."""
        out: dict[str, Any] = {"type": self.type}
        if self.text is not None:
            out["text"] = self.text
        out.update(self.data)
        return out


Content = str | tuple[ContentPart, ...] | None

_NO_METADATA: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message, immutable.

    ``content`` is a string, a tuple of :class:`ContentPart` (multi-part content), or
    ``None``. ``extras`` carries provider fields ctxfold does not interpret (for example
    ``refusal`` or ``reasoning_content``) as ``(key, JSON text)`` pairs so conversion
    back is lossless. ``metadata`` is for ctxfold and its users; the model never sees it.
    """

    role: str
    content: Content = ""
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    id: str | None = None
    extras: tuple[tuple[str, str], ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)
    # see fingerprint: found on first use (a slot, as every field: no instance dict)
    _fingerprint: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidMessageError(
                f"unknown role {self.role!r}; use one of {', '.join(sorted(ROLES))}"
            )
        if isinstance(self.content, list):
            object.__setattr__(self, "content", tuple(self.content))
        if isinstance(self.tool_calls, list):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if not self.metadata:  # most messages: one shared empty mapping, not two objects
            object.__setattr__(self, "metadata", _NO_METADATA)
        elif not isinstance(self.metadata, MappingProxyType):
            object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    # Value semantics: equal messages hash alike; metadata is not part of the value.
    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __deepcopy__(self, memo: dict[int, Any]) -> Message:
        return replace(self, metadata=copy.deepcopy(dict(self.metadata), memo))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self._fields_dict(),))

    def _fields_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "content": self.content,
            "name": self.name,
            "tool_calls": self.tool_calls,
            "tool_call_id": self.tool_call_id,
            "id": self.id,
            "extras": self.extras,
            "metadata": dict(self.metadata),
        }

    @property
    def text(self) -> str:
        """The text the model reads: the string content, or the text parts joined."""
        if isinstance(self.content, str):
            return self.content
        if not self.content:
            return ""
        return "\n".join(p.text for p in self.content if p.text is not None)

    @property
    def fingerprint(self) -> str:
        """SHA-256 of what the model sees (role, content, name, calls, call id, extras);
        computed once. (A message has slots, not an instance ``__dict__``, which
        ``cached_property`` needs: a dict per message is some 100 bytes more, and one
        more object for the garbage collector to walk in a long history.)"""
        fingerprint = self._fingerprint
        if fingerprint is None:
            fingerprint = self._digest()
            object.__setattr__(self, "_fingerprint", fingerprint)
        return fingerprint

    def _digest(self) -> str:
        content = self.content
        if isinstance(content, tuple):
            content = dumps([p.to_dict() for p in content])
        fields = [
            self.role,
            "\x00" if content is None else content,
            self.name or "",
            self.tool_call_id or "",
            *(f"{c.id}\x1e{c.name}\x1e{c.arguments}\x1e{c.type}" for c in self.tool_calls),
            *(f"{k}\x1e{v}" for k, v in self.extras),
        ]
        data = "".join(f"{len(f)}:{f}" for f in fields).encode("utf-8", "surrogatepass")
        return hashlib.sha256(data).hexdigest()

    def with_text(self, text: str) -> Message | None:
        """A copy whose :attr:`text` is ``text``: the string content replaced, or the
        one text part of multi-part content (the other parts, a thinking block or an
        image, kept as they are); ``None`` when the content has no text, or several
        text parts, to put it in."""
        if isinstance(self.content, str):
            return replace(self, content=text)
        at = [k for k, p in enumerate(self.content or ()) if p.text is not None]
        if len(at) != 1 or not isinstance(self.content, tuple):
            return None
        parts = list(self.content)
        parts[at[0]] = replace(parts[at[0]], text=text)
        return replace(self, content=tuple(parts))

    def with_content(self, content: Content) -> Message:
        """Return a copy with new content (the original is untouched)."""
        return replace(self, content=content)

    def to_openai(self) -> dict[str, Any]:
        """The message as an OpenAI chat dict, ctxfold's own dict form (the inverse of
        :func:`ctxfold.wire.openai.from_openai`)."""
        d: dict[str, Any] = {"role": self.role}
        if self.content is not None or not self.metadata.get(NO_CONTENT):
            d["content"] = content_to_wire(self.content)
        if self.name is not None:
            d["name"] = self.name
        if self.tool_calls:
            d["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.id is not None:
            d["id"] = self.id
        for key, value in self.extras:
            d[key] = json.loads(value)
        return d


def _rebuild(fields: dict[str, Any]) -> Message:
    return Message(**fields)


# ------------------------------------------------------------ content on the wire


def content_from_wire(value: Any, index: int | None) -> Content:
    """Message content from a wire format: a string, a list of parts, or ``None``."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        try:
            return tuple(ContentPart.from_dict(p) for p in value)
        except InvalidMessageError as exc:
            raise InvalidMessageError(exc.reason, index=index) from None
    raise InvalidMessageError(
        f"'content' must be a string, a list of parts or null, got {type(value).__name__}",
        index=index,
    )


def content_to_wire(content: Content) -> Any:
    """Message content for a wire format (the inverse of :func:`content_from_wire`)."""
    if isinstance(content, tuple):
        return [p.to_dict() for p in content]
    return content


#: The ``metadata`` flag of a message read from a dict with no ``content`` key, so that
#: :meth:`Message.to_openai` does not invent a ``"content": null`` the input did not have.
NO_CONTENT = "openai_no_content"


def speaker_tag(m: Message) -> str:
    """Who speaks in a condensed line: the name (or role), ``tool result (name)``."""
    if m.role == "tool":
        return f"tool result{f' ({m.name})' if m.name else ''}"
    return m.name or m.role


def uses_tools(messages: Iterable[Message]) -> bool:
    """Whether ``messages`` call tools or hold tool results (an agent's run, not a
    chat): the strategies keep more of the newest output there and recall less."""
    return any(m.tool_calls or m.role == "tool" for m in messages)


def transcript(messages: Sequence[Message]) -> str:
    """Messages as plain text for a summarizer: ``speaker: text`` (see
    :func:`speaker_tag`), tool calls as ``-> name(arguments)``."""
    lines: list[str] = []
    for m in messages:
        tag = speaker_tag(m)
        body = m.text
        calls = " ".join(f"-> {c.name}({c.arguments})" for c in m.tool_calls)
        lines.append(f"{tag}: {' '.join(x for x in (body, calls) if x)}")
    return "\n".join(lines)


_MOVED = frozenset({"as_messages", "from_openai", "to_openai"})


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        also = f" (or use ctxfold.{name})" if name != "as_messages" else ""
        raise AttributeError(f"ctxfold.messages.{name} lives in ctxfold.wire.openai{also}")
    raise AttributeError(f"module 'ctxfold.messages' has no attribute {name!r}")
