"""One try at compacting, as a source makes it and the driver judges it: an
:class:`Attempt`, its :class:`Outcome` against the ledger's target, and the error the
call raises if it ends on it."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ..exceptions import BudgetError
from .ledger import Ledger, Reserve

__all__ = ["Attempt", "Outcome", "made", "refused"]


class Outcome(enum.Enum):
    """How a try at compacting came out, as the ledger's target judges it."""

    FITS = "fits"
    OVER = "over"  # over the target by what the round added: a smaller room may fit
    KEPT_OVER = "kept_over"  # the strategy kept more than its room (see :func:`made`)
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
        made: the source's compaction, kept by ``Source.keep``.
    """

    ledger: Ledger
    outcome: Outcome
    tokens: int = 0
    added: int = 0
    error: BudgetError | None = None
    needed: int | None = None
    made: Any = None


def made(ledger: Ledger, tokens: int, added: int, compaction: Any, *, best_effort: bool) -> Attempt:
    """A try whose output counts ``tokens`` (``added`` of them the round's): it fits
    the target, or it is over by what the round added (a smaller room may fit), or the
    strategy kept it over (``best_effort``, or a strategy that does not fit its own
    output)."""
    if tokens <= ledger.target:
        return Attempt(ledger, Outcome.FITS, tokens, added, made=compaction)
    outcome = Outcome.KEPT_OVER if best_effort or not added else Outcome.OVER
    required = max(tokens + ledger.charged(Reserve.WAITING), ledger.budget + 1)
    left = f"the {ledger.target} the budget of {ledger.budget} leaves ({ledger.account()})"
    if added:
        said = (
            f"what must be kept and the round's tag take {tokens} tokens, over {left}; "
            "raise the budget, pass reversible=False for a plain result, or "
            "overflow='best_effort'"
        )
    else:
        said = f"the strategy keeps {tokens} tokens, over {left}"
    error = BudgetError(said, required=required, budget=ledger.budget)
    return Attempt(ledger, outcome, tokens, added, error, made=compaction)


def refused(ledger: Ledger, error: BudgetError) -> Attempt:
    """A try in ``ledger`` the strategy refused with ``error``, the room it measured
    short; the error the call raises if it ends here tells of the call's budget (what
    the ledger must set aside added to what the strategy requires)."""
    needed = error.required - ledger.room if error.required > ledger.room else None
    shown = error
    if error.budget != ledger.budget:
        shown = BudgetError(
            f"{error} (the room the budget of {ledger.budget} leaves: {ledger.account()})",
            required=max(error.required + ledger.required_aside, ledger.budget + 1),
            budget=ledger.budget,
        )
    return Attempt(ledger, Outcome.REFUSED, error=shown, needed=needed)
