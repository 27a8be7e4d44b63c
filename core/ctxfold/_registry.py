"""Strategy names and how a strategy option becomes a compressor."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from ._auto import AutoCompressor
from ._compressor import Compressor
from ._sliding_window import SlidingWindow
from .exceptions import ConfigurationError

__all__ = ["register_strategy", "resolve_strategy", "strategies"]

StrategyFactory = Callable[..., Compressor]

_lock = threading.Lock()
_registry: dict[str, StrategyFactory] = {
    "auto": AutoCompressor,
    "sliding_window": SlidingWindow,
}
_aliases: dict[str, str] = {}


def strategies() -> Mapping[str, StrategyFactory]:
    """A read-only view of the registered strategy names and their factories."""
    with _lock:
        view = dict(_registry)
        view.update({alias: _registry[target] for alias, target in _aliases.items()})
    return MappingProxyType(view)


def register_strategy(name: str, factory: StrategyFactory, *, replace: bool = False) -> None:
    """Make ``factory`` (a compressor class or a function returning one) available by
    ``name``. Raises :class:`ConfigurationError` if the name is taken, unless ``replace``."""
    if not isinstance(name, str) or not name:
        raise ConfigurationError("a strategy name must be a non-empty string")
    if not callable(factory):
        raise ConfigurationError(f"strategy {name!r}: factory must be callable")
    with _lock:
        if not replace and (name in _registry or name in _aliases):
            raise ConfigurationError(
                f"strategy {name!r} is already registered; pass replace=True to override it"
            )
        _aliases.pop(name, None)
        _registry[name] = factory


def resolve_strategy(strategy: str | Compressor | type[Any], **options: Any) -> Compressor:
    """Turn a strategy name, class or instance (plus options) into a compressor."""
    if isinstance(strategy, str):
        with _lock:
            factory = _registry.get(_aliases.get(strategy, strategy))
        if factory is None:
            names = ", ".join(sorted(strategies()))
            raise ConfigurationError(f"unknown strategy {strategy!r}; registered: {names}")
        return _build(strategy, factory, options)
    if isinstance(strategy, type):
        return _build(strategy.__name__, strategy, options)
    if isinstance(strategy, Compressor):
        if options:
            raise ConfigurationError(
                "options were given with a compressor instance; configure the instance "
                "instead, or pass its class or name with the options"
            )
        return strategy
    raise ConfigurationError(
        "strategy must be a registered name, a compressor class or a compressor instance, "
        f"got {type(strategy).__name__}"
    )


def _build(label: str, factory: StrategyFactory, options: dict[str, Any]) -> Compressor:
    try:
        compressor = factory(**options)
    except TypeError as exc:
        raise ConfigurationError(f"strategy {label!r} rejected its options: {exc}") from None
    if not isinstance(compressor, Compressor):
        raise ConfigurationError(f"strategy {label!r} did not produce a compressor")
    return compressor
