"""Strategy names and how a strategy option becomes a compressor.

Built-in strategies are registered here by module path and imported when first asked
for (so this module imports none of them); third-party packages add theirs through the
``ctxfold.strategies`` entry-point group (``name = "package.module:Factory"``), loaded
the first time an unknown name is asked for. Profiles are named presets over them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .._registry import Registry, build, check_options, factories, normalize_option
from ..contract import Compressor
from ..exceptions import ConfigurationError, MissingDependencyError

__all__ = [
    "PROFILES",
    "REGISTRY",
    "check_options",
    "load_config",
    "normalize",
    "register_strategy",
    "registered",
    "resolve_strategy",
]

StrategyFactory = Callable[..., Compressor]


#: The strategies by name (imported when first asked for); plug-ins register in the
#: ``ctxfold.strategies`` entry-point group (``name = "package.module:Factory"``).
REGISTRY: Registry[StrategyFactory] = Registry(
    "strategy",
    {
        "auto": "ctxfold.strategies.auto:AutoCompressor",
        "sliding_window": "ctxfold.strategies.sliding_window:SlidingWindow",
        "summarize": "ctxfold.strategies.summarizing:SummarizingCompressor",
        "semantic": "ctxfold.strategies.semantic:SemanticCompressor",
        "hierarchical": "ctxfold.strategies.hierarchical:HierarchicalCompressor",
        "hybrid": "ctxfold.strategies.hybrid:HybridCompressor",
    },
    group="ctxfold.strategies",
    check=factories("strategy"),
)


def registered() -> Mapping[str, StrategyFactory]:
    """A read-only view of the registered strategy names and their factories."""
    return REGISTRY.view()


def register_strategy(name: str, factory: StrategyFactory, *, replace: bool = False) -> None:
    """Make ``factory`` (a compressor class or a function returning one) available by
    ``name``. Raises :class:`ConfigurationError` if the name is taken, unless ``replace``."""
    REGISTRY.register(name, factory, replace=replace)


def resolve_strategy(strategy: Any, **options: Any) -> Compressor:
    """Turn a strategy option (plus options) into a compressor: any form
    :func:`normalize` reads but off (``None``/``False``): a strategy or profile name,
    a compressor class or instance, ``(name_or_class, {options})`` or a dict
    ``{"strategy": name, **options}``; ``options`` are merged over the form's own."""
    compressor = normalize(strategy, **options)
    if compressor is None:
        raise ConfigurationError(f"strategy must be {_COMPRESSOR_FORMS}; got {strategy!r}")
    return compressor


def _resolve(strategy: str | Compressor | type[Any], options: dict[str, Any]) -> Compressor:
    """A registered name, a class or an instance, with ``options``, as a compressor."""
    if isinstance(strategy, str):
        return _build(strategy, _require(strategy), options)
    if isinstance(strategy, type):
        return _build(strategy.__name__, strategy, options)
    if options:
        raise ConfigurationError(
            "options were given with a compressor instance; configure the instance "
            "instead, or pass its class or name with the options"
        )
    return strategy


def _require(name: str) -> StrategyFactory:
    """The strategy registered as ``name``; an unknown one names the closest strategy
    or profile and every one."""
    return REGISTRY.require(name, others=("profiles", PROFILES))


def _build(label: str, factory: StrategyFactory, options: dict[str, Any]) -> Compressor:
    compressor = build("strategy", label, factory, options)
    if not isinstance(compressor, Compressor):
        raise ConfigurationError(f"strategy {label!r} did not produce a compressor")
    return compressor


# ------------------------------------------------------------------ normalize, profiles


def _fast(**kw: Any) -> Compressor:
    return REGISTRY.require("sliding_window")(keep_first=1, **kw)


def _balanced(**kw: Any) -> Compressor:
    return REGISTRY.require("auto")(**kw)


def _quality(*, summarizer: Any = None, embedder: Any = None, **kw: Any) -> Compressor:
    return REGISTRY.require("hybrid")(
        [
            REGISTRY.require("semantic")(fit="none", embedder=embedder),
            REGISTRY.require("auto")(summarizer=summarizer, **kw),
        ]
    )


def _cost(*, summarizer: Any = None, **kw: Any) -> Compressor:
    return REGISTRY.require("summarize")(summarizer=summarizer, **kw)


#: Named presets. ``fast``: the newest turns plus the task, no analysis (a window);
#: ``balanced``: ``auto``, the default; ``quality``: semantic deduplication, then
#: ``auto`` (pass ``summarizer=`` to have an LLM write the condensed text); ``cost``: one
#: incremental running summary, so an LLM summarizer is sent only new messages each turn.
PROFILES: Mapping[str, StrategyFactory] = MappingProxyType(
    {"fast": _fast, "balanced": _balanced, "quality": _quality, "cost": _cost}
)

#: The forms of a strategy option that name a compressor, and all of them (off too).
_COMPRESSOR_FORMS = (
    f"a strategy or profile name ({', '.join(sorted({*REGISTRY.names(), *PROFILES}))}), "
    "a compressor class or instance, (name_or_class, {options}), or a dict "
    "{'strategy': name, ...options}"
)
_FORMS = f"None/False (off), True (the default strategy), {_COMPRESSOR_FORMS}"


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
        return _resolve("auto", options)
    if isinstance(option, str) and option in PROFILES:
        return _build(option, PROFILES[option], options)
    if isinstance(option, (str, type, Compressor)):
        return _resolve(option, options)
    raise ConfigurationError(f"strategy must be {_FORMS}; got {option!r}")


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
