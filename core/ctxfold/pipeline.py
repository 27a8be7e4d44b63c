"""The stages every entry point runs, in one order: ``compress`` on a history it is
given, :meth:`ctxfold.Session.render` on the state a session keeps between calls.

1. :func:`opened`: announce the call (``compaction_started``) and count what the
   models it calls cost;
2. the entry point resolves the query and plans its room; :func:`compact_into`
   compacts reversibly into the budget less what the query's passages want (``compress``
   and a session that is not cache-stable; a cache-stable session compacts to its
   low-water mark and wants nothing: recall takes only the room the view leaves free);
3. :func:`recalled`: the passages the query recalls, in the room left
   (:func:`recall_room`);
4. :meth:`Call.finished`: the stats (savings of the compaction, usage of the models) and
   the result, announced to the logger and the ``compaction_completed`` hooks.

One place fills the stats and emits the hooks, so a session render is observed
exactly as a ``compress`` call is; one place plans the room, so a session that is not
cache-stable renders what ``compress`` returns for the same history.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, overload

from ._state import collector_paused
from .exceptions import BudgetError
from .formats import CTXFOLD, MessageFormat
from .hooks import completed, emit
from .messages import Message
from .models.usage import run_usage
from .recall import RecallIndex, recall
from .result import CompressionResult, CompressionStats, Decision, Trace
from .storage.store import VerbatimStore
from .tokens import TokenCounter

__all__ = ["Call", "compact_into", "opened", "recall_room", "recalled"]

T = TypeVar("T")


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
) -> tuple[list[Message], Sequence[Decision]] | None:
    """``out`` with the passages of ``history[:until]`` that ``query`` recalls, in
    what ``out`` leaves of ``room`` tokens, and ``trace`` with the messages it quotes
    flagged; ``None`` when nothing is recalled."""
    found = recall(
        out, history, index, query, until=until, budget=room, counter=counter, store=store
    )
    if found is None:
        return None
    return found.messages, found.flag(trace)


@overload
def compact_into(
    compact: Callable[[int], T], budget: int, want: int, *, fits: Literal[False] = False
) -> T: ...


@overload
def compact_into(
    compact: Callable[[int], T], budget: int, want: int, *, fits: bool
) -> T | None: ...


def compact_into(
    compact: Callable[[int], T], budget: int, want: int, *, fits: bool = False
) -> T | None:
    """``compact(room)`` at the budget less the ``want`` tokens a query's passages
    want, at the budget less half of them when what must be kept needs more, then at
    the whole budget (the passages take what is left): the first that fits. Only the
    last try's :class:`ctxfold.BudgetError` is raised. ``fits``: what is there fits
    the budget already, so the whole budget is not tried (``None`` when no other
    room fits)."""
    # The whole budget is always the last try (never an empty list to index).
    rooms = [r for r in dict.fromkeys((budget - want, budget - want // 2)) if 0 < r < budget]
    rooms.append(budget)
    for room in rooms[:-1]:
        with contextlib.suppress(BudgetError):
            return compact(room)
    return None if fits else compact(rooms[-1])


def recall_room(budget: int, view: int, share: float) -> int:
    """The tokens a view of ``view`` tokens and its recall block may fill together:
    the block takes at most ``share`` of the budget, and never more than is left."""
    return min(budget, view + int(share * budget))
