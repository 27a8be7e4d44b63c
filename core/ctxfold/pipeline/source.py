"""Where a call's history comes from, as the driver sees it: the :class:`Source`
protocol, the :class:`Plan` a source makes for one call and the :class:`View` it
shows after it (a try at compacting is an :class:`~.attempt.Attempt`).

Two sources implement it: :class:`~ctxfold.pipeline.given.Given`, a history given
whole (``compress``: counted, grouped and indexed afresh, compacted into the budget),
and a session's state (:mod:`ctxfold.session.source`: running counts, the current
compaction as the view's prefix, an index extended as the history grows, compacted
to its low-water mark and the compaction committed to the session's store).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..formats import CTXFOLD, MessageFormat
from ..messages import Message
from ..recall import RecallIndex
from ..result import Decision
from ..storage.store import VerbatimStore
from .attempt import Attempt
from .ledger import Ledger

__all__ = ["Plan", "Source", "View"]


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

    def charge(self, ledger: Ledger) -> Ledger:
        """``ledger`` with what the source's own layer adds to a compaction charged
        (a reversible round's share, at the ledger's target)."""
        ...

    def attempt(self, ledger: Ledger) -> Attempt:
        """Compact into ``ledger``'s room (charged already), counted exactly; nothing
        is kept or stored yet."""
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
