"""The options every built-in strategy shares, declared once as typed dicts, and the
checks of settings the strategies and the wrappers use (a bad value is a
:class:`ctxfold.ConfigurationError` that says what is accepted)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypedDict

from ..contract import Overflow
from ..exceptions import ConfigurationError
from ..messages import ROLES
from ..storage.cache import Cache, get_cache
from ..validity import SYSTEM_ROLES

__all__ = [
    "PIN_ROLES",
    "CachedOptions",
    "ReversibleOptions",
    "SharedOptions",
    "check_cache",
    "check_choice",
    "check_count",
    "check_roles",
    "check_share",
]

#: The roles a strategy pins (always keeps) unless told otherwise.
PIN_ROLES = SYSTEM_ROLES


class ReversibleOptions(TypedDict, total=False):
    """Reversible compaction (see :class:`ctxfold.reversible.RoundSettings`)."""

    reversible: bool
    store: Any
    reference_share: float
    max_references: int | None


class SharedOptions(ReversibleOptions, total=False):
    """What every strategy that selects messages takes."""

    pin_roles: Iterable[str]
    overflow: Overflow
    recall_share: float | None
    recall_embedder: Any
    redact: bool


class CachedOptions(SharedOptions, total=False):
    """...and, for a strategy that calls a model, where its outputs are cached."""

    cache: Any


def check_choice(label: str, value: object, choices: Sequence[str]) -> None:
    """Raise :class:`ConfigurationError` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ConfigurationError(
            f"{label} must be one of {', '.join(repr(c) for c in choices)}, got {value!r}"
        )


def check_roles(label: str, roles: Iterable[str]) -> tuple[str, ...]:
    """Validate a collection of roles; return it as a tuple."""
    if isinstance(roles, str):
        raise ConfigurationError(f"{label} must be a list of roles, not one string")
    out = tuple(roles)
    unknown = set(out) - ROLES
    if unknown:
        raise ConfigurationError(
            f"{label} has unknown roles {sorted(unknown)}; use {sorted(ROLES)}"
        )
    return out


def check_share(label: str, value: object) -> float:
    """Validate a share of the budget: a number in ``[0, 1)``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ConfigurationError(f"{label} must be a number in [0, 1), got {value!r}")
    return float(value)


def check_count(label: str, value: object) -> int:
    """Validate a count: an ``int`` >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{label} must be an integer >= 0, got {value!r}")
    return value


def check_cache(cache: object) -> Cache | None:
    """A ``cache`` option: ``None``/``True`` -> the shared default cache, ``False`` ->
    no cache, anything else as :func:`ctxfold.storage.get_cache` reads it."""
    if cache is False:
        return None
    return get_cache(None if cache is True else cache)  # type: ignore[arg-type]
