"""Anthropic Messages-API messages, read into ctxfold's model and written back.

``tool_use`` blocks become the assistant message's :class:`~ctxfold.messages.ToolCall`
entries, ``tool_result`` blocks ``tool`` messages, so the rest of ctxfold sees one
model; every other block (thinking with its signature, redacted thinking, images,
documents, server tools' blocks) is a :class:`~ctxfold.messages.ContentPart` carried
through byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._json import loads as json_loads
from ..exceptions import InvalidMessageError
from ..messages import (
    ContentPart,
    Message,
    ToolCall,
    content_from_wire,
    content_to_wire,
    dumps,
)
from ..validity import SYSTEM_ROLES

__all__ = ["TURN", "from_anthropic", "read_runs", "to_anthropic"]

#: The ``metadata`` key a message read from an Anthropic turn keeps the turn's index in,
#: so :func:`to_anthropic` puts the messages of one turn back into one.
TURN = "anthropic_turn"


def from_anthropic(
    messages: Iterable[Mapping[str, Any]],
    *,
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> list[Message]:
    """Convert Anthropic Messages-API dicts (and the ``system`` parameter) to messages.

    ``tool_use`` blocks become :class:`ToolCall` entries of the assistant message;
    ``tool_result`` blocks become ``tool`` messages (``is_error`` and ``cache_control``
    kept with them). Each message remembers its Anthropic turn in
    ``metadata['anthropic_turn']`` so :func:`to_anthropic` can rebuild the same turns.
    A leading ``{"role": "system"}`` message is taken as the system parameter. Raises
    :class:`InvalidMessageError` naming the message and the block that is malformed.
    """
    out: list[Message] = []
    if system is not None:
        sys_content = system if isinstance(system, str) else list(system)
        out.append(Message(role="system", content=content_from_wire(sys_content, None)))
    opened = False  # a turn came: a system message after it is no system prompt
    for i, raw in enumerate(messages):
        if not opened and isinstance(raw, Mapping) and raw.get("role") in SYSTEM_ROLES:
            out.append(Message(role=raw["role"], content=content_from_wire(raw.get("content"), i)))
            continue
        opened = True
        if not isinstance(raw, Mapping) or raw.get("role") not in ("user", "assistant"):
            role = raw.get("role") if isinstance(raw, Mapping) else type(raw).__name__
            raise InvalidMessageError(
                f"an Anthropic message needs role 'user' or 'assistant', got {role!r} "
                "(the system prompt goes first, or in system=)",
                index=i,
            )
        out.extend(_turn(raw, i))
    return out


def read_runs(items: Sequence[Any]) -> list[Any]:
    """``items`` with each run of Anthropic dicts among them read into messages
    (:func:`from_anthropic`, an error naming the item by its place in ``items``); every
    other item (a ctxfold or a framework's message) as it is."""
    out: list[Any] = []
    run: list[Mapping[str, Any]] = []
    for at, item in enumerate([*items, None]):
        if isinstance(item, Mapping):
            run.append(item)
            continue
        if run:
            try:
                out.extend(from_anthropic(run))
            except InvalidMessageError as exc:
                where = None if exc.index is None else at - len(run) + exc.index
                raise InvalidMessageError(exc.reason, index=where) from None
            run = []
        if item is not None:
            out.append(item)
    return out


def _turn(raw: Mapping[str, Any], i: int) -> list[Message]:
    """The messages of one Anthropic turn: its tool results, then the turn itself."""
    role = raw["role"]
    content = raw.get("content")
    meta = {TURN: i}
    if isinstance(content, str):
        return [Message(role=role, content=content, metadata=meta)]
    if not isinstance(content, list):
        raise InvalidMessageError("'content' must be a string or a list of blocks", index=i)
    parts: list[ContentPart] = []
    calls: list[ToolCall] = []
    results: list[Message] = []
    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "tool_use":
            calls.append(_tool_use(block, i))
        elif kind == "tool_result":
            results.append(_tool_result(block, i, meta))
        else:
            try:
                parts.append(ContentPart.from_dict(block))
            except InvalidMessageError as exc:
                raise InvalidMessageError(exc.reason, index=i) from None
    out = results
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


def _tool_use(block: Mapping[str, Any], i: int) -> ToolCall:
    call_id, name, args = block.get("id"), block.get("name"), block.get("input", {})
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise InvalidMessageError(
            "a 'tool_use' block needs a string 'id' and 'name' (and an 'input' object)",
            index=i,
        )
    return ToolCall(id=call_id, name=name, arguments=dumps(args))


def _tool_result(block: Mapping[str, Any], i: int, meta: dict[str, Any]) -> Message:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str):
        raise InvalidMessageError(
            "a 'tool_result' block needs the string 'tool_use_id' of the call it answers",
            index=i,
        )
    rest = {k: v for k, v in block.items() if k not in ("type", "tool_use_id", "content")}
    return Message(
        role="tool",
        content=content_from_wire(block.get("content", ""), i),
        tool_call_id=call_id,
        extras=tuple((k, dumps(v)) for k, v in rest.items()),
        metadata=meta,
    )


def to_anthropic(messages: Iterable[Message]) -> tuple[Any, list[dict[str, Any]]]:
    """Convert messages to ``(system, messages)`` for the Anthropic Messages API.

    System and developer messages become the ``system`` parameter (a string, a list of
    blocks, or ``None``). Consecutive tool results are sent in one user turn, as the API
    requires; messages that came from one Anthropic turn go back into one turn.
    """
    system_parts: list[Any] = []
    turns: list[tuple[str, Any, list[dict[str, Any]] | str]] = []
    for m in messages:
        if m.role in SYSTEM_ROLES:
            system_parts.append(content_to_wire(m.content))
            continue
        role = "assistant" if m.role == "assistant" else "user"
        key = m.metadata.get(TURN)
        blocks = _blocks(m)
        if turns and turns[-1][0] == role and _joins(turns[-1][1], key):
            prev = turns[-1][2]
            prev_blocks = [{"type": "text", "text": prev}] if isinstance(prev, str) else prev
            new_blocks = [{"type": "text", "text": blocks}] if isinstance(blocks, str) else blocks
            turns[-1] = (role, turns[-1][1] if key is None else key, prev_blocks + new_blocks)
        else:
            turns.append(
                (role, key if key is not None else ("tool" if m.role == "tool" else None), blocks)
            )
    out = [{"role": role, "content": content} for role, _, content in turns]
    return _system(system_parts), out


def _blocks(m: Message) -> list[dict[str, Any]] | str:
    """One message's content as Anthropic blocks (or its plain text)."""
    if m.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id}
        block["content"] = content_to_wire(m.content)
        for k, v in m.extras:
            block[k] = json.loads(v)
        return [block]
    if isinstance(m.content, str) and not m.tool_calls:
        return m.content
    if isinstance(m.content, str):
        blocks = [{"type": "text", "text": m.content}] if m.content else []
    else:
        blocks = [p.to_dict() for p in m.content or ()]
    return blocks + [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": _loads_args(c)}
        for c in m.tool_calls
    ]


def _system(parts: list[Any]) -> Any:
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(p, str) for p in parts):
        return "\n\n".join(parts)
    return [b for p in parts for b in ([{"type": "text", "text": p}] if isinstance(p, str) else p)]


def _joins(prev_key: Any, key: Any) -> bool:
    """Whether a message of turn ``key`` joins the previous turn (``prev_key``), of its
    role: always, but where the two
    were turns side by side in the Anthropic input (kept apart, as given). Two turns of
    one role that a compression brought together (a tool result and the next user
    message, a note and the task) become one, as strict APIs need turns to alternate."""
    if key is not None and prev_key == key:
        return True
    apart = isinstance(key, int) and isinstance(prev_key, int) and key == prev_key + 1
    return not apart


def _loads_args(call: ToolCall) -> Any:
    try:
        return json_loads(call.arguments)
    except ValueError:
        raise InvalidMessageError(
            f"tool call {call.id!r} has arguments that are not JSON; Anthropic's "
            "'tool_use.input' must be an object"
        ) from None
