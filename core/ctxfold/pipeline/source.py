"""Where a call's history comes from, as the driver sees it: the :class:`Source`
protocol, the :class:`Plan` a source makes for one call, an :class:`Attempt` at
compacting and the :class:`View` it shows after it.

Two sources implement it: :class:`~ctxfold.pipeline.given.Given`, a history given
whole (``compress``: counted, grouped and indexed afresh, compacted into the budget),
and a session's state (:mod:`ctxfold.session.source`: running counts, the current
compaction as the view's prefix, an index extended as the history grows, compacted
to its low-water mark and the compaction committed to the session's store).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..exceptions import BudgetError
from ..formats import CTXFOLD, MessageFormat
from ..messages import Message
from ..recall import RecallIndex
from ..result import Decision
from ..storage.store import VerbatimStore
from .ledger import Ledger

__all__ = ["Attempt", "Outcome", "Plan", "Source", "View", "judged", "over", "refused"]


@dataclass(frozen=True)
class Plan:
    """What a source does in one call before it is viewed.

    Attributes:
        ledger: the budget as charged for a compaction (``None``: no compaction).
        fits: what is there fits the budget already: a compaction refused in the
            ledger's target is not tried with the optional charges given up (the view
            is shown as it is).
    """

    ledger: Ledger | None = None
    fits: bool = False

    @property
    def compacts(self) -> bool:
        """Whether the call compacts at all."""
        return self.ledger is not None


class Outcome(enum.Enum):
    """How a try at compacting came out, as the ledger's target judges it."""

    FITS = "fits"
    OVER = "over"  # over the target by what the round added: a smaller room may fit
    KEPT_OVER = "kept_over"  # the strategy kept more than its room (see :func:`judged`)
    REFUSED = "refused"  # what must be kept does not fit (:class:`ctxfold.BudgetError`)


@dataclass(frozen=True)
class Attempt:
    """One try at compacting, made but not kept yet.

    Attributes:
        ledger: the ledger it was made in, the round's share charged.
        outcome: how it came out.
        tokens: the output's exact count.
        added: what the round added to the strategy's output.
        error: what is raised if the call ends on this try unfitting.
        needed: the room a refusal measured short (``None``: unknown).
        made: the source's compaction, kept by :meth:`Source.keep`.
    """

    ledger: Ledger
    outcome: Outcome
    tokens: int = 0
    added: int = 0
    error: BudgetError | None = None
    needed: int | None = None
    made: Any = None


def judged(ledger: Ledger, tokens: int, added: int, *, best_effort: bool) -> Outcome:
    """How an output of ``tokens`` (``added`` of them the round's) came out in
    ``ledger``: over its target by what a round added, a smaller room may fit; over
    it otherwise, the strategy kept it so (``best_effort``, or a strategy that does
    not fit its output)."""
    if tokens <= ledger.target:
        return Outcome.FITS
    return Outcome.KEPT_OVER if best_effort or not added else Outcome.OVER


def refused(ledger: Ledger, error: BudgetError, shown: BudgetError | None = None) -> Attempt:
    """A try in ``ledger`` the strategy refused with ``error``, the room it measured
    short; the call raises ``shown`` if it ends here (by default ``error`` told of
    the call's budget, what the ledger set aside added to what it requires)."""
    needed = error.required - ledger.room if error.required > ledger.room else None
    if shown is None and error.budget != ledger.budget:
        aside = ledger.budget - ledger.room
        shown = BudgetError(
            f"{error} (the room the budget of {ledger.budget} leaves after {aside} "
            f"tokens set aside: {ledger.account()})",
            required=error.required + aside,
            budget=ledger.budget,
        )
    return Attempt(ledger, Outcome.REFUSED, error=shown or error, needed=needed)


def over(tokens: int, ledger: Ledger) -> BudgetError:
    """The error of an output of ``tokens`` kept over ``ledger``'s target."""
    aside = ledger.budget - ledger.target
    return BudgetError(
        f"the compaction takes {tokens} tokens, over the {ledger.target} the budget of "
        f"{ledger.budget} leaves it ({ledger.account()})",
        required=tokens + aside,
        budget=ledger.budget,
    )


@dataclass(frozen=True)
class View:
    """What a source shows after its plan: the messages, the trace of every history
    message, and what the result reports.

    Attributes:
        tokens: the messages' count when the source knows it (``None``: counted).
        recall_until: recall quotes from the history's first this many messages
            (0: nothing to recall: nothing was folded).
        recall_store: where the originals of messages recall quotes in part are
            (their ``[expand <id>]`` markers), if anywhere.
        store: the store the result names (``CompressionResult.store``).
    """

    messages: Sequence[Message]
    trace: Sequence[Decision]
    tokens: int | None = None
    savings: Mapping[str, int] = field(default_factory=dict)
    round_id: str | None = None
    recall_until: int = 0
    recall_store: VerbatimStore | None = None
    given: MessageFormat = CTXFOLD
    warnings: tuple[str, ...] = ()
    store: Any = None


class Source(Protocol):
    """A history the driver runs a call on (see the module)."""

    @property
    def history(self) -> Sequence[Message]:
        """The history as the model would see it whole: what a query is read from
        and what recall quotes."""
        ...

    def size(self) -> tuple[int, int]:
        """The history's messages and tokens, as the call announces them."""
        ...

    def recall_share(self, share: float | None) -> float:
        """The recall share the call uses: ``share``, or the default for this
        history (``None``)."""
        ...

    def index(self) -> RecallIndex:
        """The recall index over the history."""
        ...

    def plan(self, budget: int, query: str | None, share: float) -> Plan:
        """Whether to compact, and what room to leave the query's passages; a source
        may work ahead on what is new meanwhile."""
        ...

    def attempt(self, ledger: Ledger) -> Attempt:
        """Compact into ``ledger``'s room (charging the round's share first), counted
        exactly; nothing is kept or stored yet."""
        ...

    def keep(self, attempt: Attempt) -> None:
        """Keep ``attempt``, to be shown by :meth:`view` (its round stored)."""
        ...

    def view(self) -> View:
        """What the call shows, before recall."""
        ...

    def closed(self, view: View) -> View:
        """``view`` as the result gives it, once recall is done (the source's last
        word: flags of its own, what it packs away)."""
        ...
