"""The stages every entry point runs, in one order: ``compress`` on a history it is
given, :meth:`ctxfold.Session.render` on the state a session keeps between calls.

1. :func:`opened`: announce the call (``compaction_started``) and count what the
   models it calls cost;
2. the entry point resolves the query and plans its room (``compress``: the budget
   less what the query's passages want; a cache-stable session: its low-water mark,
   recall taking only the room the view leaves free), then compacts reversibly;
3. :func:`recalled`: the passages the query recalls, in the room left;
4. :meth:`Call.finished`: the stats (savings of the compaction, usage of the models) and
   the result, announced to the logger and the ``compaction_completed`` hooks.

One place fills the stats and emits the hooks, so a session render is observed
exactly as a ``compress`` call is.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from .formats import CTXFOLD, MessageFormat
from .hooks import completed, emit
from .messages import Message
from .models.usage import run_usage
from .recall import RecallIndex, recall
from .result import CompressionResult, CompressionStats, Decision
from .storage.store import VerbatimStore
from .tokens import TokenCounter

__all__ = ["Call", "opened", "recalled"]


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
            trace=tuple(trace),
            strategy=self.strategy,
            warnings=warnings,
            round_id=round_id,
            given=given,
        )
        completed(result)
        return result


@contextmanager
def opened(
    strategy: str, counter: TokenCounter, *, budget: int, messages: int, tokens: int
) -> Iterator[Call]:
    """Open a call: announce it, and count the models' usage until it is finished."""
    call = Call(strategy, counter, budget, messages, tokens)
    emit("compaction_started", strategy=strategy, messages=messages, tokens=tokens, budget=budget)
    with run_usage() as usage:
        call.usage = usage
        yield call


def recalled(
    out: Sequence[Message],
    trace: Sequence[Decision],
    history: Sequence[Message],
    index: RecallIndex,
    query: str,
    *,
    until: int,
    room: int,
    counter: TokenCounter,
    store: VerbatimStore | None,
) -> tuple[list[Message], list[Decision]] | None:
    """``out`` with the passages of ``history[:until]`` that ``query`` recalls, in
    what ``out`` leaves of ``room`` tokens, and ``trace`` with the messages it quotes
    flagged; ``None`` when nothing is recalled."""
    found = recall(
        out, history, index, query, until=until, budget=room, counter=counter, store=store
    )
    if found is None:
        return None
    return found.messages, found.flag(trace)
