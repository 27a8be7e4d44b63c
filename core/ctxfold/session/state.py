"""What a session holds in memory: its history as the model sees it (and, with
``redact``, as added), the running token counts, the current compaction and its trace,
how messages and compactions enter it, and its recall index, caught up on demand
(:class:`ctxfold.session.Session` builds on it)."""

from __future__ import annotations

import threading
from array import array
from collections import Counter
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

from .._state import OwnMemo
from ..formats import CTXFOLD, MessageFormat
from ..messages import Message, uses_tools
from ..models.embedders import Embedder
from ..recall import RecallIndex, share_for, wanted
from ..result import Decision, Trace
from ..reversible.redaction import redact
from ..text.scoring import content_words
from ..tokens import TokenCounter
from .fold import Counts, Fold, counting
from .history import History
from .log import SessionLog
from .resume import Covering
from .settings import Fill, exchange_start, fill_for, gap_share

__all__ = ["SessionState"]

STEP = "session"  # the step a session's own decisions are traced under


class SessionState:
    """The in-memory state of a session (see the module); the settings it reads are
    the session's."""

    redact: bool
    cache_stable: bool
    low_water: float | None
    high_water: float
    counter: TokenCounter
    recall_embedder: Embedder | None
    _log: SessionLog
    _by: list[Any] | None
    _overhead: int
    _lock: threading.RLock

    @property
    def folded(self) -> int:
        """How many of the first history messages the current compaction stands in
        for: a render is the compaction's messages, then the history from here on."""
        return self._upto()

    @property
    def history(self) -> tuple[Message, ...]:
        """Every message added since the session began (or was cleared), unaltered."""
        with self._lock:
            return tuple(self._originals if self.redact else self._history)

    def _reset(self) -> None:
        self._history = History()  # as the model sees it (masked: see redact)
        self._covering = Covering()  # the digest of its first messages (see compaction)
        self._originals = History()  # with redact: as added
        self._cum = array("q", [0])  # _cum[i]: tokens of the first i messages
        self._trace = Trace()
        self._fold: Fold | None = None
        self._prefix_tokens = 0  # the fold's prefix, messages only
        self._prepared = 0  # messages the strategy has worked ahead on
        self._prepared_round: str | None = None  # ...and the compaction whose prefix
        self._words: Counter[str] = Counter()  # messages of the history with each word
        self._given: MessageFormat = CTXFOLD  # the kind of messages added last
        self._index = RecallIndex(embedder=self.recall_embedder)  # see _recall_index
        self._agentic = False  # whether the history has tool calls, as far as seen
        self._agentic_seen = 0
        # What a compaction and the work ahead after it read of the strategy's memos
        # (a long note's lines), kept from one compaction to the next whatever other
        # sessions of the process do with the shared tables.
        self._memo = OwnMemo()

    def _extend(
        self, messages: list[Message], rows: list[bytes], counts: Counts | None = None
    ) -> None:
        """Take in ``messages``, stored as ``rows``; ``counts``: their token counts as a
        compaction stored them, taken when they were counted as this session counts
        (see :meth:`_counted_by`) and the newest of them counts the same now, else all
        are counted."""
        if self.redact:
            self._originals.extend(messages, rows)
            messages = redact(messages, self._log.store)[0]
        count = self.counter.count_message
        tokens: Sequence[int]
        if (
            counts is not None
            and len(counts.tokens) == len(messages)
            and counts.by == self._counted_by()
            and (not messages or count(messages[-1]) == counts.tokens[-1])
        ):
            tokens = counts.tokens
        else:
            tokens = [count(m) for m in messages]
        self._history.extend(messages, None if self.redact else rows)
        for m in messages:
            self._words.update(content_words(m.text))
        before = self._cum[-1]
        self._cum.extend(before + t for t in accumulate(tokens))
        self._trace.add("kept", "fits_budget", STEP, tokens)

    def _tokens(self, start: int, stop: int) -> list[int]:
        """The token counts of history messages ``start`` to ``stop - 1``."""
        cum = self._cum
        return [cum[i + 1] - cum[i] for i in range(start, stop)]

    def _counts(self, start: int, stop: int) -> Counts:
        """:meth:`_tokens`, and what counted them."""
        return Counts(self._tokens(start, stop), self._counted_by())

    def _counted_by(self) -> list[Any]:
        """What tells this session's counting apart (:func:`.log.counting`), found once."""
        if self._by is None:
            self._by = counting(self.counter, self.redact)
        return self._by

    def _apply(self, fold: Fold) -> None:
        """Make ``fold`` the current compaction: its prefix, and the trace of what it
        did with each history message it took in."""
        self._traced(fold)
        self._fold = fold
        self._prefix_tokens = sum(self.counter.count_message(m) for m in fold.prefix)

    def _traced(self, fold: Fold) -> None:
        """Write into the trace what ``fold`` did with each history message it took in."""
        cum, trace = self._cum, self._trace
        for d in fold.decisions:
            before = cum[d.index + 1] - cum[d.index]
            if d.action == "kept" and trace.action(d.index) != "kept":
                continue  # a message rewritten earlier stays rewritten
            trace[d.index] = Decision(
                d.index, d.action, d.reason, before, d.tokens_after, d.step, d.flags
            )

    def _upto(self) -> int:
        return self._fold.upto if self._fold else 0

    def _view_tokens(self) -> int:
        tail = self._cum[-1] - self._cum[self._upto()]
        return self._overhead + self._prefix_tokens + tail

    def _low_share(self, budget: int) -> float:
        """The low-water mark as a share of ``budget`` (see ``low_water``): a function
        of the stored history, so a reopened session compacts where it would have."""
        if self.low_water is not None:
            return self.low_water
        return gap_share(self.high_water, self._cum[-1], len(self._history), budget)

    def _fill(self, budget: int, over: bool) -> Fill:
        """How far a compaction in a render at ``budget`` fills (see
        :func:`.settings.fill_for`); the newest exchange is looked for only in a
        render whose view is ``over`` the high-water mark, the one that compacts."""
        fold, before = self._fold, 0
        # A compaction that filled its room for a bulk arrival, nothing arrived since.
        unsettled = fold is not None and fold.filled and fold.upto == len(self._history)
        if self.cache_stable and over:
            start = exchange_start(self._history, self._upto())
            before = self._view_tokens() - (self._cum[-1] - self._cum[start])
        return fill_for(self.cache_stable, before, budget, unsettled=unsettled)

    def _pack(self) -> None:
        """Pack what the current compaction folded (see :class:`History`): it is read
        again only on demand, and the recall index has read it by now."""
        self._history.pack(self._upto())
        self._originals.pack(self._upto())

    def _wanted(self, query: str, share: float, budget: int, fill: Fill) -> int:
        """The room (at most ``share`` of ``budget``) what ``query`` recalls wants
        made for it: none for a compaction to the low-water mark, whose recall takes
        only the room the view leaves free."""
        if fill is Fill.LOW_WATER:
            return 0
        n = len(self._history) - 1  # the newest message is never its own source
        index, cap = self._recall_index(), int(share * budget)
        return wanted(index, query, until=n, cap=cap, counter=self.counter)

    def _recall_index(self) -> RecallIndex:
        """The recall index, caught up with the history: on each render of a session
        that may recall, not on every add (an agent's session, which recalls nothing
        by default, never pays for it)."""
        index, history = self._index, self._history
        if len(index) < len(history):
            index.extend(history[len(index) :])
        return index

    def _agentic_share(self) -> float:
        """The default recall share for the history so far (see ``recall_share``)."""
        if not self._agentic:
            seen = self._history[self._agentic_seen :]
            self._agentic = uses_tools(seen)
            self._agentic_seen = len(self._history)
        return share_for(agentic=self._agentic)
