"""The one driver every entry point runs: ``compress`` on a history it is given,
:meth:`ctxfold.Session.render` on the state a session keeps between calls.

- :mod:`.request`: :class:`Request`, what one call asks (strategy, budget, counter,
  query, reversibility, recall settings), frozen;
- :mod:`.source`: the :class:`Source` protocol a history is run through, the
  :class:`Plan` a source makes for a call and the :class:`View` it shows;
- :mod:`.ledger`: :class:`Ledger`, the one account of a call's budget (what each
  stage charges, the room left) and the rule for its one retry;
- :mod:`.given`: :class:`Given`, a history given whole (``compress``); a session's
  state is the other source (:mod:`ctxfold.session.source`);
- :mod:`.driver`: :func:`run`, the stages in order (open, query, plan, compact, view,
  recall, finish), written once;
- :mod:`.call`: :func:`opened` and :meth:`Call.finished`, the one place the hooks
  fire and the stats are filled, so a render is observed exactly as a ``compress``
  call is.
"""

from __future__ import annotations

from .call import Call, opened
from .driver import recall_room, run
from .given import Given
from .ledger import Ledger, Reserve
from .request import Query, Request, check_query
from .source import Attempt, Outcome, Plan, Source, View, judged, refused

__all__ = [
    "Attempt",
    "Call",
    "Given",
    "Ledger",
    "Outcome",
    "Plan",
    "Query",
    "Request",
    "Reserve",
    "Source",
    "View",
    "check_query",
    "judged",
    "opened",
    "recall_room",
    "refused",
    "run",
]
