"""The driver: every call, ``compress`` or a session's render, runs these stages in
this order, here and nowhere else.

1. open the call (:func:`.call.opened`: ``compaction_started``, the models' usage
   counted);
2. the recall share and the query (:func:`ctxfold.recall.resolve_query`; none when
   the share is 0);
3. the source's :class:`~.source.Plan`: whether it compacts, and its
   :class:`~.ledger.Ledger`, the budget as its stages charge it (the room the query's
   passages want, a call waiting for its results, a session's low-water mark);
4. compact: a first try in the ledger's room (the round's share charged), counted
   exactly, and at most one more, shrunk by the overshoot it measured or with the
   optional charges given up (:func:`_compacted`): the only retry of a call;
5. the source's :class:`~.source.View`;
6. recall: the passages of what the view folded that the query finds, in the room
   the view leaves (at most the share of the budget, :func:`recall_room`);
7. the source's last word (:meth:`~.source.Source.closed`), then the stats and the
   result, announced (``compaction_completed``).
"""

from __future__ import annotations

from dataclasses import replace

from ..recall import recall, resolve_query
from ..result import CompressionResult
from .call import opened
from .ledger import Ledger
from .request import Request
from .source import Attempt, Outcome, Source, View

__all__ = ["recall_room", "run"]


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


def _compacted(source: Source, ledger: Ledger, *, fits: bool) -> None:
    """Compact ``source`` in ``ledger``: a first try, counted exactly, then the
    corrections its outcome calls for, each at most once (see :mod:`.ledger`): at most
    three tries, the first that fits kept. A target below what must be
    kept is not tried (the optional charges are given up first). ``fits``: what is
    there fits the budget already, so the optional charges are not given up: a call
    whose compaction does not fit shows the view as it is."""
    if fits and ledger.floored() is not ledger:
        return
    ledger = ledger.floored()
    tried = source.attempt(ledger)
    while tried.outcome is not Outcome.FITS and (again := _next(tried, fits=fits)):
        tried = source.attempt(again)
    if tried.outcome in (Outcome.FITS, Outcome.KEPT_OVER):
        source.keep(tried)
    elif not fits:
        assert tried.error is not None  # a source says why a try does not fit
        raise tried.error


def _next(tried: Attempt, *, fits: bool) -> Ledger | None:
    """The ledger of the try after ``tried``, each correction made once: shrunk by the
    overshoot it measured, or its optional charges given up after a refusal or an
    output kept over a target a relief raises (``None``: no other try)."""
    ledger = tried.ledger
    if tried.outcome is Outcome.OVER:
        if ledger.shrunk:
            return None
        return ledger.shrink(tried.tokens - ledger.target, tried.added)
    relieved = None if fits else ledger.relief(tried.needed)
    if tried.outcome is Outcome.KEPT_OVER and relieved and relieved.target <= ledger.target:
        return None  # kept over a target no relief raises: kept as it is
    return relieved


def recall_room(budget: int, view: int, share: float) -> int:
    """The tokens a view of ``view`` tokens and its recall block may fill together:
    the block takes at most ``share`` of the budget, and never more than is left."""
    return min(budget, view + int(share * budget))
