"""OpenAI's chat-completions wire format: message dicts read into :class:`Message`
objects, checked, and written back losslessly (keys ctxfold does not interpret kept
in ``Message.extras``). A message's own dict form is :meth:`Message.to_openai`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..exceptions import InvalidMessageError
from ..messages import NO_CONTENT, ROLES, Message, ToolCall, content_from_wire, dumps
from ..validity import check_tool_structure

__all__ = ["as_messages", "from_openai", "to_openai"]

_OPENAI_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "id"})


def to_openai(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Convert messages to OpenAI chat-completions dicts (the inverse of :func:`from_openai`)."""
    return [m.to_openai() for m in messages]


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
