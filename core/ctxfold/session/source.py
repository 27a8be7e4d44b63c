"""A session's state as the driver's :class:`ctxfold.pipeline.Source`, for one render:
running counts, the current compaction as the view's prefix, the recall index
extended as the history grows, a compaction to the low-water mark (or the room the
render asks) committed to the session's store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..messages import Message
from ..pipeline import Plan, View
from ..recall import RecallIndex
from .settings import Fill

if TYPE_CHECKING:
    from .session import Session

__all__ = ["SessionSource"]


class SessionSource:
    """``session`` for one render (see the module)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._size = len(session._history)
        self._budget = 0
        self._fill = Fill.ROOM

    @property
    def history(self) -> Sequence[Message]:
        return self._session._history

    def size(self) -> tuple[int, int]:
        s = self._session
        return self._size, s._overhead + s._cum[-1]

    def recall_share(self, share: float | None) -> float:
        return self._session._agentic_share() if share is None else share

    def index(self) -> RecallIndex:
        return self._session._recall_index()

    def plan(self, budget: int, query: str | None, share: float) -> Plan:
        """Compact when the view passes the high-water mark (of the budget less the
        room ``query``'s passages want, when they want room) and the session holds
        something to compact (see ``Session._compacts``); meanwhile the strategy works
        ahead on what is new, but on the newest message of a compacting render (the
        compaction shows it) and in the first compaction (which reads everything)."""
        s = self._session
        if share:  # index what is new on every turn, not all at the first fold
            s._recall_index()
        over = s._view_tokens() > int(s.high_water * budget)
        fill = s._fill(budget, over)
        folded = over or s._fold is not None  # there is something to recall
        want = s._wanted(query, share, budget, fill) if query and folded else 0
        compacting = over or s._view_tokens() > int(s.high_water * (budget - want))
        compacting = compacting and s._compacts(budget, want)
        self._budget, self._fill = budget, fill
        if compacting:
            s._memo.turn()
        if not compacting or s._fold is not None:
            s._prepare(self._size - 1 if compacting else self._size)
        return Plan(compacts=compacting, want=want, fits=not over)

    def compact(self, room: int, plan: Plan) -> None:
        """Compact into ``room``, the compaction marked with the room the render asked
        for, and commit it."""
        self._session._compact(room, self._budget - plan.want, self._fill)

    def view(self) -> View:
        """The compaction's prefix, then the history since; recall quotes what the
        compaction folded."""
        s = self._session
        fold, upto = s._fold, s._upto()
        return View(
            [*(fold.prefix if fold else ()), *s._history[upto:]],
            s._trace,
            tokens=s._view_tokens(),
            savings=fold.savings if fold else {},
            round_id=fold.round_id if fold else None,
            recall_until=min(upto, len(s._history) - 1),
            recall_store=s._log.store,
            given=s._given,
            store=s._log.store,
        )

    def closed(self, view: View) -> View:
        """``view``; what the compaction folded is packed away (the recall index has
        read it by now)."""
        self._session._pack()
        return view
