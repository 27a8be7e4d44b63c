"""A history given whole, as ``compress`` has it: a :class:`~.source.Source` that
counts and groups it once, indexes it for recall only when a query needs it, and
compacts it into the room the driver gives (a history that fits is shown as given)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..contract import Compaction, Conversation
from ..exceptions import BudgetError
from ..formats import CTXFOLD, MessageFormat
from ..messages import Message
from ..recall import RecallIndex, default_share, wanted
from ..result import Decision, flagged
from ..reversible.redaction import REDACTED, redact
from ..reversible.rounds import Round, make_round
from ..storage.store import VerbatimStore, get_store
from ..units import group_units
from .attempt import Attempt, made, refused
from .ledger import Ledger, Reserve
from .request import Request
from .source import Plan, View

__all__ = ["Given"]


class Given:
    """``messages`` given whole to one call of ``request`` (see the module);
    ``masked``: the positions whose credentials were masked (see :meth:`of`)."""

    def __init__(
        self,
        messages: list[Message],
        request: Request,
        *,
        masked: Sequence[int] = (),
        given: MessageFormat = CTXFOLD,
    ) -> None:
        self._messages = messages
        self._request = request
        self._masked = masked
        self._given = given
        self._grouping = group_units(messages)
        self._tokens = request.counter.count_messages(messages)
        self._index: RecallIndex | None = None
        self._conversation: Conversation | None = None
        self._done: Compaction | None = None
        self._round_id: str | None = None

    @classmethod
    def of(
        cls,
        messages: list[Message],
        request: Request,
        *,
        redact_secrets: bool,
        given: MessageFormat,
    ) -> Given:
        """The source for ``messages``, their credentials masked first when
        ``redact_secrets`` (the originals go to the request's store; ``expand`` puts
        them back)."""
        masked: list[int] = []
        if redact_secrets:
            messages, masked = redact(messages, get_store(request.rounds.store))
        return cls(messages, request, masked=masked, given=given)

    @property
    def history(self) -> Sequence[Message]:
        return self._messages

    def size(self) -> tuple[int, int]:
        return len(self._messages), self._tokens

    def recall_share(self, share: float | None) -> float:
        return default_share(self._messages) if share is None else share

    def index(self) -> RecallIndex:
        if self._index is None:
            self._index = RecallIndex(self._messages, embedder=self._request.recall_embedder)
        return self._index

    def plan(self, budget: int, query: str | None, share: float) -> Plan:
        """A history that fits is shown as it is; one that does not compacts into the
        budget less the room what ``query`` recalls wants (at most ``share`` of it)."""
        if self._tokens <= budget:
            return Plan()
        if not query or not share:
            return Plan(Ledger(budget))
        last = len(self._messages) - 1  # what is answered is never its own source
        cap, counter = int(share * budget), self._request.counter
        want = wanted(self.index(), query, until=last, cap=cap, counter=counter)
        pinned = self._conv().pinned(self._request.strategy.pin_roles)[2]
        return Plan(Ledger(budget, fixed=pinned).charge(Reserve.RECALL, want))

    def _conv(self) -> Conversation:
        """The history as a conversation, counted once for every room tried."""
        if self._conversation is None:
            request = self._request
            self._conversation = Conversation.of(
                self._messages,
                budget=request.budget,
                counter=request.counter,
                grouping=self._grouping,
            )
        return self._conversation

    def charge(self, ledger: Ledger) -> Ledger:
        """``ledger`` with a reversible round's share charged (as the request says)."""
        request = self._request
        if not request.reversible:
            return ledger
        return ledger.with_round(request.strategy, request.rounds, self._conv())

    def attempt(self, ledger: Ledger) -> Attempt:
        """The strategy's compaction into ``ledger``'s room, a reversible round when
        the request says so, counted exactly."""
        request, strategy = self._request, self._request.strategy
        conv = self._conv().with_budget(ledger.target)
        round_: Round | None = None
        try:
            if request.reversible:
                round_ = make_round(strategy, conv, ledger.room, request.rounds)
                done, tokens, added = round_.compaction, round_.tokens, round_.added
            else:
                done = Compaction(*strategy.compact(conv.with_budget(ledger.room)))
                tokens, added = request.counter.count_messages(done.messages), 0
        except BudgetError as exc:
            return refused(ledger, exc)
        best_effort = strategy.overflow == "best_effort"
        return made(ledger, tokens, added, (done, round_), best_effort=best_effort)

    def keep(self, attempt: Attempt) -> None:
        done, round_ = attempt.made
        self._done = done
        self._round_id = None if round_ is None else round_.stored().round_id

    def view(self) -> View:
        request, done = self._request, self._done
        warnings = self._grouping.warnings()
        if done is None:  # it fits: every message as given
            count = request.counter.count_message
            trace = [
                Decision(i, "kept", "fits_budget", t, t, request.strategy.name)
                for i, t in enumerate(count(m) for m in self._messages)
            ]
            store = self._store(bool(self._masked))
            return View(self._messages, trace, given=self._given, warnings=warnings, store=store)
        return View(
            done.messages,
            done.trace,
            savings=done.savings,
            round_id=self._round_id,
            recall_until=len(self._messages) - 1,  # the newest: shown, and what is answered
            recall_store=self._store(request.reversible),
            given=self._given,
            warnings=warnings,
            store=self._store(bool(self._round_id or self._masked)),
        )

    def _store(self, named: bool) -> VerbatimStore | None:
        """The request's store when the result names it (resolved only then: a
        history that fits opens no store)."""
        return get_store(self._request.rounds.store) if named else None

    def closed(self, view: View) -> View:
        """``view`` with the masked messages flagged ``redacted`` in its trace."""
        if not self._masked:
            return view
        return replace(view, trace=flagged(view.trace, self._masked, REDACTED))
