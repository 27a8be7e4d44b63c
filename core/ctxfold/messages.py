"""The message model and its lossless converters (OpenAI chat dicts, Anthropic messages)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from ._json import loads as json_loads
from .exceptions import InvalidMessageError
from .validity import check_tool_structure

__all__ = [
    "ROLES",
    "ContentPart",
    "Message",
    "ToolCall",
    "as_messages",
    "from_anthropic",
    "from_openai",
    "speaker_tag",
    "to_anthropic",
    "to_openai",
    "transcript",
    "uses_tools",
]

#: Roles a message may have. ``developer`` is OpenAI's newer name for ``system``.
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})

_OPENAI_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "id"})


def _dumps(value: Any) -> str:
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
        return cls(type=part["type"], text=text, extra=_dumps(rest) if rest else "{}")

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
            content = _dumps([p.to_dict() for p in content])
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

    def with_content(self, content: Content) -> Message:
        """Return a copy with new content (the original is untouched)."""
        return replace(self, content=content)

    def to_openai(self) -> dict[str, Any]:
        """Return the message as an OpenAI chat dict."""
        return to_openai([self])[0]


def _rebuild(fields: dict[str, Any]) -> Message:
    return Message(**fields)


# ---------------------------------------------------------------------------- OpenAI


def _content_from_wire(value: Any, index: int | None) -> Content:
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


def _content_to_wire(content: Content) -> Any:
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
        args = _dumps(args)
    return ToolCall(id=call_id, name=fn["name"], arguments=args, type=raw.get("type", "function"))


#: The ``metadata`` flag of a message read from a dict with no ``content`` key, so that
#: :func:`to_openai` does not invent a ``"content": null`` the input did not have.
NO_CONTENT = "openai_no_content"


def _field(key: str, value: Any, index: int) -> str:
    """A field ctxfold does not interpret, as the JSON it is carried through as."""
    try:
        return _dumps(value)
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
        extras += (("tool_calls", _dumps(raw["tool_calls"])),)
    msg_id = raw.get("id")
    if msg_id is not None and not isinstance(msg_id, str):
        extras += (("id", _field("id", msg_id, i)),)
        msg_id = None
    return Message(
        role=role,
        content=_content_from_wire(raw.get("content"), i),
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
            d["content"] = _content_to_wire(m.content)
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


# ------------------------------------------------------------------------- Anthropic

_TURN = "anthropic_turn"


def from_anthropic(
    messages: Iterable[Mapping[str, Any]],
    *,
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> list[Message]:
    """Convert Anthropic Messages-API dicts (and the ``system`` parameter) to messages.

    ``tool_use`` blocks become :class:`ToolCall` entries of the assistant message;
    ``tool_result`` blocks become ``tool`` messages, so the rest of ctxfold sees one
    model. Each message remembers its Anthropic turn in ``metadata['anthropic_turn']``
    so :func:`to_anthropic` can rebuild the same turns.
    """
    out: list[Message] = []
    if system is not None:
        sys_content = system if isinstance(system, str) else list(system)
        out.append(Message(role="system", content=_content_from_wire(sys_content, None)))
    for i, raw in enumerate(messages):
        if not isinstance(raw, Mapping) or raw.get("role") not in ("user", "assistant"):
            raise InvalidMessageError(
                "an Anthropic message needs role 'user' or 'assistant'", index=i
            )
        role = raw["role"]
        content = raw.get("content")
        meta = {_TURN: i}
        if isinstance(content, str):
            out.append(Message(role=role, content=content, metadata=meta))
            continue
        if not isinstance(content, list):
            raise InvalidMessageError("'content' must be a string or a list of blocks", index=i)
        parts: list[ContentPart] = []
        calls: list[ToolCall] = []
        results: list[Message] = []
        for block in content:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "tool_use":
                calls.append(
                    ToolCall(id=block["id"], name=block["name"], arguments=_dumps(block["input"]))
                )
            elif kind == "tool_result":
                rest = {
                    k: v for k, v in block.items() if k not in ("type", "tool_use_id", "content")
                }
                results.append(
                    Message(
                        role="tool",
                        content=_content_from_wire(block.get("content", ""), i),
                        tool_call_id=block["tool_use_id"],
                        extras=tuple((k, _dumps(v)) for k, v in rest.items()),
                        metadata=meta,
                    )
                )
            else:
                try:
                    parts.append(ContentPart.from_dict(block))
                except InvalidMessageError as exc:
                    raise InvalidMessageError(exc.reason, index=i) from None
        out.extend(results)
        if parts or calls or not results:
            out.append(
                Message(
                    role=role,
                    content=tuple(parts) if parts or not calls else None,
                    tool_calls=tuple(calls),
                    metadata=meta,
                )
            )
    return out


def to_anthropic(messages: Iterable[Message]) -> tuple[Any, list[dict[str, Any]]]:
    """Convert messages to ``(system, messages)`` for the Anthropic Messages API.

    System and developer messages become the ``system`` parameter (a string, a list of
    blocks, or ``None``). Consecutive tool results are sent in one user turn, as the API
    requires; messages that came from one Anthropic turn go back into one turn.
    """
    system_parts: list[Any] = []
    turns: list[tuple[str, Any, list[dict[str, Any]] | str]] = []
    for m in messages:
        if m.role in ("system", "developer"):
            system_parts.append(_content_to_wire(m.content))
            continue
        role = "assistant" if m.role == "assistant" else "user"
        key = m.metadata.get(_TURN)
        blocks: list[dict[str, Any]] | str
        if m.role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id}
            block["content"] = _content_to_wire(m.content)
            for k, v in m.extras:
                block[k] = json.loads(v)
            blocks = [block]
        elif isinstance(m.content, str) and not m.tool_calls:
            blocks = m.content
        else:
            if isinstance(m.content, str):
                blocks = [{"type": "text", "text": m.content}] if m.content else []
            else:
                blocks = [p.to_dict() for p in m.content or ()]
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": _loads_args(c)}
                for c in m.tool_calls
            ]
        if turns and turns[-1][0] == role and _joins(turns[-1], key, m):
            prev = turns[-1][2]
            prev_blocks = [{"type": "text", "text": prev}] if isinstance(prev, str) else prev
            new_blocks = [{"type": "text", "text": blocks}] if isinstance(blocks, str) else blocks
            turns[-1] = (role, key, prev_blocks + new_blocks)
        else:
            turns.append(
                (role, key if key is not None else ("tool" if m.role == "tool" else None), blocks)
            )
    out = [{"role": role, "content": content} for role, _, content in turns]
    system: Any
    if not system_parts:
        system = None
    elif len(system_parts) == 1:
        system = system_parts[0]
    elif all(isinstance(p, str) for p in system_parts):
        system = "\n\n".join(system_parts)
    else:
        system = [
            b
            for p in system_parts
            for b in ([{"type": "text", "text": p}] if isinstance(p, str) else p)
        ]
    return system, out


def _joins(prev: tuple[str, Any, Any], key: Any, m: Message) -> bool:
    """Whether ``m`` belongs to the previous Anthropic turn."""
    prev_key = prev[1]
    if key is not None:
        return bool(prev_key == key)
    # Without a recorded turn, tool results always share one user turn (an API rule).
    return m.role == "tool" and prev_key == "tool"


def _loads_args(call: ToolCall) -> Any:
    try:
        return json_loads(call.arguments)
    except ValueError:
        raise InvalidMessageError(
            f"tool call {call.id!r} has arguments that are not JSON; Anthropic's "
            "'tool_use.input' must be an object"
        ) from None


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
