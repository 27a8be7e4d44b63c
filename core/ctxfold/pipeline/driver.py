"""The driver: every call, ``compress`` or a session's render, runs these stages in
this order, here and nowhere else.

1. open the call (:func:`.call.opened`: ``compaction_started``, the models' usage
   counted);
2. the recall share and the query (:func:`ctxfold.recall.resolve_query`; none when
   the share is 0);
3. the source's :class:`~.source.Plan`: whether it compacts, and the room the query's
   passages want;
4. compact into the budget less that room, then less half of it, then the whole
   budget (:func:`compact_into`);
5. the source's :class:`~.source.View`;
6. recall: the passages of what the view folded that the query finds, in the room
   the view leaves (at most the share of the budget, :func:`recall_room`);
7. the source's last word (:meth:`~.source.Source.closed`), then the stats and the
   result, announced (``compaction_completed``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Literal, TypeVar, overload

from ..exceptions import BudgetError
from ..recall import recall, resolve_query
from ..result import CompressionResult
from .call import opened
from .request import Request
from .source import Source, View

__all__ = ["compact_into", "recall_room", "run"]

T = TypeVar("T")


def run(request: Request, source: Source) -> CompressionResult:
    """Run one call of ``request`` on ``source`` (see the module for the stages)."""
    budget, counter = request.budget, request.counter
    messages, tokens = source.size()
    name = request.strategy.name
    with opened(name, counter, budget=budget, messages=messages, tokens=tokens) as call:
        share = source.recall_share(request.recall_share)
        query = resolve_query(source.history, request.query) if share else None
        plan = source.plan(budget, query, share)
        if plan.compacts:
            compact = partial(source.compact, plan=plan)
            compact_into(compact, budget, plan.want, fits=plan.fits, fixed=plan.fixed)
        view = source.view()
        if query and view.recall_until > 0:
            view = _recalled(view, source, query, request, share)
        view = source.closed(view)
        return call.finished(
            view.messages,
            view.trace,
            tokens_after=view.tokens,
            savings=view.savings,
            round_id=view.round_id,
            given=view.given,
            warnings=view.warnings,
            store=view.store,
        )


def _recalled(view: View, source: Source, query: str, request: Request, share: float) -> View:
    """``view`` with the passages of the history before ``view.recall_until`` that
    ``query`` recalls, in what the view leaves of :func:`recall_room`; the trace flags
    the messages it quotes."""
    counter = request.counter
    tokens = counter.count_messages(view.messages) if view.tokens is None else view.tokens
    found = recall(
        view.messages,
        source.history,
        source.index(),
        query,
        until=view.recall_until,
        budget=recall_room(request.budget, tokens, share),
        counter=counter,
        store=view.recall_store,
    )
    if found is None:
        return view
    return replace(view, messages=found.messages, trace=found.flag(view.trace), tokens=None)


@overload
def compact_into(
    compact: Callable[[int], T],
    budget: int,
    want: int,
    *,
    fits: Literal[False] = False,
    fixed: int = 0,
) -> T: ...


@overload
def compact_into(
    compact: Callable[[int], T], budget: int, want: int, *, fits: bool, fixed: int = 0
) -> T | None: ...


def compact_into(
    compact: Callable[[int], T], budget: int, want: int, *, fits: bool = False, fixed: int = 0
) -> T | None:
    """``compact(room)`` at the budget less the ``want`` tokens a query's passages
    want, at the budget less half of them when what must be kept needs more, then at
    the whole budget (the passages take what is left): the first that fits; a room
    below ``fixed`` (what must be kept, as the source knows it) is not tried. Only the
    last try's :class:`ctxfold.BudgetError` is raised. ``fits``: what is there fits
    the budget already, so the whole budget is not tried (``None`` when no other
    room fits)."""
    # The whole budget is always the last try (never an empty list to index).
    wanted = dict.fromkeys((budget - want, budget - want // 2))
    rooms = [r for r in wanted if 0 < r < budget and r >= fixed]
    rooms.append(budget)
    for room in rooms[:-1]:
        with contextlib.suppress(BudgetError):
            return compact(room)
    return None if fits else compact(rooms[-1])


def recall_room(budget: int, view: int, share: float) -> int:
    """The tokens a view of ``view`` tokens and its recall block may fill together:
    the block takes at most ``share`` of the budget, and never more than is left."""
    return min(budget, view + int(share * budget))
