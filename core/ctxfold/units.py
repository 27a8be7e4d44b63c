"""Grouping messages into units that a compressor keeps or drops whole."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .messages import Message
from .result import is_note

__all__ = ["Grouping", "Unit", "group_units"]


@dataclass(frozen=True)
class Unit:
    """A run of messages ``messages[start:end]`` that is never split.

    An assistant message that calls tools forms one unit with the results that answer
    its calls (and anything between them); every other message is a unit of its own.
    ``kind`` is the first message's role, or ``"tool_exchange"`` for a call with its
    results, or ``"orphan_result"`` for a tool result whose call is not in the history.
    """

    start: int
    end: int
    kind: str

    @property
    def indices(self) -> range:
        """The message indexes of this unit."""
        return range(self.start, self.end)

    def __len__(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Grouping:
    """Units of a history, and what is irregular about its tool calls.

    ``dangling_calls`` are ``(message index, call id)`` pairs whose call has no result;
    ``orphan_results`` are indexes of tool messages whose call is not in the history.
    Both occur in real histories (an agent cut off mid-call, a trimmed prefix) and are
    carried through, not repaired.
    """

    units: tuple[Unit, ...]
    dangling_calls: tuple[tuple[int, str], ...]
    orphan_results: tuple[int, ...]

    def warnings(self) -> tuple[str, ...]:
        """Readable notes on the irregularities, for results and logs."""
        notes = [f"message {i}: tool call {cid!r} has no result" for i, cid in self.dangling_calls]
        notes += [f"message {i}: tool result answers no earlier call" for i in self.orphan_results]
        return tuple(notes)


def group_units(messages: Sequence[Message]) -> Grouping:
    """Group ``messages`` into units; see :class:`Unit`. Runs in linear time."""
    n = len(messages)
    reach = list(range(n))  # reach[i]: last index that must share a unit with message i
    open_calls: dict[str, int] = {}  # call id -> index of the latest assistant making it
    answered: set[tuple[int, str]] = set()
    orphans: list[int] = []
    for i, m in enumerate(messages):
        if m.role == "assistant":
            for call in m.tool_calls:
                open_calls[call.id] = i
        elif m.role == "tool" and m.tool_call_id is not None:
            owner = open_calls.get(m.tool_call_id)
            if owner is None:
                orphans.append(i)
            else:
                answered.add((owner, m.tool_call_id))
                reach[owner] = max(reach[owner], i)
    orphan_set = set(orphans)
    units: list[Unit] = []
    start = 0
    while start < n:
        end = reach[start]
        j = start
        while j <= end:
            end = max(end, reach[j])
            j += 1
        span = messages[start : end + 1]
        if end > start:
            kind = "tool_exchange"
        elif start in orphan_set:
            kind = "orphan_result"
        else:
            kind = span[0].role
        units.append(Unit(start, end + 1, kind))
        start = end + 1
    dangling = tuple(
        (i, c.id)
        for i, m in enumerate(messages)
        if m.role == "assistant"
        for c in m.tool_calls
        if (i, c.id) not in answered
    )
    return Grouping(tuple(units), dangling, tuple(orphans))


def split_pinned(
    messages: Sequence[Message], grouping: Grouping, pin_roles: Sequence[str]
) -> tuple[list[int], list[Unit]]:
    """Indices of pinned one-message units, and the other units in order. A note an
    earlier round wrote is never pinned: fed back in, it is the oldest history."""
    pinned: list[int] = []
    free: list[Unit] = []
    for u in grouping.units:
        m = messages[u.start]
        if len(u) == 1 and m.role in pin_roles and not is_note(m):
            pinned.append(u.start)
        else:
            free.append(u)
    return pinned, free


def newest_units(
    free: Sequence[Unit], tokens: Sequence[int], limit: float, *, cap: float
) -> set[int]:
    """Starts of the newest whole units whose tokens fit ``limit``; the newest unit
    alone may take up to twice the limit (never more than ``cap``)."""
    kept: set[int] = set()
    used = 0
    for k, u in enumerate(reversed(free)):
        cost = sum(tokens[i] for i in u.indices)
        if used + cost > (limit if k else min(2 * limit, cap)):
            break
        kept.add(u.start)
        used += cost
    return kept
