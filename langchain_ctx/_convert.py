"""LangChain ``BaseMessage`` <-> ``ctxfold.Message``, lossless both ways."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    BaseMessageChunk,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langchain_core.prompt_values import PromptValue

from ctxfold import ContentPart, InvalidMessageError, Message, ToolCall
from ctxfold.formats import Format
from ctxfold.session import frozen
from ctxfold.validity import SYSTEM_ROLES
from ctxfold.wire import Shape, shape_of_list
from ctxfold.wire.anthropic import read_runs
from ctxfold.wire.openai import as_messages

__all__ = ["as_langchain_messages", "from_langchain", "snapshot", "to_langchain"]

_KEY = "langchain"  # metadata key holding what the model does not see
_ROLE_OF = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}


def snapshot(m: BaseMessage) -> tuple[Any, ...]:
    """What a follower knows a LangChain message by: its kind, id and every part the
    model sees, as they are now (an edit in place, or a replacement under the same id,
    gives another snapshot): an AI message's invalid tool calls too, which
    :func:`from_langchain` sends as calls."""
    calls = invalid = call_id = None  # read as from_langchain reads them: a missing
    if isinstance(m, AIMessage):  # attribute costs pydantic an exception per message
        calls, invalid = m.tool_calls or None, m.invalid_tool_calls or None
    elif isinstance(m, ToolMessage):
        call_id = m.tool_call_id
    return (
        m.type,
        m.id,
        m.name,
        frozen(m.content),
        frozen(calls),
        frozen(invalid),
        call_id,
        frozen(m.additional_kwargs or None),
    )


def _content_in(content: str | list[str | dict[str, Any]]) -> str | tuple[ContentPart, ...]:
    if isinstance(content, str):
        return content
    return tuple(
        ContentPart("text", item) if isinstance(item, str) else ContentPart.from_dict(item)
        for item in content
    )


def _content_out(content: Any) -> str | list[str | dict[str, Any]]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return [p.to_dict() for p in content]


def as_langchain_messages(messages: Any) -> list[BaseMessage]:
    """What LangChain accepts as a list of messages, as LangChain messages: message
    objects, chunks (as the message they make), ``(role, text)`` tuples, dicts
    (LangChain's or OpenAI's), strings (a human message), or a prompt value such as a
    ``ChatPromptValue``. Raises :class:`ctxfold.InvalidMessageError` naming the item
    LangChain cannot read."""
    return [m for m in _items(messages, ours=False) if isinstance(m, BaseMessage)]


def _items(messages: Any, *, ours: bool) -> list[BaseMessage | Message]:
    """:func:`as_langchain_messages`; with ``ours``, ctxfold messages pass through."""
    if isinstance(messages, PromptValue):
        return list(messages.to_messages())
    if isinstance(messages, (str, bytes, BaseMessage, Message, Mapping)) or not isinstance(
        messages, Iterable
    ):
        raise InvalidMessageError(
            f"expected a list of messages or a prompt value, got {type(messages).__name__}"
            " (put a single message in a list)"
        )
    out: list[BaseMessage | Message] = []
    messages = _anthropic_read(list(messages))
    for i, item in enumerate(messages):
        if ours and isinstance(item, Message):
            out.append(item)
            continue
        if not isinstance(item, BaseMessage):
            try:
                (item,) = convert_to_messages([item])
            except (ValueError, TypeError, KeyError, NotImplementedError) as exc:
                raise InvalidMessageError(
                    f"LangChain cannot read a {type(item).__name__} as a message: {exc}",
                    index=i,
                ) from None
        out.append(message_chunk_to_message(item) if isinstance(item, BaseMessageChunk) else item)
    return out


def _anthropic_read(items: list[Any]) -> list[Any]:
    """``items`` with Anthropic Messages-API dicts (told by their shape: ``tool_use`` and
    ``tool_result`` blocks, which LangChain's own reading leaves as opaque blocks) as
    LangChain messages with their tool calls and tool messages; the rest as given."""
    if shape_of_list(items) is not Shape.ANTHROPIC:
        return items
    read = read_runs(items)
    return [to_langchain([m])[0] if isinstance(m, Message) else m for m in read]


def from_langchain(messages: Any) -> list[Message]:
    """Convert LangChain messages to :class:`ctxfold.Message` objects.

    Accepts whatever LangChain accepts as messages (see :func:`as_langchain_messages`);
    :class:`ctxfold.Message` objects among them pass through. Tool calls become
    :class:`ctxfold.ToolCall` (arguments as JSON text); fields the model does not read
    (``additional_kwargs``, ``response_metadata``, usage, a tool's ``artifact`` and
    ``status``) are kept in ``metadata["langchain"]`` so :func:`to_langchain` rebuilds
    equal messages.
    """
    out: list[Message] = []
    for i, m in enumerate(_items(messages, ours=True)):
        if isinstance(m, Message):
            out.append(m)
            continue
        kept: dict[str, Any] = {"type": m.type}
        if m.additional_kwargs:
            kept["additional_kwargs"] = copy.deepcopy(m.additional_kwargs)
        if m.response_metadata:
            kept["response_metadata"] = copy.deepcopy(m.response_metadata)
        if isinstance(m, ChatMessage):
            role = m.role if m.role in ("system", "developer", "user", "assistant") else None
            kept["role"] = m.role
        else:
            role = _ROLE_OF.get(m.type)
        if role is None:
            raise InvalidMessageError(
                f"cannot convert a LangChain {type(m).__name__} (type {m.type!r}); use "
                "SystemMessage, HumanMessage, AIMessage or ToolMessage",
                index=i,
            )
        calls: tuple[ToolCall, ...] = ()
        tool_call_id = None
        if isinstance(m, AIMessage):
            calls = tuple(
                ToolCall(
                    id=c["id"] or f"call_{i}_{k}",
                    name=c["name"],
                    arguments=json.dumps(c["args"], ensure_ascii=False),
                )
                for k, c in enumerate(m.tool_calls)
            )
            calls += tuple(
                ToolCall(
                    id=c.get("id") or f"invalid_{i}_{k}",
                    name=c.get("name") or "",
                    arguments=c.get("args") or "",
                )
                for k, c in enumerate(m.invalid_tool_calls)
            )
            if m.invalid_tool_calls:
                kept["invalid_tool_calls"] = copy.deepcopy(m.invalid_tool_calls)
            if any(c["id"] is None for c in m.tool_calls):
                kept["missing_ids"] = [k for k, c in enumerate(m.tool_calls) if c["id"] is None]
            if m.usage_metadata is not None:
                kept["usage_metadata"] = copy.deepcopy(dict(m.usage_metadata))
        elif isinstance(m, ToolMessage):
            tool_call_id = m.tool_call_id
            kept["status"] = m.status
            if m.artifact is not None:
                kept["artifact"] = copy.deepcopy(m.artifact)
        try:
            content = _content_in(m.content)
        except InvalidMessageError as exc:
            raise InvalidMessageError(exc.reason, index=i) from None
        out.append(
            Message(
                role=role,
                content=content,
                name=m.name,
                tool_calls=calls,
                tool_call_id=tool_call_id,
                id=m.id,
                metadata={_KEY: kept},
            )
        )
    return out


def to_langchain(messages: Iterable[Message | Mapping[str, Any]]) -> list[BaseMessage]:
    """Convert :class:`ctxfold.Message` objects (or OpenAI message dicts) to LangChain
    messages.

    Messages that came from :func:`from_langchain` get their LangChain-only fields back;
    any other message gets the natural LangChain type for its role.
    """
    out: list[BaseMessage] = []
    for m in as_messages(messages):
        kept: dict[str, Any] = copy.deepcopy(dict(m.metadata.get(_KEY) or {}))
        common: dict[str, Any] = {
            "content": _content_out(m.content),
            "additional_kwargs": kept.get("additional_kwargs", {}),
            "response_metadata": kept.get("response_metadata", {}),
            "id": m.id,
            "name": m.name,
        }
        if "role" in kept:
            out.append(ChatMessage(role=kept["role"], **common))
        elif m.role in SYSTEM_ROLES:
            out.append(SystemMessage(**common))
        elif m.role == "user":
            out.append(HumanMessage(**common))
        elif m.role == "assistant":
            invalid = list(kept.get("invalid_tool_calls", []))
            invalid_ids = {c.get("id") for c in invalid}
            missing = set(kept.get("missing_ids", []))
            valid: list[dict[str, Any]] = []
            for k, call in enumerate(m.tool_calls):
                if call.id in invalid_ids:
                    continue
                try:
                    args = json.loads(call.arguments)
                except ValueError:
                    args = None
                if not isinstance(args, dict):
                    invalid.append(
                        {
                            "type": "invalid_tool_call",
                            "id": call.id,
                            "name": call.name,
                            "args": call.arguments,
                            "error": "arguments are not a JSON object",
                        }
                    )
                    continue
                valid.append(
                    {
                        "type": "tool_call",
                        "id": None if k in missing else call.id,
                        "name": call.name,
                        "args": args,
                    }
                )
            out.append(
                AIMessage(
                    **common,
                    tool_calls=valid,
                    invalid_tool_calls=invalid,
                    usage_metadata=kept.get("usage_metadata"),
                )
            )
        else:  # tool
            out.append(
                ToolMessage(
                    **common,
                    tool_call_id=m.tool_call_id or "",
                    status=kept.get("status", "success"),
                    artifact=kept.get("artifact"),
                )
            )
    return out


#: LangChain messages as a ctxfold message format: every core entry point reads them
#: and gives them back (declared in the ``ctxfold.formats`` entry points).
LANGCHAIN = Format("langchain", from_langchain, to_langchain)
