"""Which passages a query recalls: each passage the query's terms find (BM25), valued
by that relevance and by what it carries (numbers, names, identifiers), with the
passages beside it (the reply holds the answer as often as the line that matched);
the best first while they fit, none the output already shows."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..text.scoring import features
from .index import RecallIndex
from .terms import terms

__all__ = ["Pick", "choose"]

#: How much a neighbour of a found passage is worth against it: the one after it (the
#: reply, often the answer) and the one before it (what it answers). Tuned on two
#: LoCoMo conversations (0.8 and 0.5: 86.7% of the answers at 10%; 0.6 and 0.4:
#: 85.3%; 0.4 and 0.2: 85.3%).
NEXT_SHARE = 0.8
PREVIOUS_SHARE = 0.5
#: A passage scoring under this share of the best one is not recalled.
FLOOR = 0.15
#: How much what a passage carries (numbers, names, identifiers) adds to its value.
CARRIES = 0.08
_MISSES = 24  # passages in a row too long for the room left: stop looking


class Pick(NamedTuple):
    """A recalled passage: its id in the index and its value."""

    pid: int
    value: float


def choose(
    index: RecallIndex,
    query: str,
    *,
    until: int,
    room: int,
    cost: Callable[[int], int],
    shown: Callable[[str], bool],
) -> list[Pick]:
    """The passages of messages before ``until`` worth recalling for ``query`` within
    ``room`` tokens (``cost`` of a passage id, in tokens), in time order; a passage
    ``shown`` says the output holds already is left out."""
    found = index.search(terms(query), before=until)
    if not found or room <= 0:
        return []
    top = max(found.values())
    passages = index.passages
    last = index.of_message(until - 1).stop if until else 0
    value: dict[int, float] = {}
    for pid, s in found.items():
        if s < FLOOR * top:
            continue
        s /= top
        value[pid] = max(value.get(pid, 0.0), s * _carries(passages[pid].text))
        for near, share in ((pid + 1, NEXT_SHARE), (pid - 1, PREVIOUS_SHARE)):
            if 0 <= near < last:
                value[near] = max(value.get(near, 0.0), s * share)
    picks: list[Pick] = []
    used = misses = 0
    for pid in sorted(value, key=lambda p: (-value[p], p)):
        if shown(passages[pid].text):
            continue
        c = cost(pid)
        if used + c > room:
            misses += 1
            if misses > _MISSES:
                break
            continue
        misses = 0
        picks.append(Pick(pid, value[pid]))
        used += c
    return sorted(picks)


def _carries(text: str) -> float:
    """1 and a little more for what the passage carries besides words."""
    return 1.0 + CARRIES * min(features(text).base, 6.0)
