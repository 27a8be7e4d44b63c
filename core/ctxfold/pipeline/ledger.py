"""The ledger: the one account of a call's budget, and the one rule for a second try.

A call's budget is charged, stage by stage, before the strategy is given its room:

- what the query's passages want (:attr:`Reserve.RECALL`, charged by the plan);
- a call still waiting for its results, shown after the compaction
  (:attr:`Reserve.WAITING`, a session's);
- what a session leaves free below its low-water mark (:attr:`Reserve.LOW_WATER`);

what is left is the *target*, the tokens the compaction's output may take. From it
the reversible round charges what it adds to the strategy's output: its tag and
markers (:attr:`Reserve.ROUND`) and its references (:attr:`Reserve.REFERENCES`); what
is left is the *room* the strategy compacts into. ``fixed`` (the pinned messages) is
what no target goes below.

A try is counted exactly, and its outcome says what the next one corrects; each
correction is made once, so a call makes at most three tries and nearly always one
(:func:`ctxfold.pipeline.driver.run`): over its target by what the round added, the
next is shrunk by the overshoot measured (:meth:`Ledger.shrink`); refused (what must
be kept did not fit), the next gives up the optional charges, the query's room as far
as the refusal measured it short (:meth:`Ledger.relief`). A target below ``fixed`` is
not tried at all (:meth:`Ledger.floored`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

__all__ = ["Ledger", "Reserve"]


class Reserve(enum.Enum):
    """A part of a call's budget a stage charges (see the module)."""

    RECALL = "recall"
    WAITING = "waiting"
    LOW_WATER = "low_water"
    ROUND = "round"
    REFERENCES = "references"
    OVERSHOOT = "overshoot"


#: Charged outside the compaction's output: what is left is its target.
OUTSIDE = frozenset({Reserve.RECALL, Reserve.WAITING, Reserve.LOW_WATER})
#: Given up by a second try after the first was refused.
OPTIONAL = frozenset({Reserve.RECALL, Reserve.LOW_WATER, Reserve.REFERENCES})
#: The round's share of the target (what it adds to the strategy's output).
ROUND_PARTS = frozenset({Reserve.ROUND, Reserve.REFERENCES})
#: What a relief gives up whole (the query's room: as far as needed).
_FREED = (Reserve.LOW_WATER, Reserve.REFERENCES)
_SLACK = 4  # tokens a shrunk try leaves beyond the overshoot it measured


def _frozen(charges: Mapping[Reserve, int]) -> Mapping[Reserve, int]:
    return MappingProxyType({r: t for r, t in charges.items() if t > 0})


@dataclass(frozen=True)
class Ledger:
    """A call's budget and what is charged against it (see the module).

    Attributes:
        budget: the tokens the call's result may take.
        fixed: the tokens no target goes below (what the strategy pins).
        charges: the tokens each :class:`Reserve` takes (none: 0).
        relieved: the optional charges were given up (a try after a refusal).
        shrunk: the room was shrunk by a measured overshoot (a try after one over).
    """

    budget: int
    fixed: int = 0
    charges: Mapping[Reserve, int] = field(default_factory=lambda: MappingProxyType({}))
    relieved: bool = False
    shrunk: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "charges", _frozen(self.charges))

    def account(self) -> str:
        """What is charged, as an error message tells it."""
        parts = [f"{r.value} {t}" for r, t in self.charges.items()]
        return ", ".join(parts) or "nothing set aside"

    def charged(self, reserve: Reserve) -> int:
        """The tokens ``reserve`` takes."""
        return self.charges.get(reserve, 0)

    def charge(self, reserve: Reserve, tokens: int) -> Ledger:
        """This ledger with ``reserve`` taking ``tokens`` (not added: set)."""
        return replace(self, charges={**self.charges, reserve: max(tokens, 0)})

    @property
    def target(self) -> int:
        """The tokens the compaction's output may take."""
        return self.budget - sum(t for r, t in self.charges.items() if r in OUTSIDE)

    @property
    def room(self) -> int:
        """The tokens the strategy compacts into: the target less the round's share and
        a measured overshoot (at least 1)."""
        inside = sum(t for r, t in self.charges.items() if r not in OUTSIDE)
        return max(self.target - inside, 1)

    def relief(self, needed: int | None = None) -> Ledger | None:
        """The ledger of a try after a refusal that ``needed`` more tokens of room
        (``None``: unknown): the low-water slack and the references given up, of the
        query's room at least half, more when the refusal needs it, and of a measured
        overshoot what the refusal needs beyond them (``None``: given up already, or
        nothing to give up)."""
        if self.relieved:
            return None
        kept = {r: t for r, t in self.charges.items() if r not in OPTIONAL}
        recall, overshoot = self.charged(Reserve.RECALL), self.charged(Reserve.OVERSHOOT)
        if needed is None:
            kept_recall = 0
        else:  # what giving up the rest frees counts first
            needed -= sum(self.charged(r) for r in _FREED)
            kept_recall = max(min(recall // 2, recall - max(needed, 0)), 0)
            needed -= recall - kept_recall
            kept[Reserve.OVERSHOOT] = max(overshoot - max(needed, 0), 0)
        kept[Reserve.RECALL] = kept_recall
        relieved = replace(self, charges=kept, relieved=True)
        return None if relieved.charges == self.charges else relieved

    def shrink(self, over: int, added: int) -> Ledger:
        """The ledger of a second try after a first whose output was ``over`` its
        target: the round's share grown by the overshoot, and to at least the
        ``added`` tokens the round wrote (a strategy's output may not shrink with a
        few tokens less room), with a little slack."""
        share = sum(self.charged(r) for r in ROUND_PARTS) + self.charged(Reserve.OVERSHOOT)
        grown = max(share + over, added) + _SLACK
        overshoot = self.charged(Reserve.OVERSHOOT) + grown - share
        return replace(self.charge(Reserve.OVERSHOOT, overshoot), shrunk=True)

    def floored(self) -> Ledger:
        """This ledger, or, when its target is below what must be kept (such a try is
        not made), one with the low-water slack given up and the query's room halved,
        then given up, as far as it takes (all of them when no target reaches it: the
        strategy says what it needs)."""
        if self.target >= self.fixed:
            return self
        ledger = self.charge(Reserve.LOW_WATER, 0)
        recall = ledger.charged(Reserve.RECALL)
        for kept in (recall, recall // 2, 0):
            floored = ledger.charge(Reserve.RECALL, kept)
            if floored.target >= self.fixed:
                break
        return floored
