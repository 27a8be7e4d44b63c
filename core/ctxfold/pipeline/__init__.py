"""The one driver every entry point runs: ``compress`` on a history it is given,
:meth:`ctxfold.Session.render` on the state a session keeps between calls.

- :mod:`.request`: :class:`Request`, what one call asks (strategy, budget, counter,
  query, reversibility, recall settings), frozen;
- :mod:`.source`: the :class:`Source` protocol a history is run through, the
  :class:`Plan` a source makes for a call and the :class:`View` it shows;
- :mod:`.ledger`: :class:`Ledger`, the one account of a call's budget (what each
  stage charges, the room left) and the rule for a call's tries;
- :mod:`.attempt`: :class:`Attempt`, one try at compacting, its :class:`Outcome`;
- :mod:`.given`: :class:`Given`, a history given whole (``compress``); a session's
  state is the other source (:mod:`ctxfold.session.source`);
- :mod:`.driver`: :func:`run`, the stages in order (open, query, plan, compact, view,
  recall, finish), written once;
- :mod:`.call`: :func:`opened` and :meth:`Call.finished`, the one place the hooks
  fire and the stats are filled, so a render is observed exactly as a ``compress``
  call is.
"""

from __future__ import annotations

from .attempt import Attempt, Outcome, made, refused
from .call import Call, opened
from .driver import recall_room, run
from .given import Given
from .ledger import MAX_TRIES, Ledger, Relief, Reserve
from .request import Query, Request, check_query
from .source import Plan, Source, View

__all__ = [
    "MAX_TRIES",
    "Attempt",
    "Call",
    "Given",
    "Ledger",
    "Outcome",
    "Plan",
    "Query",
    "Relief",
    "Request",
    "Reserve",
    "Source",
    "View",
    "check_query",
    "made",
    "opened",
    "recall_room",
    "refused",
    "run",
]
