"""The newest unit of a history: where an agent is, so every strategy shows it.

It is shown whole whenever it fits the room the pinned messages and the note's minimum
leave (:func:`shown_newest`, the one rule ``auto`` and ``summarize`` follow). Only when
it alone is over that room are its messages cut in place (the content by the engine's
exact-fit shortening, then the longest string arguments of its calls, the JSON kept
valid), to :data:`CUT_SHARE` of the room, rather than folded into a note."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

from .._json import loads as json_loads
from ..contract import Conversation
from ..messages import Message, ToolCall
from ..text.shortening import shorten
from ..tokens import TokenCounter
from ..units import Unit

__all__ = [
    "CUT_SHARE",
    "MIN_ARGUMENT_CUT",
    "SHORTENED",
    "cut_in_place",
    "shown_newest",
]

#: The trace reason of a message of the newest unit cut in place.
SHORTENED = "shortened:newest"
#: Tokens: a shorter string argument of the newest call is left whole.
MIN_ARGUMENT_CUT = 8
#: The share of the room a newest unit over it is cut to. Cut, it has lost content
#: anyway; the rest keeps the note's task and identifiers of the older history, which a
#: session carries from one compaction to the next (cut to the whole room instead, a
#: session over the SWE-agent runs at 25% budgets kept 59% of their identifiers in its
#: last render, against 93%).
CUT_SHARE = 0.6


def shown_newest(
    conv: Conversation, free: Sequence[Unit], room: int, head: int, carried: int = 0
) -> dict[int, Message]:
    """The messages of the newest unit (``free[-1]``) as a strategy shows them: none
    cut when the unit fits ``room`` (what the pinned messages leave) less the note's
    minimum, its ``head`` and what it ``carried`` from earlier notes, nor when it is
    within :data:`CUT_SHARE` of the room less the head (what the note carried then
    gives way); else cut in place to that share. (With nothing older, the
    head is room a reversible round's marks take: cut to all of the room, a round's
    marks pushed its output over a budget the system prompt nearly fills, and the
    round could not be made to fit.)"""
    newest = free[-1]
    if conv.cost(newest) <= room - head - carried:
        return {}
    return cut_in_place(conv, newest, int(CUT_SHARE * (room - head)))


def cut_in_place(conv: Conversation, unit: Unit, target: int) -> dict[int, Message]:
    """The messages of ``unit`` (the newest) shortened in place, the largest first, by
    the engine's exact-fit shortening (the identifiers of what it cuts listed), until
    the unit costs at most ``target``; none when it costs no more."""
    counter = conv.counter
    excess = conv.cost(unit) - target
    if target <= 0 or excess <= 0:
        return {}
    goal = conv.user_task()  # the lines naming what the task names stay
    out: dict[int, Message] = {}
    for i in sorted(unit.indices, key=lambda k: (-conv.tokens[k], k)):
        m = conv.messages[i]
        if excess <= 0:
            break
        new = m
        if isinstance(m.content, str) and m.content:
            keep = max(counter.count_text(m.content) - excess, 1)
            new = replace(m, content=shorten(m.content, keep, counter, goal=goal))
        left = excess - (conv.tokens[i] - counter.count_message(new))
        if left > 0 and m.tool_calls:  # then the calls' longest string arguments
            new = replace(new, tool_calls=_cut_calls(new.tool_calls, left, counter))
        saved = conv.tokens[i] - counter.count_message(new)
        if saved > 0:
            out[i] = new
            excess -= saved
    return out


def _cut_calls(
    calls: Sequence[ToolCall], excess: int, counter: TokenCounter
) -> tuple[ToolCall, ...]:
    """``calls`` with their longest string arguments shortened (the JSON kept valid,
    each cut marked) by about ``excess`` tokens; a call whose arguments are not a JSON
    object stays as it is."""
    out: list[ToolCall] = []
    for call in calls:
        try:
            args = json_loads(call.arguments)
        except ValueError:
            args = None
        if not isinstance(args, dict) or excess <= 0:
            out.append(call)
            continue
        for key in sorted(
            (k for k, v in args.items() if isinstance(v, str)), key=lambda k: -len(args[k])
        ):
            n = counter.count_text(args[key])
            if excess <= 0 or n < MIN_ARGUMENT_CUT:
                break
            args[key] = shorten(args[key], max(n - excess, MIN_ARGUMENT_CUT // 2), counter)
            excess -= n - counter.count_text(args[key])
        text = json.dumps(args, ensure_ascii=False)  # as the wrappers write arguments
        out.append(replace(call, arguments=text) if len(text) < len(call.arguments) else call)
    return tuple(out)
