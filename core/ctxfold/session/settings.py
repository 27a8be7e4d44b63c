"""How a session compacts: its settings (the watermarks, the strategy), checked, the
low-water mark a history sets when none is given, and how far a compaction fills
(:func:`fill_for`)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any, TypedDict

from ..contract import CounterSpec, Strategy
from ..exceptions import ConfigurationError
from ..messages import Message
from ..strategies.registry import normalize

__all__ = [
    "GAP_RANGE",
    "GAP_TURNS",
    "CompactionOptions",
    "Fill",
    "check_strategy",
    "check_water",
    "exchange_start",
    "fill_for",
    "gap_share",
]

#: With ``low_water=None`` a compaction leaves room for about this many turns' growth
#: (two messages a turn, at the history's mean size), so that about 1 render in 14
#: begins a new prefix; the room is kept between these shares of the budget. (A
#: longer gap leaves each compaction less room: 20 turns kept 3 points fewer LoCoMo
#: answers at 4K, on either half of the conversations.)
GAP_TURNS = 14
GAP_RANGE = (0.1, 0.4)


def check_water(low_water: object, high_water: object) -> tuple[float | None, float]:
    """The watermarks, checked: ``low_water`` (None: set by :func:`gap_share`) and
    ``high_water``, shares of the budget with ``0 < low <= high <= 1``."""
    marks = (high_water,) if low_water is None else (low_water, high_water)
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in marks):
        raise ConfigurationError(
            f"low_water must be a number or None and high_water a number, got "
            f"{low_water!r} and {high_water!r}"
        )
    high = float(high_water)  # type: ignore[arg-type]
    low = high if low_water is None else float(low_water)  # type: ignore[arg-type]
    if not 0 < low <= high <= 1:
        raise ConfigurationError(
            f"watermarks must satisfy 0 < low_water <= high_water <= 1 (shares of the "
            f"budget), got low_water={low} and high_water={high}"
        )
    return (None if low_water is None else low), high


def check_strategy(strategy: Any) -> Strategy:
    """The strategy a session compacts with: any form :func:`ctxfold.normalize` reads,
    implementing :class:`ctxfold.Strategy`."""
    compressor = normalize(strategy)
    if not isinstance(compressor, Strategy):
        raise ConfigurationError(
            f"a session compacts in reversible rounds, so its strategy must implement "
            f"ctxfold.Strategy (compact, pin_roles, overflow); {compressor!r} does not: "
            "use a built-in strategy name such as 'auto' or a BaseCompressor subclass"
        )
    return compressor


class CompactionOptions(TypedDict, total=False):
    """How a session compacts: the settings of :class:`Session` besides its id, budget
    and store (for the wrappers that keep one session per conversation)."""

    strategy: Any
    counter: CounterSpec
    cache_stable: bool
    low_water: float | None
    high_water: float
    recall_share: float | None
    recall_embedder: Any
    redact: bool


def gap_share(high_water: float, tokens: int, messages: int, budget: int) -> float:
    """The low-water mark, as a share of ``budget``, that leaves room for about
    :data:`GAP_TURNS` turns of a history of ``messages`` holding ``tokens``: between
    :data:`GAP_RANGE` of the budget below ``high_water``, never under half of it."""
    per_message = tokens / messages if messages else 0.0
    lo, hi = GAP_RANGE
    gap = min(max(2 * GAP_TURNS * per_message / max(budget, 1), lo), hi)
    return max(high_water - gap, high_water / 2)


class Fill(Enum):
    """How far a compaction fills the room it is given."""

    #: Down to the low-water mark, the room above it left for the turns to come, so
    #: that the renders until the next compaction extend this one (cache-stable).
    LOW_WATER = "low_water"
    #: The whole room less what the query's passages want, as :func:`ctxfold.compress`
    #: fits it: no render was fitted since what it takes in arrived, so no gap left now
    #: keeps a cached prefix, and the one after it settles one.
    ROOM = "room"


def exchange_start(history: Sequence[Message], since: int) -> int:
    """Where the newest exchange begins among ``history[since:]``: its newest assistant
    message, back over the user messages right before it (what arrives between two
    renders: a question and the reply to it, or a reply and what follows it, its tool
    results or the next question); ``since`` when no assistant message is there."""
    at = len(history) - 1
    while at >= since and history[at].role != "assistant":
        at -= 1
    if at < since:
        return since
    while at > since and history[at - 1].role == "user":
        at -= 1
    return at


def fill_for(cache_stable: bool, before_exchange: int, budget: int, *, unsettled: bool) -> Fill:
    """How far a compaction at ``budget`` fills: the whole room when the session is not
    cache-stable, or when the view before the newest exchange (``before_exchange``
    tokens, see :func:`exchange_start`) is itself over the budget: the messages before
    that exchange were never fitted in a render, they arrived at once (a history set or
    put in bulk, a session taken up from a long list, a budget lowered), so nothing
    rendered holds a prefix to keep; and while the compaction that filled its room so
    is ``unsettled`` (nothing has arrived since it: :attr:`.fold.Fold.filled`), so
    that a question asked before the next exchange gets its room as ``compress`` gives
    it. Otherwise down to the low-water mark. A function of the stored history and
    compaction, so a reopened session fills as the live one did; once an exchange
    arrives after a :attr:`Fill.ROOM` compaction, the view before it is within the
    budget, so the compaction after it settles a cache-stable prefix."""
    if not cache_stable or unsettled or before_exchange > budget:
        return Fill.ROOM
    return Fill.LOW_WATER
