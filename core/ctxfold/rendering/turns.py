"""Turns: the steps of an agent loop, as data a renderer turns into messages.

A :class:`Turn` is one step: the program (or assistant text) the model wrote, the tool
calls it made with their results, the lines it printed, and the error if the step
failed. The agent's ``memory`` (a mapping it keeps between turns) travels beside the
turns. The turn count is ``len(turns)``, whatever number of messages a rendering makes.

:func:`turns_from_messages` reads an OpenAI-style agent history into turns, so a
recorded conversation can be rendered afresh.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..exceptions import InvalidTurnError
from ..messages import Message
from ..validity import SYSTEM_ROLES
from ..wire.openai import as_messages

__all__ = ["ToolUse", "Turn", "as_turns", "turns_from_messages"]


def _text_or_none(value: Any, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise InvalidTurnError(f"{what} must be a string or None, got {type(value).__name__}")


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, Mapping):
        return json.dumps(dict(arguments), ensure_ascii=False, default=repr)
    raise InvalidTurnError(
        f"tool-call arguments must be a mapping or JSON text, got {type(arguments).__name__}"
    )


@dataclass(frozen=True)
class ToolUse:
    """One tool call of a turn and what came back.

    ``arguments`` may be given as a mapping; it is kept as JSON text (as the chat APIs
    carry it). ``result`` is what the tool returned, ``error`` what it raised (either
    may be ``None``: a call still running has neither). ``id`` is the call's id, when
    the API gave one.
    """

    name: str
    arguments: str = "{}"
    result: str | None = None
    error: str | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidTurnError(f"a tool call needs a non-empty name, got {self.name!r}")
        object.__setattr__(self, "arguments", _arguments_text(self.arguments))
        _text_or_none(self.result, "a tool call's result")
        _text_or_none(self.error, "a tool call's error")
        _text_or_none(self.id, "a tool call's id")

    @property
    def failed(self) -> bool:
        """Whether the call raised."""
        return self.error is not None


def _timestamp(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise InvalidTurnError(f"{what} must be a datetime or seconds since the epoch")


def _lines(output: Any) -> tuple[str, ...]:
    if isinstance(output, str):
        return tuple(output.split("\n")) if output else ()
    if isinstance(output, Iterable):
        lines: list[str] = []
        for item in output:
            if not isinstance(item, str):
                raise InvalidTurnError(f"printed output must be strings, got {type(item).__name__}")
            lines.extend(item.split("\n"))
        return tuple(lines)
    raise InvalidTurnError("printed output must be a string or a sequence of lines")


@dataclass(frozen=True)
class Turn:
    """One step of an agent loop.

    Args:
        program: the program the model wrote, or its assistant text.
        tool_calls: the calls it made (:class:`ToolUse`, or dicts with ``name``,
            ``arguments``, ``result``, ``error``, ``id``).
        output: the lines it printed (a string is split into lines).
        error: what went wrong if the turn failed (a traceback, a message).
        started_at, ended_at: when it ran (a ``datetime`` or seconds since the epoch).
    """

    program: str = ""
    tool_calls: tuple[ToolUse, ...] = ()
    output: tuple[str, ...] = ()
    error: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.program, str):
            raise InvalidTurnError(f"program must be a string, got {type(self.program).__name__}")
        calls = []
        for call in self.tool_calls:
            if isinstance(call, Mapping):
                unknown = set(call) - {"name", "arguments", "result", "error", "id"}
                if unknown:
                    raise InvalidTurnError(f"unknown tool-call fields {sorted(unknown)}")
                call = ToolUse(**call)
            elif not isinstance(call, ToolUse):
                raise InvalidTurnError(
                    f"a tool call must be a ToolUse or a dict, got {type(call).__name__}"
                )
            calls.append(call)
        object.__setattr__(self, "tool_calls", tuple(calls))
        object.__setattr__(self, "output", _lines(self.output))
        _text_or_none(self.error, "a turn's error")
        object.__setattr__(self, "started_at", _timestamp(self.started_at, "started_at"))
        object.__setattr__(self, "ended_at", _timestamp(self.ended_at, "ended_at"))

    @property
    def failed(self) -> bool:
        """Whether the turn failed (``error`` is set)."""
        return self.error is not None

    @property
    def duration(self) -> float | None:
        """Seconds the turn took, when both timestamps are known."""
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at


def as_turns(turns: Iterable[Turn | Mapping[str, Any]]) -> tuple[Turn, ...]:
    """Turns from :class:`Turn` objects or dicts of their fields; a bad one raises
    :class:`InvalidTurnError` naming its index."""
    if isinstance(turns, (str, bytes, Mapping)) or not isinstance(turns, Iterable):
        raise InvalidTurnError("turns must be a sequence of Turn objects or dicts")
    out: list[Turn] = []
    for i, t in enumerate(turns):
        try:
            if isinstance(t, Turn):
                out.append(t)
            elif isinstance(t, Mapping):
                out.append(Turn(**t))
            else:
                raise InvalidTurnError(f"a turn must be a Turn or a dict, got {type(t).__name__}")
        except InvalidTurnError as exc:
            raise InvalidTurnError(exc.reason, index=i) from None
        except TypeError as exc:  # an unknown field name
            raise InvalidTurnError(str(exc), index=i) from None
    return tuple(out)


def turns_from_messages(
    messages: Iterable[Message | Mapping[str, Any]],
) -> tuple[list[Turn], dict[str, Any]]:
    """Read an agent history (OpenAI dicts or :class:`Message` objects) into turns.

    The leading system messages become the ``system`` option and the user messages
    before the first assistant message the ``mission``; each assistant message starts a
    turn (its text is the program, its calls the tool calls), the tool results fill
    their calls (``metadata["is_error"]`` marks an error), and user messages after it
    (an environment's observation, a person's reply) are the turn's printed output.

    Returns ``(turns, options)``, where ``options`` holds ``system`` and ``mission``
    ready to pass to a renderer. :class:`ctxfold.FullHistory` renders the turns back
    into the same messages (role, content, calls, ids) when each assistant message is
    followed by its tool results and at most one user message.
    """
    msgs = as_messages(messages)
    i = 0
    system: list[str] = []
    while i < len(msgs) and msgs[i].role in SYSTEM_ROLES:
        system.append(msgs[i].text)
        i += 1
    mission: list[str] = []
    while i < len(msgs) and msgs[i].role == "user":
        mission.append(msgs[i].text)
        i += 1
    turns: list[Turn] = []
    program = ""
    calls: list[ToolUse] = []
    output: list[str] = []
    started = False

    def close() -> None:
        if started:
            turns.append(Turn(program, tuple(calls), tuple(output)))

    for m in msgs[i:]:
        if m.role == "assistant":
            close()
            started = True
            program = m.text
            calls = [ToolUse(c.name, c.arguments, id=c.id) for c in m.tool_calls]
            output = []
        elif m.role == "tool":
            k = next(
                (k for k, c in enumerate(calls) if c.id == m.tool_call_id and c.result is None),
                None,
            )
            if k is None:  # a result no call of this turn asked for: keep it as output
                output.extend(m.text.split("\n"))
                continue
            c = calls[k]
            if m.metadata.get("is_error"):
                calls[k] = ToolUse(c.name, c.arguments, None, m.text, c.id)
            else:
                calls[k] = ToolUse(c.name, c.arguments, m.text, None, c.id)
        else:
            if not started:  # a history that opens without an assistant message
                started = True
            output.extend(m.text.split("\n"))
    close()
    options: dict[str, Any] = {}
    if system:
        options["system"] = system[0] if len(system) == 1 else tuple(system)
    if mission:
        options["mission"] = mission[0] if len(mission) == 1 else tuple(mission)
    return turns, options
