"""A session's state as the driver's :class:`ctxfold.pipeline.Source`, for one render:
running counts, the current compaction as the view's prefix, the recall index
extended as the history grows, a compaction to the low-water mark (or the room the
render asks) committed to the session's store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

from ..contract import Prepares, WordCounts
from ..exceptions import BudgetError
from ..messages import Message
from ..pipeline import Attempt, Ledger, Plan, Reserve, View, made, refused
from ..recall import RecallIndex
from ..result import from_user
from .fold import Counts, Intake, compact, intake, open_start
from .settings import Fill

if TYPE_CHECKING:
    from .session import Session

__all__ = ["SessionSource"]


class _Taken(NamedTuple):
    """What a render's compaction takes in, the tokens of a call still waiting for its
    results (left out of it), and the token counts of the history messages in it."""

    intake: Intake
    waiting: int
    tokens: list[int]


class SessionSource:
    """``session`` for one render (see the module)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._size = len(session._history)
        self._budget = 0
        self._fill = Fill.ROOM
        self._asked = 0  # the room the render asks of a compaction (Fold.room)
        self._intake: _Taken | None = None

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
        compacting = compacting and self._compacts(budget, want)
        self._budget, self._fill = budget, fill
        if compacting:
            s._memo.turn()
        if not compacting or s._fold is not None:
            self._prepare(self._size - 1 if compacting else self._size)
        self._asked = budget - want
        return Plan(self._ledger(budget, want) if compacting else None, fits=not over)

    def charge(self, ledger: Ledger) -> Ledger:
        """``ledger`` with the round's share charged (a session's compactions are
        reversible rounds)."""
        s = self._session
        return ledger.with_round(s.strategy, s._rounds, self._taken().intake.conv)

    def attempt(self, ledger: Ledger) -> Attempt:
        """A compaction of what this render takes in, into ``ledger``'s room, counted
        exactly; the error a render that ends on it raises tells of the session."""
        s = self._session
        try:
            fold, round_ = compact(
                s.strategy, s._rounds, self._taken().intake, ledger.target, ledger.room
            )
        except BudgetError as exc:
            tried = refused(ledger, exc)
        else:
            best_effort = s.strategy.overflow == "best_effort"
            tried = made(
                ledger, round_.tokens, round_.added, (fold, round_), best_effort=best_effort
            )
        if tried.error is None:
            return tried
        return replace(tried, error=self._refused(tried.error))

    def keep(self, attempt: Attempt) -> None:
        """Keep ``attempt``'s compaction, marked with the room the render asked for: its
        round stored, the compaction recorded and made current."""
        s = self._session
        fold, made = attempt.made
        made.stored()
        filled = s.cache_stable and self._fill is Fill.ROOM
        fold = replace(fold, room=self._asked, filled=filled)
        s._log.add_fold(fold, Counts(self._taken().tokens, s._counted_by()))
        s._apply(fold)

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

    def _prepare(self, end: int) -> None:
        """Let the strategy work ahead on what is new since the last render (up to
        message ``end``): the messages added, and the prefix the last compaction wrote
        (its note), so that a compaction does only what depends on the whole, a little
        on every turn rather than all at once when the budget is passed. What the
        current compaction folded is never read again (after a first compaction, or
        in a session reopened from its store)."""
        s = self._session
        start = max(s._prepared, s._upto())
        fold, strategy = s._fold, s.strategy
        if isinstance(strategy, Prepares):  # one check per render, not per message
            if start < end:
                strategy.prepare(s._history[start:end], s._tokens(start, end))
            if fold is not None and fold.round_id != s._prepared_round:
                count = s.counter.count_message
                strategy.prepare(fold.prefix, [count(m) for m in fold.prefix])
        s._prepared = max(start, end)
        s._prepared_round = fold.round_id if fold else None

    def _compacts(self, budget: int, want: int) -> bool:
        """Whether a render that would compact does: always when the history holds
        messages the current compaction has not taken in. With nothing new it could
        only fold its own prefix again: it does not when that compaction was made for
        this room or a smaller one (:attr:`Fold.room`), nor, for a compaction stored
        without its room, when the view fits ``budget``. So a render with nothing new
        writes nothing, a question asked after a plain render still gets its room, and
        the decision is a function of the stored history and compactions and of the
        call: a reopened session renders what the live one would."""
        s = self._session
        upto = s._upto()
        if open_start(s._history, upto) > upto:
            return True
        room = s._fold.room if s._fold else None
        if room is None:
            return s._view_tokens() > budget
        return room > budget - want

    def _taken(self) -> _Taken:
        """What this render's compaction takes in (the previous prefix and the history
        since, up to a call still waiting for its results), found once per render."""
        if self._intake is None:
            s = self._session
            history = s._history
            cut = open_start(history, s._upto())
            whole = s._fold is None and cut == len(history)  # its own word rarity
            rarity = None if whole else WordCounts(len(history), MappingProxyType(s._words))
            task = "" if whole else next((m.text for m in history if from_user(m)), "")
            tokens = s._tokens(s._upto(), cut)  # what it takes in: given, then stored
            taken = intake(s.counter, history, s._fold, cut, tokens, rarity, task)
            self._intake = _Taken(taken, s._cum[-1] - s._cum[cut], tokens)
        return self._intake

    def _ledger(self, budget: int, want: int) -> Ledger:
        """The budget of a compacting render as charged: the room ``want`` for the
        query's passages, a call still waiting for its results (shown after the
        compaction), and, filling to the low-water mark, the room left free below
        it; no target below what the strategy pins (when it refuses a room that
        cannot hold them; one that keeps them over the room anyway is given it)."""
        s, taken = self._session, self._taken()
        strategy = s.strategy
        pinned = taken.intake.fixed(strategy.pin_roles) if strategy.overflow == "error" else 0
        ledger = Ledger(budget, fixed=pinned).charge(Reserve.RECALL, want)
        ledger = ledger.charge(Reserve.WAITING, taken.waiting)
        if self._fill is Fill.LOW_WATER:
            low = int(s._low_share(budget) * budget)
            ledger = ledger.charge(Reserve.LOW_WATER, ledger.target - low)
        return ledger

    def _refused(self, error: BudgetError) -> BudgetError:
        """``error`` as a render tells it: of the session's history and budget."""
        budget = self._budget
        return BudgetError(
            f"the session's history does not fit the budget of {budget} even compacted "
            f"({error}): raise the budget or shorten the system prompt",
            required=max(error.required, budget + 1),
            budget=budget,
        )
