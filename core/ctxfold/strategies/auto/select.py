"""Stage 3, select: one global choice across all older messages of the sentences,
lines, tool calls and identifiers worth the most per token, greedy, with a discount
for sentences whose words are already said; and the trim that gives back the least
valuable picks when the exact count is over."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Collection
from enum import IntEnum
from functools import partial
from itertools import accumulate
from operator import itemgetter
from typing import Any, NamedTuple, cast

from ...text.scoring import FILLER
from .plan import Plan, id_cost, id_value
from .policy import POLICY

__all__ = ["Item", "Selection", "items", "select", "trim"]

_NO_WORDS: tuple[str, ...] = ()


class Slot(IntEnum):
    """Where an item's choice is recorded, besides a plan's pieces."""

    IDENTIFIER = -2  # Item.plan of an identifier to list in the note
    CALL = -1  # Item.piece of a tool call


class Item(NamedTuple):
    """One selectable thing; items sort best first (tuples compare in C)."""

    priority: float  # minus value per token
    order: int
    cost: float
    plan: int  # message index, or Slot.IDENTIFIER
    piece: int  # Slot.CALL for a tool call
    seg: int
    words: tuple[str, ...] = ()  # a prose sentence's content words


#: An :class:`Item` from a tuple of its fields (without ``Item``'s Python call: a
#: compaction makes thousands).
_item = cast("Callable[[tuple[Any, ...]], Item]", partial(tuple.__new__, Item))


class Selection(NamedTuple):
    """What can be chosen, best first, the identifiers' choices (by pool index), the
    cheapest cost from each item on (``floor[j]``: no item from ``j`` costs less), and
    which identifiers count against the list's cap (those only alike lines showed)."""

    items: list[Item]
    chosen_ids: list[bool]
    floor: list[float]
    capped: list[bool]


def items(
    plans: dict[int, Plan],
    old_idx: list[int],
    first_user: int,
    n: int,
    pool: list[tuple[str, float]],
    capped: Collection[str] = (),
    recency: float = 0.0,
) -> Selection:
    """Every identifier of the pool, sentence, line and tool call, ranked by value per
    token (the task's content worth more; filler never; the newest of ``n`` messages
    worth ``recency`` more than the oldest, those between in proportion)."""
    out = [
        _item((-id_value(ident, weight), k, id_cost(ident), Slot.IDENTIFIER, 0, k, _NO_WORDS))
        for k, (ident, weight) in enumerate(pool)
    ]
    for i in old_idx:
        newer = 1.0 + recency * (i / max(n, 1) - 0.5)
        _offer(out, i, plans[i], newer * (POLICY.task_boost if i == first_user else 1.0))
    out.sort()
    floor = list(accumulate(map(itemgetter(2), reversed(out)), min, initial=math.inf))
    return Selection(out, [False] * len(pool), floor[::-1], [v in capped for v, _ in pool])


def _offer(out: list[Item], i: int, p: Plan, boost: float) -> None:
    """Append what message ``i``'s plan ``p`` offers, its value scaled by ``boost`` (an
    item's order is its place in ``out``)."""
    cpt, min_cost = p.cpt, POLICY.min_cost
    for pi, (segs, scores) in enumerate(zip(p.segments, p.scores, strict=True)):
        words = p.words[pi] if p.pieces[pi].mode == "prose" else None
        for si, (seg, score) in enumerate(zip(segs, scores, strict=True)):
            if score < FILLER:
                continue  # greetings and filler are never worth a token
            cost = len(seg) / cpt
            priority = -(score * boost) / max(cost, min_cost)
            said = _NO_WORDS if words is None else words[si]
            out.append(_item((priority, len(out), cost, i, pi, si, said)))
    for ci, (call, call_score) in enumerate(zip(p.calls, p.call_scores, strict=True)):
        cost = (len(call.name) + len(call.arguments) + 4) / cpt
        priority = -call_score * boost / max(cost, min_cost)
        out.append(_item((priority, len(out), cost, i, Slot.CALL, ci, _NO_WORDS)))


def _covered(plans: dict[int, Plan]) -> tuple[set[int], set[str]]:
    """The messages something is chosen of, and the words already said."""
    tagged = {i for i, p in plans.items() if p.anything()}
    covered: set[str] = set()
    for i in tagged:
        p = plans[i]
        for pi, flags in enumerate(p.chosen):
            covered.update(*(p.words[pi][si] for si, ok in enumerate(flags) if ok))
    return tagged, covered


def select(
    sel: Selection,
    plans: dict[int, Plan],
    room: float,
    id_cap: float,
    *,
    top_up: bool = False,
) -> None:
    """Greedy by value per token, with a discount for sentences whose words are
    already covered (lazily re-ranked), so the note says more different things. With
    ``top_up``, what is chosen already counts as said. The room only shrinks, so an
    item that costs more than it is passed over for good, and the walk ends where
    nothing further fits."""
    its, chosen_ids, floor, capped = sel.items, sel.chosen_ids, sel.floor, sel.capped
    free_ids = id_cap > 0  # a list at all: only what alike lines showed is capped
    tagged, covered = _covered(plans) if top_up else (set(), set())
    redundancy, tag_cost = POLICY.redundancy, POLICY.tag_cost
    identifier, call = Slot.IDENTIFIER, Slot.CALL
    # Walk the sorted items; a discounted item waits in a small heap of deferred ones
    # and comes back when it is again the best on offer (a deferred entry and an item
    # compare by priority, then by their distinct orders).
    deferred: list[tuple[float, int, int]] = []
    j, end = 0, len(its)
    while j < end or deferred:
        if floor[j] > room:
            j = end  # nothing further on the list fits: only the deferred are left
            if not deferred:
                break
        if deferred and (j == end or deferred[0] < its[j]):
            priority, _, k = heapq.heappop(deferred)
            rescored = True
        else:
            k, rescored = j, False
            priority = its[j][0]
            j += 1
        _, order, cost, plan, piece, seg, words = its[k]
        if cost > room:
            continue  # nor will it later
        if plan == identifier:
            if chosen_ids[seg]:
                continue
            if capped[seg] or not free_ids:
                if cost > id_cap:
                    continue
                id_cap -= cost
            chosen_ids[seg] = True
            room -= cost
            continue
        p = plans[plan]
        flags = p.call_chosen if piece == call else p.chosen[piece]
        if flags[seg]:
            continue
        if words and not rescored:
            overlap = len(covered.intersection(words)) / len(words)
            if overlap:
                heapq.heappush(deferred, (priority * (1.0 - redundancy * overlap), order, k))
                continue
        add = cost + (0.0 if plan in tagged else tag_cost)
        if add > room:
            continue
        room -= add
        tagged.add(plan)
        covered.update(words)
        flags[seg] = True


def trim(sel: Selection, plans: dict[int, Plan], excess: float) -> bool:
    """Unselect the least valuable chosen content worth about ``excess`` tokens; whether
    that much was found."""
    freed = 0.0
    for it in reversed(sel.items):
        if it.plan == Slot.IDENTIFIER:
            flags = sel.chosen_ids
        else:
            p = plans[it.plan]
            flags = p.call_chosen if it.piece == Slot.CALL else p.chosen[it.piece]
        if not flags[it.seg]:
            continue
        flags[it.seg] = False
        freed += it.cost
        if freed >= excess:
            return True
    return False
