"""The message model and its lossless OpenAI chat-dict converter (Anthropic's and other
clients' formats: :mod:`ctxfold.wire`)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from .exceptions import InvalidMessageError
from .validity import check_tool_structure

__all__ = [
    "ROLES",
    "ContentPart",
    "Message",
    "ToolCall",
    "as_messages",
    "content_from_wire",
    "content_to_wire",
    "dumps",
    "from_openai",
    "speaker_tag",
    "to_openai",
    "transcript",
    "uses_tools",
]

#: Roles a message may have. ``developer`` is OpenAI's newer name for ``system``.
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})

_OPENAI_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "id"})


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
        """Return the message as an OpenAI chat dict."""
        return to_openai([self])[0]


def _rebuild(fields: dict[str, Any]) -> Message:
    return Message(**fields)


# ---------------------------------------------------------------------------- OpenAI


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


def _tool_call_from_openai(raw: Any, index: int | None) -> ToolCall:
    if not isinstance(raw, Mapping):
        raise InvalidMessageError("each entry of 'tool_calls' must be an object", index=index)
    fn = raw.get("function")
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
        raise InvalidMessageError(
            "a tool call needs 'function': {'name': str, 'arguments': str}", index=index
        )
    call_id = raw.get("id")
    if not isinstance(call_id, str):
        raise InvalidMessageError("a tool call needs a string 'id'", index=index)
    args = fn.get("arguments", "{}")
    if not isinstance(args, str):  # some clients send parsed arguments; keep them as JSON text
        args = dumps(args)
    return ToolCall(id=call_id, name=fn["name"], arguments=args, type=raw.get("type", "function"))


#: The ``metadata`` flag of a message read from a dict with no ``content`` key, so that
#: :func:`to_openai` does not invent a ``"content": null`` the input did not have.
NO_CONTENT = "openai_no_content"


def _field(key: str, value: Any, index: int) -> str:
    """A field ctxfold does not interpret, as the JSON it is carried through as."""
    try:
        return dumps(value)
    except (TypeError, ValueError, RecursionError):
        raise InvalidMessageError(
            f"field {key!r} holds {type(value).__name__}, which JSON cannot carry; convert "
            "it to a string, number, list or object (or drop it)",
            index=index,
        ) from None


def _from_openai(raw: Any, i: int) -> Message:
    """One OpenAI message dict (``i``: its index, for errors)."""
    if not isinstance(raw, Mapping):
        raise InvalidMessageError(f"expected a message object, got {type(raw).__name__}", index=i)
    role = raw.get("role")
    if role is None and isinstance(raw.get("messages"), list):
        raise InvalidMessageError(
            "this is a request object, not a message: pass its list, data['messages']",
            index=i,
        )
    if role not in ROLES:
        raise InvalidMessageError(
            f"unknown role {role!r}; use one of {', '.join(sorted(ROLES))}", index=i
        )
    calls_raw = raw.get("tool_calls") or []
    if not isinstance(calls_raw, list):
        raise InvalidMessageError("'tool_calls' must be a list", index=i)
    tool_call_id = raw.get("tool_call_id")
    if role == "tool" and not isinstance(tool_call_id, str):
        raise InvalidMessageError(
            "a 'tool' message needs the string 'tool_call_id' of the call it answers",
            index=i,
        )
    name = raw.get("name")
    if name is not None and not isinstance(name, str):
        raise InvalidMessageError("'name' must be a string", index=i)
    extras = tuple((k, _field(k, v, i)) for k, v in raw.items() if k not in _OPENAI_KEYS)
    if "tool_calls" in raw and not calls_raw:  # an explicit empty list or null
        extras += (("tool_calls", dumps(raw["tool_calls"])),)
    msg_id = raw.get("id")
    if msg_id is not None and not isinstance(msg_id, str):
        extras += (("id", _field("id", msg_id, i)),)
        msg_id = None
    return Message(
        role=role,
        content=content_from_wire(raw.get("content"), i),
        name=name,
        tool_calls=tuple(_tool_call_from_openai(c, i) for c in calls_raw),
        tool_call_id=tool_call_id,
        id=msg_id,
        extras=extras,
        metadata={} if "content" in raw else {NO_CONTENT: True},
    )


def from_openai(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Convert OpenAI chat-completions message dicts into :class:`Message` objects.

    Keys ctxfold does not interpret are kept in ``Message.extras`` so :func:`to_openai`
    gives back an equal dict. Raises :class:`InvalidMessageError` naming the message
    (tool calls are checked as :func:`check_tool_structure` says).
    """
    out = [_from_openai(raw, i) for i, raw in enumerate(messages)]
    check_tool_structure(out)
    return out


def to_openai(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Convert messages to OpenAI chat-completions dicts (the inverse of :func:`from_openai`)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        d: dict[str, Any] = {"role": m.role}
        if m.content is not None or not m.metadata.get(NO_CONTENT):
            d["content"] = content_to_wire(m.content)
        if m.name is not None:
            d["name"] = m.name
        if m.tool_calls:
            d["tool_calls"] = [c.to_openai() for c in m.tool_calls]
        if m.tool_call_id is not None:
            d["tool_call_id"] = m.tool_call_id
        if m.id is not None:
            d["id"] = m.id
        for key, value in m.extras:
            d[key] = json.loads(value)
        out.append(d)
    return out


def as_messages(messages: Iterable[Message | Mapping[str, Any]]) -> list[Message]:
    """Accept :class:`Message` objects or OpenAI dicts (mixed is fine); return messages
    whose tool calls make sense (see :func:`ctxfold.validity.check_tool_structure`)."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        hint = (
            ": a text needs a role, e.g. [{'role': 'user', 'content': text}]"
            if isinstance(messages, str)
            else ""
        )
        raise InvalidMessageError(
            "expected a list of messages (OpenAI dicts or ctxfold.Message), "
            f"got {'a single ' if isinstance(messages, Mapping) else ''}"
            f"{type(messages).__name__}{hint}"
        )
    out: list[Message] = []
    for i, m in enumerate(messages):
        if isinstance(m, Message):
            out.append(m)
        elif isinstance(m, Mapping):
            out.append(_from_openai(m, i))
        else:
            raise InvalidMessageError(
                f"expected an OpenAI message dict or ctxfold.Message, got {type(m).__name__}",
                index=i,
            )
    check_tool_structure(out)
    return out


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
