"""Sliding window: keep pinned messages and the newest whole units that fit."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from ._compressor import BaseCompressor, Overflow, check_choice, check_roles, overflow
from ._messages import Message
from ._result import Decision, is_note
from ._tokens import TokenCounter
from ._units import Grouping, Unit
from .exceptions import ConfigurationError

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

    def __init__(
        self,
        *,
        pin_roles: Iterable[str] = ("system", "developer"),
        keep_first: int = 0,
        overflow: Overflow = "error",
        reversible: bool = False,
        store: Any = None,
        reference_share: float = 0.1,
        max_references: int | None = 200,
    ) -> None:
        self.pin_roles = check_roles("pin_roles", pin_roles)
        if isinstance(keep_first, bool) or not isinstance(keep_first, int) or keep_first < 0:
            raise ConfigurationError(f"keep_first must be an integer >= 0, got {keep_first!r}")
        self.keep_first = keep_first
        check_choice("overflow", overflow, ("error", "best_effort"))
        self.overflow: Overflow = overflow
        self.set_reversible(
            reversible,
            store=store,
            reference_share=reference_share,
            max_references=max_references,
        )

    def _compress(
        self,
        messages: list[Message],
        *,
        budget: int,
        counter: TokenCounter,
        grouping: Grouping,
    ) -> tuple[Sequence[Message], list[Decision], Mapping[str, int]]:
        tokens = [counter.count_message(m) for m in messages]
        base = counter.count_messages([])  # per-conversation overhead

        def cost(unit: Unit) -> int:
            return sum(tokens[i] for i in unit.indices)

        reasons: dict[int, str] = {}  # unit start -> why it is kept
        free: list[Unit] = []
        head_left = self.keep_first
        for unit in grouping.units:
            role = messages[unit.start].role
            if len(unit) == 1 and role in self.pin_roles and not is_note(messages[unit.start]):
                reasons[unit.start] = f"pinned:{role}"
            elif head_left:
                head_left -= 1
                reasons[unit.start] = "keep_first"
            else:
                free.append(unit)
        used = base + sum(cost(u) for u in grouping.units if u.start in reasons)
        newest = cost(free[-1]) if free else 0
        if used + newest > budget:
            what = "the pinned messages" + (" and the newest unit" if free else "")
            overflow(self.overflow, required=used + newest, budget=budget, what=what)
            if free:
                reasons[free[-1].start] = "window:over_budget"
        else:
            for unit in reversed(free):
                c = cost(unit)
                if used + c > budget:
                    break
                used += c
                reasons[unit.start] = "window"

        kept: list[Message] = []
        trace: list[Decision] = []
        for unit in grouping.units:
            reason = reasons.get(unit.start)
            for i in unit.indices:
                if reason is None:
                    trace.append(Decision(i, "dropped", "outside_window", tokens[i], 0, self.name))
                else:
                    kept.append(messages[i])
                    trace.append(Decision(i, "kept", reason, tokens[i], tokens[i], self.name))
        return kept, trace, {}
