"""The driver: every call, ``compress`` or a session's render, runs these stages in
this order, here and nowhere else.

1. open the call (:func:`.call.opened`: ``compaction_started``, the models' usage
   counted);
2. the recall share and the query (:func:`ctxfold.recall.resolve_query`; none when
   the share is 0);
3. the source's :class:`~.source.Plan`: whether it compacts, and its
   :class:`~.ledger.Ledger`, the budget as its stages charge it (the room the query's
   passages want, a call waiting for its results, a session's low-water mark);
4. compact: a try in the ledger's room (the round's share charged), counted
   exactly, then, if it does not fit, the correction its outcome calls for: shrunk
   by the overshoot it measured, or what the ledger may give up given up
   (:func:`_compacted`, at most :data:`~.ledger.MAX_TRIES`): the only retry of a call;
5. the source's :class:`~.source.View`;
6. recall: the passages of what the view folded that the query finds, in the room
   the view leaves (at most the share of the budget, :func:`recall_room`);
7. the source's last word (:meth:`~.source.Source.closed`), then the stats and the
   result, announced (``compaction_completed``).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from ..recall import recall, resolve_query
from ..result import CompressionResult
from .attempt import Attempt, Outcome
from .call import opened
from .ledger import MAX_TRIES, Ledger
from .request import Request
from .source import Source, View

__all__ = ["recall_room", "run"]

_log = logging.getLogger("ctxfold")
_STEPS = 3 * MAX_TRIES  # ledgers looked at, tried or not: a bound on the loop


def run(request: Request, source: Source) -> CompressionResult:
    """Run one call of ``request`` on ``source`` (see the module for the stages)."""
    budget, counter = request.budget, request.counter
    messages, tokens = source.size()
    name = request.strategy.name
    with opened(name, counter, budget=budget, messages=messages, tokens=tokens) as call:
        share = source.recall_share(request.recall_share)
        query = resolve_query(source.history, request.query) if share else None
        plan = source.plan(budget, query, share)
        if plan.ledger is not None:
            _compacted(source, plan.ledger, fits=plan.fits)
        view = source.view()
        if query and view.recall_until > 0:
            view = _recalled(view, source, query, request, share)
        return call.finished(source.closed(view))


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


def _compacted(source: Source, ledger: Ledger, *, fits: bool) -> None:
    """Compact ``source`` in ``ledger``: a try, counted exactly, then the correction
    its outcome calls for (see :mod:`.ledger`), until one fits, nothing is left to
    correct or :data:`~.ledger.MAX_TRIES` were made; a try in a room tried already is
    not made again. The one that fits is kept (or one the strategy kept over its
    target, as it may). ``fits``: what is there fits the budget already, so nothing
    optional is given up: a call whose compaction does not fit shows the view as it
    is."""
    step: Ledger | None = ledger.floored()
    if fits and step is not ledger:
        return
    seen: set[tuple[int, int]] = set()
    tried: Attempt | None = None
    for _ in range(_STEPS):
        if step is None or len(seen) == MAX_TRIES:
            break
        charged = source.charge(step)
        if (charged.target, charged.room) not in seen:
            seen.add((charged.target, charged.room))
            tried = source.attempt(charged)
            if tried.outcome is Outcome.FITS:
                break
        assert tried is not None  # the first room is never seen before
        step = _next(tried, charged, fits=fits)
    assert tried is not None
    if tried.outcome is Outcome.KEPT_OVER and tried.added and tried.tokens > tried.ledger.budget:
        _log.warning(  # the strategy warns of its own room; the round's tag is the layer's
            "a reversible result of %d tokens is kept over the budget of %d "
            "(overflow='best_effort'): the round's tag does not fit beside what must be kept",
            tried.tokens,
            tried.ledger.budget,
        )
    if tried.outcome in (Outcome.FITS, Outcome.KEPT_OVER):
        source.keep(tried)
    elif not fits:
        assert tried.error is not None  # a source says why a try does not fit
        raise tried.error


def _next(tried: Attempt, ledger: Ledger, *, fits: bool) -> Ledger | None:
    """The ledger after ``ledger`` given how the last try came out: shrunk by the
    overshoot it measured (while there is room to shrink), or one
    relief further after a refusal or an output kept over a target a relief raises
    (``None``: nothing left to try)."""
    if tried.outcome is Outcome.OVER:
        shrunk = ledger.shrink(tried.tokens - tried.ledger.target, tried.added)
        if shrunk.room < ledger.room or fits:
            return shrunk
        # No room left to shrink: what the ledger may give up is given up.
    relieved = None if fits else ledger.relief(tried.needed)
    if tried.outcome is Outcome.KEPT_OVER and relieved and relieved.target <= ledger.target:
        return None  # kept over a target no relief raises: kept as it is
    return relieved


def recall_room(budget: int, view: int, share: float) -> int:
    """The tokens a view of ``view`` tokens and its recall block may fill together:
    the block takes at most ``share`` of the budget, and never more than is left."""
    return min(budget, view + int(share * budget))
