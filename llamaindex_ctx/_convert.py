"""LlamaIndex ``ChatMessage`` <-> ``ctxfold.Message``, lossless both ways."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from pydantic import ValidationError

from ctxfold import ContentPart, InvalidMessageError, Message, ToolCall
from ctxfold.formats import Format
from ctxfold.messages import dumps
from ctxfold.session import frozen
from ctxfold.wire.openai import as_messages

__all__ = ["from_llamaindex", "snapshot", "to_llamaindex"]

_KEY = "llamaindex"  # metadata key holding what the model does not see
_ROLE_OF = {
    "system": "system",
    "developer": "developer",
    "user": "user",
    "assistant": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}


def _call_from_kwargs(raw: Any) -> ToolCall:
    """An OpenAI-style tool call, as a dict or as the OpenAI SDK's object."""
    if isinstance(raw, Mapping):
        fn = raw.get("function") or {}
        call_id, name, args = raw.get("id"), fn.get("name"), fn.get("arguments", "{}")
    else:
        call_id, name, args = raw.id, raw.function.name, raw.function.arguments
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    return ToolCall(id=str(call_id), name=str(name), arguments=args)


def snapshot(m: ChatMessage) -> Any:
    """What a follower knows a LlamaIndex message by, as it is now (an edit in place
    gives another snapshot): its role, text and extra fields; a message with other
    blocks than text (images, tool calls), the fingerprint of its conversion."""
    texts = tuple(b.text for b in m.blocks if isinstance(b, TextBlock))
    if len(texts) == len(m.blocks):
        return (str(m.role), texts, frozen(m.additional_kwargs or None))
    return from_llamaindex([m])[0].fingerprint


def from_llamaindex(messages: Iterable[ChatMessage]) -> list[Message]:
    """Convert LlamaIndex ``ChatMessage`` objects to :class:`ctxfold.Message` objects.

    Tool calls are read from ``ToolCallBlock`` blocks and from OpenAI-style
    ``additional_kwargs["tool_calls"]``; a tool result's ``tool_call_id`` from
    ``additional_kwargs``. Other blocks (images, audio, thinking) are carried through.
    What the model does not read is kept in ``metadata["llamaindex"]`` so
    :func:`to_llamaindex` rebuilds equal messages. (LlamaIndex holds tool arguments
    parsed, so arguments that came as JSON text keep their value, not their spacing.)
    """
    out: list[Message] = []
    for i, m in enumerate(messages):
        if not isinstance(m, ChatMessage):
            raise InvalidMessageError(
                f"expected a LlamaIndex ChatMessage, got {type(m).__name__}", index=i
            )
        role_name = m.role.value if isinstance(m.role, MessageRole) else str(m.role)
        role = _ROLE_OF.get(role_name)
        if role is None:
            raise InvalidMessageError(f"cannot convert LlamaIndex role {role_name!r}", index=i)
        kwargs = copy.deepcopy(dict(m.additional_kwargs))
        kept: dict[str, Any] = {"role": role_name, "layout": []}
        parts: list[ContentPart] = []
        calls: list[ToolCall] = []
        for k, block in enumerate(m.blocks):
            if isinstance(block, TextBlock):
                parts.append(ContentPart("text", block.text))
                kept["layout"].append("text")
            elif isinstance(block, ToolCallBlock):
                args = block.tool_kwargs
                calls.append(
                    ToolCall(
                        id=block.tool_call_id or f"call_{i}_{k}",
                        name=block.tool_name,
                        arguments=args
                        if isinstance(args, str)
                        else json.dumps(args, ensure_ascii=False),
                    )
                )
                kept["layout"].append("tool_call" if block.tool_call_id else "tool_call:no_id")
            elif isinstance(block, ThinkingBlock):
                parts.append(_thinking_in(block, kept))
                kept["layout"].append("thinking")
            else:
                dumped = block.model_dump(mode="json")
                kind = dumped.pop("block_type")
                parts.append(ContentPart(kind, extra=json.dumps(dumped, ensure_ascii=False)))
                kept["layout"].append("other")
        raw_calls = kwargs.pop("tool_calls", None)
        if raw_calls:
            calls.extend(_call_from_kwargs(c) for c in raw_calls)
            kept["kwargs_tool_calls"] = True
        tool_call_id = kwargs.pop("tool_call_id", None) if role == "tool" else None
        name = kwargs.pop("name", None)
        if kwargs:
            kept["additional_kwargs"] = kwargs
        content: str | tuple[ContentPart, ...]
        if len(parts) == 1 and parts[0].type == "text":
            content = parts[0].text or ""
        else:
            content = tuple(parts)
        out.append(
            Message(
                role=role,
                content=content,
                name=name if isinstance(name, str) else None,
                tool_calls=tuple(calls),
                tool_call_id=tool_call_id,
                metadata={_KEY: kept},
            )
        )
    return out


def to_llamaindex(messages: Iterable[Message | Mapping[str, Any]]) -> list[ChatMessage]:
    """Convert :class:`ctxfold.Message` objects (or OpenAI message dicts) to LlamaIndex
    ``ChatMessage`` objects.

    Tool calls become ``ToolCallBlock`` blocks (LlamaIndex 0.14's form) unless the
    message came with OpenAI-style ``additional_kwargs["tool_calls"]``; a tool result
    carries ``additional_kwargs["tool_call_id"]``, as LlamaIndex's agents write it.
    """
    out: list[ChatMessage] = []
    for m in as_messages(messages):
        kept: dict[str, Any] = copy.deepcopy(dict(m.metadata.get(_KEY) or {}))
        kwargs: dict[str, Any] = kept.get("additional_kwargs", {})
        if m.name is not None:
            kwargs["name"] = m.name
        if m.tool_call_id is not None:
            kwargs["tool_call_id"] = m.tool_call_id
        blocks: list[Any] = []
        if isinstance(m.content, str):
            if m.content or not m.tool_calls or "text" in kept.get("layout", ["text"]):
                blocks.append(TextBlock(text=m.content))
        else:
            thoughts = iter(kept.get("thinking", ()))
            for p in m.content or ():
                if p.type == "text" and p.text is not None:
                    blocks.append(TextBlock(text=p.text))
                elif p.type == "thinking":
                    blocks.append(_thinking_out(p, next(thoughts, None)))
                else:
                    blocks.append(_block_out(p))
        if kept.get("kwargs_tool_calls"):
            kwargs["tool_calls"] = [c.to_openai() for c in m.tool_calls]
        else:
            no_id = [
                x == "tool_call:no_id" for x in kept.get("layout", []) if x.startswith("tool_call")
            ]
            for k, c in enumerate(m.tool_calls):
                try:
                    args: Any = json.loads(c.arguments)
                except ValueError:
                    args = c.arguments
                missing = no_id[k] if k < len(no_id) else False
                blocks.append(
                    ToolCallBlock(
                        tool_call_id=None if missing else c.id, tool_name=c.name, tool_kwargs=args
                    )
                )
        role = kept.get("role", m.role)
        out.append(ChatMessage(role=role, blocks=blocks, additional_kwargs=kwargs))
    return out


def _thinking_in(block: ThinkingBlock, kept: dict[str, Any]) -> ContentPart:
    """A ``ThinkingBlock`` as the provider's thinking part (its text under
    ``thinking``, its ``additional_information``, a signature, beside it, as
    LlamaIndex's Anthropic integration writes it), so it is counted and sent as it is;
    what only LlamaIndex holds (``num_tokens``, a ``type`` key) kept in ``kept``."""
    info = dict(block.additional_information or {})
    typed = info.pop("type", None) == "thinking"
    kept.setdefault("thinking", []).append({"typed": typed, "num_tokens": block.num_tokens})
    return ContentPart("thinking", extra=dumps({"thinking": block.content or "", **info}))


def _thinking_out(part: ContentPart, kept: Mapping[str, Any] | None) -> ThinkingBlock:
    """The inverse of :func:`_thinking_in` (a part read from elsewhere, an Anthropic
    block: typed, as LlamaIndex's Anthropic integration writes it)."""
    data = part.data
    text = data.pop("thinking", None)
    typed = True if kept is None else kept.get("typed", True)
    info = {**({"type": "thinking"} if typed else {}), **data}
    tokens = None if kept is None else kept.get("num_tokens")
    return ThinkingBlock(content=text, num_tokens=tokens, additional_information=info)


def _block_out(part: ContentPart) -> Any:
    """Any other part as the LlamaIndex block of its type; a typed error for a part
    LlamaIndex has no block for (Anthropic's redacted thinking, say)."""
    try:
        return ChatMessage(blocks=[{"block_type": part.type, **part.data}]).blocks[0]
    except ValidationError:
        raise InvalidMessageError(
            f"LlamaIndex has no block for a {part.type!r} part; compress these messages "
            "in their own format (OpenAI or Anthropic dicts) instead"
        ) from None


#: LlamaIndex messages as a ctxfold message format: every core entry point reads them
#: and gives them back (declared in the ``ctxfold.formats`` entry points).
LLAMAINDEX = Format("llamaindex", from_llamaindex, to_llamaindex)
