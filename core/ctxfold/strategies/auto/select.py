"""Stage 3, select: one global choice across all older messages of the sentences,
lines, tool calls and identifiers worth the most per token, greedy, with a discount
for sentences whose words are already said; and the trim that gives back the least
valuable picks when the exact count is over."""

from __future__ import annotations

import heapq
from enum import IntEnum
from typing import NamedTuple

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


class Selection(NamedTuple):
    """What can be chosen, best first, and the identifiers' choices (by pool index)."""

    items: list[Item]
    chosen_ids: list[bool]


def items(
    plans: dict[int, Plan],
    old_idx: list[int],
    first_user: int,
    n: int,
    pool: list[tuple[str, float]],
) -> Selection:
    """Every identifier of the pool, sentence, line and tool call, ranked by value per
    token (newer and task content worth a little more; filler never)."""
    out: list[Item] = []
    order = 0
    for k, (ident, weight) in enumerate(pool):
        out.append(Item(-id_value(ident, weight), order, id_cost(ident), Slot.IDENTIFIER, 0, k))
        order += 1
    for i in old_idx:
        p = plans[i]
        recency = POLICY.recency_floor + POLICY.recency_span * (i / max(n, 1))
        boost = recency * (POLICY.task_boost if i == first_user else 1.0)
        for pi, segs in enumerate(p.segments):
            for si, seg in enumerate(segs):
                cost = len(seg) / p.cpt
                if p.scores[pi][si] < FILLER:
                    continue  # greetings and filler are never worth a token
                value = p.scores[pi][si] * boost
                words = p.words[pi][si] if p.pieces[pi].mode == "prose" else _NO_WORDS
                out.append(Item(-value / max(cost, POLICY.min_cost), order, cost, i, pi, si, words))
                order += 1
        for ci, call_score in enumerate(p.call_scores):
            cost = (len(p.calls[ci].name) + len(p.calls[ci].arguments) + 4) / p.cpt
            out.append(
                Item(
                    -call_score * boost / max(cost, POLICY.min_cost),
                    order,
                    cost,
                    i,
                    Slot.CALL,
                    ci,
                )
            )
            order += 1
    out.sort()
    return Selection(out, [False] * len(pool))


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
    ``top_up``, what is chosen already counts as said."""
    its, chosen_ids = sel.items, sel.chosen_ids
    tagged, covered = _covered(plans) if top_up else (set(), set())
    # Walk the sorted items; a discounted item waits in a small heap of deferred ones
    # and comes back when it is again the best on offer.
    deferred: list[tuple[float, int, int]] = []
    j = 0
    while j < len(its) or deferred:
        if deferred and (j >= len(its) or deferred[0][:2] < its[j][:2]):
            priority, _, k = heapq.heappop(deferred)
            rescored = True
        else:
            k = j
            priority = its[j].priority
            rescored = False
            j += 1
        it = its[k]
        if it.plan == Slot.IDENTIFIER:
            if not chosen_ids[it.seg] and it.cost <= min(room, id_cap):
                chosen_ids[it.seg] = True
                room -= it.cost
                id_cap -= it.cost
            continue
        p = plans[it.plan]
        if p.call_chosen[it.seg] if it.piece == Slot.CALL else p.chosen[it.piece][it.seg]:
            continue
        words = it.words
        if words and not rescored:
            overlap = len(covered.intersection(words)) / len(words)
            if overlap:
                discounted = priority * (1.0 - POLICY.redundancy * overlap)
                heapq.heappush(deferred, (discounted, it.order, k))
                continue
        add = it.cost + (0.0 if it.plan in tagged else POLICY.tag_cost)
        if add > room:
            continue
        room -= add
        tagged.add(it.plan)
        covered.update(words)
        if it.piece == Slot.CALL:
            p.call_chosen[it.seg] = True
        else:
            p.chosen[it.piece][it.seg] = True


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
