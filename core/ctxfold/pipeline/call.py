"""One call of an entry point: opened (announced, the models' usage counted, the
collector paused) and finished (the stats filled, the result announced), in one place
for ``compress`` and a session's render alike."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .._state import collector_paused
from ..formats import CTXFOLD, MessageFormat
from ..hooks import completed, emit
from ..messages import Message
from ..models.usage import run_usage
from ..result import CompressionResult, CompressionStats, Decision, Trace
from ..tokens import TokenCounter

__all__ = ["Call", "opened"]


@dataclass
class Call:
    """One call of an entry point, opened by :func:`opened`: what it started from."""

    strategy: str
    counter: TokenCounter
    budget: int
    messages_before: int
    tokens_before: int
    started: float = field(default_factory=time.perf_counter)
    usage: Counter[str] = field(default_factory=Counter)

    def finished(
        self,
        out: Sequence[Message],
        trace: Sequence[Decision],
        *,
        tokens_after: int | None = None,
        savings: Mapping[str, int] | None = None,
        round_id: str | None = None,
        given: MessageFormat = CTXFOLD,
        warnings: tuple[str, ...] = (),
        store: Any = None,
    ) -> CompressionResult:
        """The result of the call, announced (``tokens_after``: the output's count
        when the caller knows it, else counted here)."""
        after = self.counter.count_messages(out) if tokens_after is None else tokens_after
        stats = CompressionStats(
            strategy=self.strategy,
            counter=self.counter.name,
            budget=self.budget,
            tokens_before=self.tokens_before,
            tokens_after=after,
            messages_before=self.messages_before,
            messages_after=len(out),
            elapsed_ms=(time.perf_counter() - self.started) * 1000.0,
            savings=dict(savings or {}),
            usage=dict(self.usage),
        )
        result = CompressionResult(
            messages=tuple(out),
            stats=stats,
            trace=trace.copy() if isinstance(trace, Trace) else tuple(trace),
            strategy=self.strategy,
            warnings=warnings,
            round_id=round_id,
            given=given,
            store=store,
        )
        completed(result)
        return result


@contextmanager
def opened(
    strategy: str, counter: TokenCounter, *, budget: int, messages: int, tokens: int
) -> Iterator[Call]:
    """Open a call: announce it, and count the models' usage until it is finished
    (the garbage collector paused meanwhile: see :func:`ctxfold.pause_gc`)."""
    call = Call(strategy, counter, budget, messages, tokens)
    emit("compaction_started", strategy=strategy, messages=messages, tokens=tokens, budget=budget)
    with run_usage() as usage, collector_paused():
        call.usage = usage
        yield call
