"""One call of an entry point: opened (announced, the models' usage counted, the
collector paused) and finished (the stats filled, the result announced), in one place
for ``compress`` and a session's render alike."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .._state import collector_paused
from ..hooks import completed, emit
from ..models.usage import run_usage
from ..result import CompressionResult, CompressionStats, Trace
from ..tokens import TokenCounter
from .source import View

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

    def finished(self, view: View) -> CompressionResult:
        """The result of the call, ``view`` as the source gives it, announced (the
        output counted here when the view does not know its count)."""
        out = view.messages
        after = self.counter.count_messages(out) if view.tokens is None else view.tokens
        stats = CompressionStats(
            strategy=self.strategy,
            counter=self.counter.name,
            budget=self.budget,
            tokens_before=self.tokens_before,
            tokens_after=after,
            messages_before=self.messages_before,
            messages_after=len(out),
            elapsed_ms=(time.perf_counter() - self.started) * 1000.0,
            savings=dict(view.savings),
            usage=dict(self.usage),
        )
        result = CompressionResult(
            messages=tuple(out),
            stats=stats,
            trace=view.trace.copy() if isinstance(view.trace, Trace) else tuple(view.trace),
            strategy=self.strategy,
            warnings=view.warnings,
            round_id=view.round_id,
            given=view.given,
            store=view.store,
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
