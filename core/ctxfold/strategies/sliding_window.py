"""Sliding window: keep pinned messages and the newest whole units that fit."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..contract import Compaction, Conversation
from ..messages import Message
from ..result import Decision, is_note
from ..units import Unit
from .alternation import alternate
from .base import BaseCompressor, overflow
from .options import SharedOptions, check_count

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["SlidingWindow"]


class SlidingWindow(BaseCompressor):
    """Keep the pinned messages and the newest contiguous run of units that fits.

    Args:
        pin_roles: roles always kept (default: ``system`` and ``developer``).
        keep_first: how many of the oldest other units to keep as well, e.g. ``1``
            keeps the task statement an agent started from.
        overflow: ``"error"`` (default) raises :class:`~ctxfold.BudgetError` when the
            pinned units plus the newest unit cannot fit; ``"best_effort"`` returns
            them anyway, over budget.

    A unit (an assistant message with the results of its tool calls) is never split,
    and the window never skips a unit to fit an older one: the model sees an unbroken
    recent history.
    """

    name: ClassVar[str] = "sliding_window"

    def __init__(self, *, keep_first: int = 0, **options: Unpack[SharedOptions]) -> None:
        super().__init__(**options)
        self.keep_first = check_count("keep_first", keep_first)

    def compact(self, conv: Conversation) -> Compaction:
        messages, tokens, budget = conv.messages, conv.tokens, conv.budget
        reasons: dict[int, str] = {}  # unit start -> why it is kept
        free: list[Unit] = []
        head_left = self.keep_first
        for unit in conv.grouping.units:
            role = messages[unit.start].role
            if len(unit) == 1 and role in self.pin_roles and not is_note(messages[unit.start]):
                reasons[unit.start] = f"pinned:{role}"
            elif head_left:
                head_left -= 1
                reasons[unit.start] = "keep_first"
            else:
                free.append(unit)
        used = conv.overhead + sum(conv.cost(u) for u in conv.grouping.units if u.start in reasons)
        newest = conv.cost(free[-1]) if free else 0
        if used + newest > budget:
            what = "the pinned messages" + (" and the newest unit" if free else "")
            overflow(self.overflow, required=used + newest, budget=budget, what=what)
            if free:
                reasons[free[-1].start] = "window:over_budget"
        else:
            for unit in reversed(free):
                c = conv.cost(unit)
                if used + c > budget:
                    break
                used += c
                reasons[unit.start] = "window"
        kept: list[Message] = []
        trace: list[Decision] = []
        for unit in conv.grouping.units:
            reason = reasons.get(unit.start)
            for i in unit.indices:
                if reason is None:
                    trace.append(Decision(i, "dropped", "outside_window", tokens[i], 0, self.name))
                else:
                    kept.append(messages[i])
                    trace.append(Decision(i, "kept", reason, tokens[i], tokens[i], self.name))
        first = [
            i
            for u in conv.grouping.units
            if reasons.get(u.start) == "keep_first"
            for i in u.indices
        ]
        return alternate(conv, Compaction(kept, trace, {}), self.name, self.overflow, first)
