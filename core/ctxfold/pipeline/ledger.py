"""The ledger: the one account of a call's budget, and the rule for a call's tries.

A call's budget is charged, stage by stage, before the strategy is given its room:

- what the query's passages want (:attr:`Reserve.RECALL`, charged by the plan);
- a call still waiting for its results, shown after the compaction
  (:attr:`Reserve.WAITING`, a session's);
- what a session leaves free below its low-water mark (:attr:`Reserve.LOW_WATER`);

what is left is the *target*, the tokens the compaction's output may take. From it
the reversible round charges what it adds to the strategy's output: its tag and
markers (:attr:`Reserve.ROUND`) and its references (:attr:`Reserve.REFERENCES`); what
is left is the *room* the strategy compacts into. ``fixed`` (the pinned messages) is
the least target worth a try (:meth:`Ledger.floored`).

A try is counted exactly, and its outcome says what the next one corrects (the
driver's loop, :func:`ctxfold.pipeline.driver.run`, at most :data:`MAX_TRIES`, nearly
always one): over its target by what the round added, the next is shrunk by the
overshoot measured (:meth:`Ledger.shrink`); refused (what must be kept did not fit),
the next gives up what the ledger may give up, a :class:`Relief` at a time
(:meth:`Ledger.relief`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from ..contract import Conversation, Strategy
from ..reversible.rounds import RoundSettings, round_share

__all__ = ["MAX_TRIES", "Ledger", "Relief", "Reserve"]

#: Tries a call makes at most (the reversible round's loop made five).
MAX_TRIES = 5


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
#: The round's share of the target (what it adds to the strategy's output).
ROUND_PARTS = frozenset({Reserve.ROUND, Reserve.REFERENCES})
#: What the first relief gives up whole (the round's tag is charged again, bare).
_FREED = (Reserve.LOW_WATER, Reserve.REFERENCES, Reserve.ROUND)


class Relief(enum.IntEnum):
    """How much a ledger has given up after refusals, in the order it gives it up."""

    NONE = 0
    OPTIONAL = 1  # the low-water slack, the references; the query's room as far as needed
    QUERY = 2  # the rest of the query's room
    OVERSHOOT = 3  # of a measured overshoot, what a refusal needs
    TAG = 4  # the round's tag: the strategy given the whole target, the tag measured after


_SLACK = 4  # tokens a shrunk try leaves beyond the overshoot it measured


def _frozen(charges: Mapping[Reserve, int]) -> Mapping[Reserve, int]:
    return MappingProxyType({r: t for r, t in charges.items() if t > 0})


@dataclass(frozen=True)
class Ledger:
    """A call's budget and what is charged against it (see the module).

    Attributes:
        budget: the tokens the call's result may take.
        fixed: the tokens what the strategy pins takes: the least target worth a try.
        charges: the tokens each :class:`Reserve` takes (none: 0).
        relieved: how much it has given up after refusals (:meth:`relief`).
    """

    budget: int
    fixed: int = 0
    charges: Mapping[Reserve, int] = field(default_factory=lambda: MappingProxyType({}))
    relieved: Relief = Relief.NONE

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
    def required_aside(self) -> int:
        """What no relief gives up of the budget beside the strategy's output: a call
        waiting for its results and the round's tag (what a call that cannot fit
        reports required beside what the strategy keeps)."""
        return self.charged(Reserve.WAITING) + self.charged(Reserve.ROUND)

    @property
    def room(self) -> int:
        """The tokens the strategy compacts into: the target less the round's share and
        a measured overshoot (at least 1)."""
        inside = sum(t for r, t in self.charges.items() if r not in OUTSIDE)
        return max(self.target - inside, 1)

    def relief(self, needed: int | None = None) -> Ledger | None:
        """The ledger of a try after a refusal that ``needed`` more tokens of room
        (``None``: unknown), one :class:`Relief` further: first the low-water slack
        and the references (the round's tag charged again, bare) and of the query's
        room at least half, more when the refusal needs it; then the rest of the
        query's room; then of a measured overshoot what the refusal needs; then the
        round's tag (``None``: nothing left to give up)."""
        step = Relief(self.relieved + 1) if self.relieved < Relief.TAG else None
        if step is Relief.OPTIONAL:
            kept = {r: t for r, t in self.charges.items() if r not in _FREED}
            recall = self.charged(Reserve.RECALL)
            freed = self.charged(Reserve.LOW_WATER) + self.charged(Reserve.REFERENCES)
            short = recall if needed is None else needed - freed
            kept[Reserve.RECALL] = max(min(recall // 2, recall - max(short, 0)), 0)
            return replace(self, charges=kept, relieved=step)
        if step is Relief.QUERY and self.charged(Reserve.RECALL):
            return replace(self.charge(Reserve.RECALL, 0), relieved=step)
        overshoot = self.charged(Reserve.OVERSHOOT)
        if step in (Relief.QUERY, Relief.OVERSHOOT) and overshoot:
            given = overshoot if needed is None else max(min(needed, overshoot), 1)
            ledger = self.charge(Reserve.OVERSHOOT, overshoot - given)
            return replace(ledger, relieved=Relief.OVERSHOOT)
        if step is not None and self.charged(Reserve.ROUND):
            return replace(self.charge(Reserve.ROUND, 0), relieved=Relief.TAG)
        return None

    def with_round(self, strategy: Strategy, settings: RoundSettings, conv: Conversation) -> Ledger:
        """This ledger with the share a reversible round of ``strategy`` over ``conv``
        takes of its target charged (:func:`~ctxfold.reversible.rounds.round_share`),
        as far as its relief allows: no references once the optional charges are given
        up, no tag set aside last (its cost is then measured, and a try over by it
        shrunk)."""
        relieved = self.relieved > Relief.NONE
        share = round_share(strategy, settings, conv.with_budget(self.target), relieved=relieved)
        tag = 0 if self.relieved >= Relief.TAG else share.tag
        references = 0 if relieved else share.references
        return self.charge(Reserve.ROUND, tag).charge(Reserve.REFERENCES, references)

    def shrink(self, over: int, added: int) -> Ledger:
        """The ledger of a try after one whose output was ``over`` its target: the
        round's share grown by the overshoot, and to at least the ``added`` tokens the
        round wrote (a strategy's output may not shrink with a few tokens less room),
        with a little slack."""
        share = sum(self.charged(r) for r in ROUND_PARTS) + self.charged(Reserve.OVERSHOOT)
        grown = max(share + over, added) + _SLACK
        return self.charge(Reserve.OVERSHOOT, self.charged(Reserve.OVERSHOOT) + grown - share)

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
