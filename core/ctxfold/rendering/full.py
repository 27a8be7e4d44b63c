"""The full-history renderer: the turns as the ordinary chat history."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ..messages import Message, ToolCall
from ..tokens import get_counter
from .base import _COMMON, BaseRenderer, RenderStats, _paragraphs
from .turns import Turn

__all__ = ["FullHistory"]

# ------------------------------------------------------------------ full history


class FullHistory(BaseRenderer):
    """The turns as an ordinary chat history: the system and mission messages, then per
    turn the assistant message (program and calls), a tool message per answered call,
    and one user message with the printed lines and the error, if any.

    ``memory`` is not rendered (the turns' output shows what the agent printed of it).
    Of a history read by :func:`turns_from_messages`, this gives the messages back.
    """

    label = "full_history"
    DEFAULTS = MappingProxyType({"system": None, "mission": "", "counter": "o200k_base"})
    CHECKS = MappingProxyType(dict(_COMMON))

    def _render(
        self, turns: tuple[Turn, ...], memory: Mapping[str, Any], opts: dict[str, Any]
    ) -> tuple[list[Message], RenderStats]:
        out = [Message("system", s) for s in _paragraphs(opts["system"])]
        out += [Message("user", s) for s in _paragraphs(opts["mission"]) if s]
        calls = lines = 0
        for t, turn in enumerate(turns, 1):
            ids = [c.id or f"call_{t}_{k}" for k, c in enumerate(turn.tool_calls, 1)]
            out.append(
                Message(
                    "assistant",
                    turn.program,
                    tool_calls=tuple(
                        ToolCall(i, c.name, c.arguments)
                        for i, c in zip(ids, turn.tool_calls, strict=True)
                    ),
                )
            )
            for i, c in zip(ids, turn.tool_calls, strict=True):
                if c.result is not None:
                    out.append(Message("tool", c.result, tool_call_id=i))
                elif c.error is not None:
                    out.append(
                        Message("tool", c.error, tool_call_id=i, metadata={"is_error": True})
                    )
            said = "\n".join(turn.output) if turn.output else ""
            if turn.error is not None:
                said = f"{said}\n\nError:\n{turn.error}" if said else f"Error:\n{turn.error}"
            if turn.output or turn.error is not None:
                out.append(Message("user", said))
            calls += len(turn.tool_calls)
            lines += len(turn.output)
        counter = get_counter(opts["counter"])
        return out, RenderStats(
            self.label,
            len(turns),
            len(out),
            counter.count_messages(out),
            calls,
            calls,
            lines,
            lines,
        )
