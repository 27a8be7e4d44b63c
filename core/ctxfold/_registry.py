"""Strategy names and how a strategy option becomes a compressor.

Built-in strategies are registered here; third-party packages add theirs through the
``ctxfold.strategies`` entry-point group (``name = "package.module:Factory"``), loaded
the first time an unknown name is asked for.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from ._auto import AutoCompressor
from ._compressor import Compressor
from ._hierarchical import HierarchicalCompressor
from ._hybrid import HybridCompressor
from ._semantic import SemanticCompressor
from ._sliding_window import SlidingWindow
from ._summarizing import SummarizingCompressor
from .exceptions import ConfigurationError, MissingDependencyError

__all__ = [
    "PROFILES",
    "load_config",
    "normalize",
    "normalize_option",
    "register_strategy",
    "resolve_strategy",
    "strategies",
]

StrategyFactory = Callable[..., Compressor]
ENTRY_POINT_GROUP = "ctxfold.strategies"

_lock = threading.Lock()
_registry: dict[str, StrategyFactory] = {
    "auto": AutoCompressor,
    "sliding_window": SlidingWindow,
    "summarize": SummarizingCompressor,
    "semantic": SemanticCompressor,
    "hierarchical": HierarchicalCompressor,
    "hybrid": HybridCompressor,
}
_aliases: dict[str, str] = {}
_entry_points_loaded = False


def _load_entry_points() -> None:
    """Register the strategies other packages declare (once; built-ins win)."""
    global _entry_points_loaded
    with _lock:
        if _entry_points_loaded:
            return
        _entry_points_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        with _lock:
            if ep.name in _registry:
                continue
        try:
            factory = ep.load()
        except Exception as exc:  # a broken plugin must not break ctxfold
            import logging

            logging.getLogger("ctxfold").warning(
                "strategy plugin %r (%s) failed to load: %r", ep.name, ep.value, exc
            )
            continue
        with _lock:
            _registry.setdefault(ep.name, factory)


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
            _load_entry_points()
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


# ------------------------------------------------------------------ normalize, profiles


def _fast(**kw: Any) -> Compressor:
    return SlidingWindow(keep_first=1, **kw)


def _balanced(**kw: Any) -> Compressor:
    return AutoCompressor(**kw)


def _quality(*, summarizer: Any = None, embedder: Any = None, **kw: Any) -> Compressor:
    return HybridCompressor(
        [
            SemanticCompressor(fit="none", embedder=embedder),
            AutoCompressor(summarizer=summarizer, **kw),
        ]
    )


def _cost(*, summarizer: Any = None, **kw: Any) -> Compressor:
    return SummarizingCompressor(summarizer=summarizer, **kw)


#: Named presets. ``fast``: the newest turns plus the task, no analysis (a window);
#: ``balanced``: ``auto``, the default; ``quality``: semantic deduplication, then
#: ``auto`` (pass ``summarizer=`` to have an LLM write the condensed text); ``cost``: one
#: incremental running summary, so an LLM summarizer is sent only new messages each turn.
PROFILES: Mapping[str, StrategyFactory] = MappingProxyType(
    {"fast": _fast, "balanced": _balanced, "quality": _quality, "cost": _cost}
)

_FORMS = (
    "None/False (off), True (the default strategy), a strategy or profile name "
    f"({', '.join(sorted({*_registry, *PROFILES}))}), a compressor class or instance, "
    "(name_or_class, {options}), or a dict {'strategy': name, ...options}"
)


def normalize(option: Any, **overrides: Any) -> Compressor | None:
    """Turn a compression option into a configured compressor, or ``None`` for off.

    ``None``/``False`` -> ``None``; ``True`` -> ``auto``; a registered strategy name or a
    profile name (:data:`PROFILES`) -> that strategy with its defaults; a class -> an
    instance with its defaults; an instance -> itself; ``(name_or_class, options)`` or
    ``{"strategy": name_or_class, **options}`` -> configured with the options over the
    defaults (``overrides`` are merged over those). Anything else raises
    :class:`ConfigurationError` naming the accepted forms.
    """
    return normalize_option(option, overrides, _strategy_of, keys=("strategy", "profile"))


def _strategy_of(option: Any, options: dict[str, Any]) -> Compressor:
    if option is True:
        return resolve_strategy("auto", **options)
    if isinstance(option, str):
        if option in PROFILES:
            return _build(option, PROFILES[option], options)
        return resolve_strategy(option, **options)
    if isinstance(option, (type, Compressor)):
        return resolve_strategy(option, **options)
    raise ConfigurationError(f"cannot use {option!r} as a compression option; use {_FORMS}")


T = TypeVar("T")


def normalize_option(
    option: Any,
    overrides: Mapping[str, Any],
    resolve: Callable[[Any, dict[str, Any]], T],
    *,
    keys: tuple[str, ...],
) -> T | None:
    """The one normalization every option shares: ``None``/``False`` -> off;
    ``(target, options)`` and ``{keys[0]: target, **options}`` unwrap to ``target`` with
    the options merged over its defaults (``overrides`` over those); anything else,
    ``True`` included, goes to ``resolve(option, options)``, which raises for what it
    cannot use."""
    if option is None or option is False:
        return None
    if isinstance(option, tuple) and len(option) == 2 and isinstance(option[1], Mapping):
        return normalize_option(option[0], {**option[1], **overrides}, resolve, keys=keys)
    if isinstance(option, Mapping):
        opts = dict(option)
        targets = [opts.pop(k) for k in keys if k in opts]
        if not targets or isinstance(targets[0], (bool, Mapping)):
            names = " (or ".join(repr(k) for k in keys) + ")" * (len(keys) - 1)
            raise ConfigurationError(f"a settings dict needs a {names} key; got {sorted(option)}")
        return normalize_option(targets[0], {**opts, **overrides}, resolve, keys=keys)
    return resolve(option, dict(overrides))


def load_config(path: str | os.PathLike[str], *, section: str = "ctxfold") -> Compressor | None:
    """Read a compressor from a TOML or YAML file (by extension) and normalize it.

    The file holds a table (``[ctxfold]`` in TOML, a ``ctxfold:`` mapping in YAML, or
    the top level when that key is absent) with ``strategy`` or ``profile`` and the
    options, e.g. ``strategy = "hybrid"`` and ``steps = ["semantic", "auto"]``.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise ConfigurationError(f"{p}: use a .toml, .yaml or .yml configuration file")
    try:
        raw = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read the configuration file {p}: {exc}") from None
    data: Any
    if suffix == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            try:
                import tomli as tomllib
            except ModuleNotFoundError:
                raise MissingDependencyError(
                    "reading TOML configuration on Python 3.10", "tomli", "config"
                ) from None
        try:
            data = tomllib.loads(raw)
        except ValueError as exc:
            raise ConfigurationError(f"{p} is not valid TOML: {exc}") from None
    else:
        try:
            import yaml
        except ModuleNotFoundError:
            raise MissingDependencyError("reading YAML configuration", "yaml", "config") from None
        try:
            data = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ConfigurationError(f"{p} is not valid YAML: {exc}") from None
    if not isinstance(data, Mapping):
        raise ConfigurationError(f"{p} must hold a table of settings")
    table = data.get(section, data)
    if not isinstance(table, Mapping):
        raise ConfigurationError(f"{p}: [{section}] must be a table of settings")
    return normalize(dict(table))
