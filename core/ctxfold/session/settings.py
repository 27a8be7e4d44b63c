"""How a session compacts: its settings (the watermarks, the strategy), checked, and
the low-water mark a history sets when none is given."""

from __future__ import annotations

from typing import Any, TypedDict

from ..contract import CounterSpec, Strategy
from ..exceptions import ConfigurationError
from ..strategies.registry import normalize

__all__ = [
    "GAP_RANGE",
    "GAP_TURNS",
    "CompactionOptions",
    "check_strategy",
    "check_water",
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
