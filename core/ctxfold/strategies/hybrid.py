"""The hybrid strategy: a chain of compressors applied until the budget holds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from ..contract import Compaction, Compressor, Conversation, Strategy
from ..exceptions import BudgetError, ConfigurationError
from ..messages import Message
from ..result import Decision, sources_of
from ..tokens import TokenCounter
from ..units import group_units
from .auto import AutoCompressor
from .base import BaseCompressor
from .options import ReversibleOptions
from .registry import normalize
from .semantic import SemanticCompressor

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["HybridCompressor"]


class HybridCompressor(BaseCompressor):
    """Apply ``steps`` in order, each to the output of the one before, stopping as soon
    as the history fits the budget.

    Every step is any strategy option :func:`ctxfold.normalize` accepts (a name, a
    class, an instance, ``(name, options)`` or a dict). A step other than the last that
    cannot meet the budget alone (raises :class:`~ctxfold.BudgetError`) is skipped, and
    the trace says so. Stats compare the final output with the original input; the
    trace has one decision per original message, from the step that decided last
    (``Decision.step`` names it), and ``stats.savings`` has what each step saved under
    ``step:<name>``.

    Default steps: semantic deduplication (which leaves fitting to the next step), then
    ``auto``.
    """

    name: ClassVar[str] = "hybrid"

    def __init__(
        self, steps: Sequence[Any] | None = None, **options: Unpack[ReversibleOptions]
    ) -> None:
        super().__init__(**options)
        if steps is None:
            chain: list[Compressor] = [SemanticCompressor(fit="none"), AutoCompressor()]
        else:
            if isinstance(steps, (str, bytes, Mapping)) or not isinstance(steps, Sequence):
                raise ConfigurationError(
                    "steps must be a list of strategy options, e.g. ['semantic', 'auto']"
                )
            chain = []
            for k, step in enumerate(steps):
                compressor = normalize(step)
                if compressor is None:
                    raise ConfigurationError(f"step {k} of the chain is disabled ({step!r})")
                chain.append(compressor)
        if not chain:
            raise ConfigurationError("a hybrid chain needs at least one step")
        self.steps: tuple[Compressor, ...] = tuple(chain)

    @property
    def lists_identifiers(self) -> bool:  # type: ignore[override]
        """Whether a step lists the identifiers of what it folds (``auto`` does)."""
        return any(s.lists_identifiers for s in self.steps if isinstance(s, Strategy))

    def compact(self, conv: Conversation) -> Compaction:
        messages, tokens, budget, counter = conv.messages, conv.tokens, conv.budget, conv.counter
        final: list[Decision | None] = [None] * len(messages)
        origin: list[int | None] = list(range(len(messages)))  # current -> original index
        current: list[Message] = list(messages)
        savings: dict[str, int] = {}
        for k, step in enumerate(self.steps):
            if counter.count_messages(current) <= budget:
                break
            last = k == len(self.steps) - 1
            try:
                done = _step(step, current, budget, counter)
            except BudgetError:
                if last:
                    raise
                continue
            label = f"{k}:{step.name}"
            before = counter.count_messages(current)
            savings[f"step:{label}"] = before - counter.count_messages(done.messages)
            for key, value in done.savings.items():
                savings[key] = savings.get(key, 0) + value
            new_origin = [
                None if j is None else origin[j]  # None: a note or summary this step wrote
                for j in sources_of(current, done.messages, done.trace)
            ]
            for d in done.trace:
                src = origin[d.index]
                if src is not None:
                    final[src] = replace(
                        d, index=src, tokens_before=tokens[src], step=f"{self.name}/{label}"
                    )
            origin, current = new_origin, list(done.messages)
        trace = [
            d if d is not None else Decision(i, "kept", "fits_budget", t, t, self.name)
            for i, (d, t) in enumerate(zip(final, tokens, strict=True))
        ]
        return Compaction(current, trace, savings)


def _step(
    step: Compressor, current: list[Message], budget: int, counter: TokenCounter
) -> Compaction:
    """One step of the chain on ``current``, which is over ``budget``: a strategy's
    own compaction (the chain is one call: its hooks fire once, it is made reversible
    once and recalls once, for the whole chain); another compressor's ``compress``."""
    if isinstance(step, BaseCompressor):
        conv = Conversation.of(
            current, budget=budget, counter=counter, grouping=group_units(current)
        )
        return Compaction(*step.compact(conv))
    result = step.compress(current, budget=budget, counter=counter)
    return Compaction(list(result.messages), list(result.trace), result.stats.savings)
