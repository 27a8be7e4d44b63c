"""Which passages a query recalls: each passage the query's terms find (BM25) or that
was said in a period it names, valued by that relevance and by what it carries
(numbers, names, identifiers), with the passages beside it (the reply holds the
answer as often as the line that matched); that ranking read in turn with the plain
one (whole messages by that relevance, each with the messages beside it, as BM25 +
neighbours takes them), so what the plain ranking puts first is never left behind;
then the best first while they fit a room, none the output already shows."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from heapq import heappop, heappush
from typing import NamedTuple

from ..tokens import TokenCounter
from .index import RecallIndex
from .periods import periods
from .terms import terms

__all__ = ["Fused", "Pick", "Ranked", "Ranking", "choose", "fit", "plain", "rank"]

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
#: With an embedder: the similarity under which a passage gains nothing, and what the
#: most similar passage gains against the best BM25 score. Tuned with WordLlama on two
#: LoCoMo conversations: 0.3 and 0.5 kept 90.7% of the answers at 10% and 76.0% at 3%
#: (BM25 alone: 86.7% and 73.3%); 0.3 and 1.0: 86.7%, 70.7%; 0.3 and 0.3: 88.0%,
#: 74.7%; 0.5 and 0.5: 89.3%, 76.0%.
SIMILAR_FLOOR = 0.3
SIMILAR_WEIGHT = 0.5
_MISSES = 24  # passages in a row too long for the room left: stop looking


class Pick(NamedTuple):
    """A recalled passage: its id in the index, its value, and whether it is shown in
    full (a sentence its brief text leaves out holds a term of the query)."""

    pid: int
    value: float
    full: bool = False


class _Made:
    """A ranking made as far as it is read: ``_make`` appends the next passage and
    value to ``_made`` (False when there is none); reading it again reads what was
    made, then makes more."""

    def __init__(self) -> None:
        self._made: list[tuple[int, float]] = []

    def __iter__(self) -> Iterator[tuple[int, float]]:
        k = 0
        while k < len(self._made) or self._make():
            yield self._made[k]
            k += 1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Made) or type(other) is not type(self):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def _make(self) -> bool:
        raise NotImplementedError


class Ranked(_Made):
    """The passages a query finds, best first (by value, then position), with their
    values: made in that order as they are read, so reading the best few hundred of a
    long history's tens of thousands finds what carries (:meth:`RecallIndex.carries`)
    only for the passages that could be among them.

    Each found passage scoring at least :data:`FLOOR` of the best is worth its share
    of the best, times up to ``1 + 6 * CARRIES`` for what it carries; its neighbours
    a share of that. Passages are taken best score first; the best value made so far
    is final once no passage left could reach it, itself or as a neighbour."""

    _LIFT = 1.0 + CARRIES * 6.0  # the most what a passage carries multiplies it by

    def __init__(self, index: RecallIndex, scores: dict[int, float], last: int) -> None:
        top = max(scores.values(), default=0.0)
        hits = [(pid, s / top) for pid, s in scores.items() if s >= FLOOR * top]
        hits.sort(key=lambda hit: -hit[1])
        self._index, self._last = index, last
        self._hits, self._next = hits, 0  # hits[_next:] are still to take
        self._value: dict[int, float] = {}
        self._heap: list[tuple[float, int]] = []  # (-value, pid), stale ones skipped
        super().__init__()

    def _make(self) -> bool:
        """Make the next passage of the ranking; False when there is none."""
        heap, value, hits = self._heap, self._value, self._hits
        while True:
            bound = hits[self._next][1] * self._LIFT if self._next < len(hits) else -1.0
            while heap and -heap[0][0] != value[heap[0][1]]:
                heappop(heap)  # a value since raised
            if heap and -heap[0][0] > bound:
                negative, pid = heappop(heap)
                value[pid] = math.inf  # made: nothing raises it again
                self._made.append((pid, -negative))
                return True
            if self._next == len(hits):
                return False
            self._take(*hits[self._next])
            self._next += 1

    def _take(self, pid: int, s: float) -> None:
        carries = 1.0 + CARRIES * min(self._index.carries(pid), 6.0)
        self._raise(pid, s * carries)
        for near, share in ((pid + 1, NEXT_SHARE), (pid - 1, PREVIOUS_SHARE)):
            if 0 <= near < self._last:
                self._raise(near, s * share)

    def _raise(self, pid: int, v: float) -> None:
        if v > self._value.get(pid, 0.0):
            self._value[pid] = v
            heappush(self._heap, (-v, pid))


def plain(index: RecallIndex, scores: dict[int, float], last: int) -> Iterator[int]:
    """The passages in the order BM25 + neighbours takes whole messages: those
    holding a passage of ``scores`` by their best passage's score (the later of two
    alike first), each message's passages followed by those of the message after it
    and the one before it; none at or past passage ``last``, none twice."""
    best: dict[int, float] = {}
    of = index.passages.messages
    for pid, s in scores.items():
        k = of[pid]
        if s > best.get(k, 0.0):
            best[k] = s
    given: set[int] = set()
    for k in sorted(best, key=lambda k: (-best[k], -k)):
        for near in (k, k + 1, k - 1):
            if 0 <= near < len(index) and near not in given:
                given.add(near)
                yield from (pid for pid in index.of_message(near) if pid < last)


class Fused(_Made):
    """Rankings read in turn, a rank of each at a time, each passage taken where it is
    first read (then skipped): within any room, the best of every ranking come
    first, each as far down as the others. A passage's value is ``1 / (its place +
    1)``. Made as far as it is read."""

    def __init__(self, *rankings: Iterable[int]) -> None:
        self._lists = [iter(r) for r in rankings]
        self._turn = 0
        self._taken: set[int] = set()
        super().__init__()

    def _make(self) -> bool:
        """Make the next passage; False when there is none."""
        while self._lists:
            self._turn %= len(self._lists)
            pid = next(self._lists[self._turn], None)
            if pid is None:  # this ranking is read to its end: the others go on
                del self._lists[self._turn]
                continue
            self._turn += 1
            if pid not in self._taken:
                self._taken.add(pid)
                self._made.append((pid, 1.0 / (len(self._made) + 1)))
                return True
        return False


class Ranking(NamedTuple):
    """The passages a query finds, best first, with their values (see :class:`Fused`);
    and the query's terms that show a passage in full (see
    :meth:`RecallIndex.leaves_out`)."""

    found: Fused
    asked: frozenset[str]


def choose(
    index: RecallIndex,
    query: str,
    *,
    until: int,
    room: int,
    counter: TokenCounter,
    shown: str,
) -> list[Pick]:
    """The passages of messages before ``until`` worth recalling for ``query`` within
    ``room`` tokens (as a block shows them, counted by ``counter``), in time order; a
    passage the text ``shown`` holds already is left out."""
    if room <= 0:
        return []
    return fit(index, rank(index, query, until), room=room, counter=counter, shown=shown)


def rank(index: RecallIndex, query: str, until: int) -> Ranking:
    """The passages of messages before ``until`` that ``query`` finds, best first:
    read in turn from two rankings (see :class:`Fused`), :class:`Ranked` (each worth
    its relevance, a share of the best, and a little more for what it carries; its
    neighbours a share of that) and :func:`plain` (whole messages by relevance, each
    with its neighbours, as BM25 + neighbours takes them). The last ranking of each
    index is kept (a render asks twice: how much room, then what fits) until the
    index grows."""
    key = ("rank", query, until)
    kept = index.derived.get(key)
    if isinstance(kept, Ranking):
        return kept
    ranking = _rank(index, query, until)
    index.derived.clear()
    index.derived[key] = ranking
    return ranking


def _rank(index: RecallIndex, query: str, until: int) -> Ranking:
    words = terms(query)
    asked = frozenset(words).difference(index.names)  # not "Thanks, Mel!"
    last = index.of_message(until - 1).stop if until > 0 else 0  # none before
    scores = _valued(index, words, query, until)
    valued = Ranked(index, scores, last)
    return Ranking(Fused((pid for pid, _ in valued), plain(index, scores, last)), asked)


def fit(
    index: RecallIndex, ranking: Ranking, *, room: int, counter: TokenCounter, shown: str
) -> list[Pick]:
    """The best passages of ``ranking`` that fit ``room`` tokens, in time order; none
    that the text ``shown`` holds already, none twice."""
    passages = index.passages
    picks: list[Pick] = []
    said: set[str] = set()  # a text said twice (a greeting, a stock reply) is shown once
    used = misses = 0
    for pid, value in ranking.found:
        text = passages[pid].text
        if text in said or text in shown:
            continue
        full = not ranking.asked.isdisjoint(index.leaves_out(pid))
        c = index.cost(pid, counter, full)
        if used + c > room:
            misses += 1
            if misses > _MISSES:
                break
            continue
        misses = 0
        picks.append(Pick(pid, value, full))
        said.add(text)
        used += c
    return sorted(picks)


def _valued(index: RecallIndex, words: tuple[str, ...], query: str, until: int) -> dict[int, float]:
    """Each passage's relevance: its BM25 score on the query's ``words``, plus a
    term's worth when it was said in a period the query names, plus, with an
    embedder, its similarity to the query (above :data:`SIMILAR_FLOOR`, scaled so the
    most similar passage counts :data:`SIMILAR_WEIGHT` of the best BM25 score)."""
    bm25 = index.search(words, before=until)
    during = index.during(periods(query), before=until)
    sims = index.similar(query, before=until)
    best = max(sims.values(), default=0.0)
    if not during and best <= SIMILAR_FLOOR:
        return bm25
    found = dict(bm25)
    for pid, s in during.items():
        found[pid] = found.get(pid, 0.0) + s
    if best <= SIMILAR_FLOOR:
        return found
    scale = SIMILAR_WEIGHT * max(found.values(), default=1.0) / (best - SIMILAR_FLOOR)
    fused = dict(found)
    for pid, sim in sims.items():
        if sim > SIMILAR_FLOOR:
            fused[pid] = fused.get(pid, 0.0) + (sim - SIMILAR_FLOOR) * scale
    return fused
