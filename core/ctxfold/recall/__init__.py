"""Query-aware recall: passages of the history that bear on the current question,
found by a lexical index (:mod:`.index`, :mod:`.terms`), chosen by relevance and value
(:mod:`.select`) and shown in a marked block, in time order with their speakers and
dates (:mod:`.block`, :mod:`.stamps`), in the room a compression leaves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..messages import Message, uses_tools
from ..result import RECALL_END, Decision, flagged
from ..reversible.records import Batch, marker
from ..storage.store import VerbatimStore
from ..tokens import TokenCounter
from .block import HEAD_LINE, SEARCH_LINE, place, render
from .index import Passage, RecallIndex
from .query import Query, check_query, default_query, resolve_query
from .select import Pick, choose, fit, rank

__all__ = [
    "AGENT_SHARE",
    "CHAT_SHARE",
    "RECALLED",
    "Passage",
    "Query",
    "RecallIndex",
    "Recalled",
    "check_query",
    "default_query",
    "default_share",
    "recall",
    "resolve_query",
    "search",
    "share_for",
    "wanted",
]

#: The share of a budget at most kept for what a query recalls (the rest compacts).
#: In a chat, most of it: older turns are memory, and the question says which part
#: matters (tuned on two LoCoMo conversations, with brief passages and date scopes:
#: 0.6, 0.7, 0.8, 0.85 and 0.9 kept 74.7%, 74.7%, 76.0%, 73.3% and 72.0% of the
#: answers at 3%, and 85.3%, 85.3%, 85.3%, 86.7% and 88.0% at 10%; the budget at
#: 3% is the one recall is short of). In an agent's run none by default: its
#: newest tool output is the working state and its note lists the identifiers, and
#: even 0.2 cost identifiers (tau-bench kept 87.7% at 10% where it keeps 99.3%); set
#: ``recall_share`` to recall for the newest tool calls and errors there.
CHAT_SHARE = 0.8
AGENT_SHARE = 0.0


def default_share(messages: Sequence[Message]) -> float:
    """The recall share for a history: :data:`AGENT_SHARE` when it has tool calls or
    results, else :data:`CHAT_SHARE` (:func:`share_for`)."""
    return share_for(agentic=uses_tools(messages))


def share_for(*, agentic: bool) -> float:
    """The recall share by default: :data:`AGENT_SHARE` for an agent's run (a history
    with tool calls or results), :data:`CHAT_SHARE` for a chat; a session that knows
    which it is, as far as it has seen, asks here."""
    return AGENT_SHARE if agentic else CHAT_SHARE


_MIN_ROOM = 24  # tokens: less room than this recalls nothing
_TRIES = 4
_FILL = 16  # tokens: a block that leaves this many unused is chosen again


#: The trace flag of a message a recall block quotes (in part or whole).
RECALLED = "recalled"


class Recalled(NamedTuple):
    """An output with its recall block, and the history messages the block quotes."""

    messages: list[Message]
    sources: tuple[int, ...]

    def flag(self, trace: Sequence[Decision]) -> Sequence[Decision]:
        """``trace`` with :data:`RECALLED` among the flags of each quoted message."""
        return flagged(trace, self.sources, RECALLED)


def recall(
    out: Sequence[Message],
    history: Sequence[Message],
    index: RecallIndex,
    query: str,
    *,
    until: int,
    budget: int,
    counter: TokenCounter,
    store: VerbatimStore | None = None,
) -> Recalled | None:
    """``out`` (a compressed ``history``) with the passages of ``history[:until]``
    that ``query`` recalls, in the room ``out`` leaves within ``budget``, in a block
    placed as late as strict chat APIs take it (see :func:`.block.place`); ``None``
    when nothing is recalled. A message shown in part is referred to by its
    ``[expand <id>]`` marker when a ``store`` is given (its original is stored)."""
    shown_text = "\n".join(m.text for m in out)
    room = budget - counter.count_messages(out) - _frame(counter)
    if room < _MIN_ROOM:
        return None
    ranking = rank(index, query, until)
    best: Recalled | None = None
    for _ in range(_TRIES):
        picks = fit(index, ranking, room=room, counter=counter, shown=shown_text)
        if not picks:
            return best
        sources = sorted({index.passages[p.pid].message for p in picks})
        refs = _references(history, index, picks, store)
        placed = place(out, render(index, picks, refs), sources)
        if placed is None:
            return best
        left = budget - counter.count_messages(placed)
        if left < 0:  # the block's lines cost more than their passages: choose in less
            if best is not None:
                return best
            room += left - _FILL
            continue
        best = Recalled(placed, tuple(sources))
        if left < _FILL:
            return best
        room += left  # they cost less: choose again in the room left over
    return best


def wanted(index: RecallIndex, query: str, *, until: int, cap: int, counter: TokenCounter) -> int:
    """The room (at most ``cap`` tokens) that what ``query`` recalls of the messages
    before ``until`` would fill, were none of it shown already: what a compression
    keeps free for it. 0 when it recalls nothing."""
    room = cap - _frame(counter)
    if room < _MIN_ROOM:
        return 0
    picks = choose(index, query, until=until, room=room, counter=counter, shown="")
    used = sum(index.cost(p.pid, counter, p.full) for p in picks)
    return used + _frame(counter) if used else 0


def search(
    history: Sequence[Message],
    index: RecallIndex,
    query: str,
    *,
    max_tokens: int,
    counter: TokenCounter,
    store: VerbatimStore | None = None,
) -> str:
    """The passages of ``history`` (indexed by ``index``) that ``query`` finds, the
    best that fit ``max_tokens`` as a block shows them, in time order; a message shown
    in part followed by its ``[expand <id>]`` marker when a ``store`` is given (its
    original is stored there). Empty when nothing matches: what an agent's expand tool
    answers a search with, where it has no id to open."""
    picks = choose(
        index,
        query,
        until=len(history),
        room=max_tokens - _frame(counter),
        counter=counter,
        shown="",
    )
    refs = _references(history, index, picks, store)
    text = render(index, picks, refs, SEARCH_LINE) if picks else ""
    while picks and counter.count_text(text) > max_tokens:  # the lines' frames cost more:
        picks.remove(min(picks, key=lambda p: p.value))  # the least worth goes first
        text = render(index, picks, refs, SEARCH_LINE) if picks else ""
    return text


def _frame(counter: TokenCounter) -> int:
    """The tokens of the block's head and end lines, time lines and message framing."""
    return counter.count_text(f"{HEAD_LINE}\n{RECALL_END}") + 8


def _references(
    history: Sequence[Message],
    index: RecallIndex,
    picks: Sequence[Pick],
    store: VerbatimStore | None,
) -> dict[int, str]:
    """The ``[expand <id>]`` marker of each message shown in part (stored now)."""
    partial = sorted({index.passages[p.pid].message for p in picks} - _whole(index, picks))
    if store is None or not partial:
        return {}
    batch = Batch(store)
    ids = batch.add_messages([history[k] for k in partial])
    batch.commit()
    return {k: marker(i) for k, i in zip(partial, ids, strict=True)}


def _whole(index: RecallIndex, picks: Sequence[Pick]) -> set[int]:
    return {index.passages[p.pid].message for p in picks if index.passages[p.pid].whole}
