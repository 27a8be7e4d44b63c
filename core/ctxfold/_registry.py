"""One registry type for every family of plug-ins: strategies, renderers, format
adapters and reference extractors.

A :class:`Registry` maps names to entries behind a lock. Readers get a read-only view;
``register`` refuses a taken name unless told to replace it; every change bumps
``version`` so that memo tables keyed by it never reuse stale work. A built-in entry
may be *lazy*, written as ``"package.module:Name"`` and imported on first use (so a
registry never imports the modules it lists), and third-party packages add entries
through an entry-point group, loaded the first time an unknown name is asked for.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from .exceptions import ConfigurationError

__all__ = [
    "Registry",
    "accepted_options",
    "build",
    "check_options",
    "closest",
    "factories",
    "nearest",
    "normalize_option",
]

T = TypeVar("T")
R = TypeVar("R")
_log = logging.getLogger("ctxfold")


def factories(kind: str) -> Callable[[str, object], Callable[..., Any]]:
    """The check of a registry of factories (classes or functions): callable or refused."""

    def check(name: str, factory: object) -> Callable[..., Any]:
        if not callable(factory):
            raise ConfigurationError(f"{kind} {name!r}: factory must be callable")
        return factory

    return check


class Registry(Generic[T]):
    """Named entries of one ``kind`` (``"strategy"``, ``"renderer"``, ...).

    Args:
        kind: what an entry is, for error messages.
        builtins: the entries it starts with (and :meth:`reset` returns to); a string
            ``"module:attribute"`` is imported when first needed.
        group: the entry-point group third-party packages register in, if any.
        check: validates an entry being registered and returns it (raise
            :class:`ConfigurationError` to refuse it); default: accept anything.
    """

    def __init__(
        self,
        kind: str,
        builtins: Mapping[str, T | str],
        *,
        group: str | None = None,
        check: Callable[[str, object], T] | None = None,
    ) -> None:
        self.kind = kind
        self.group = group
        self._builtins = dict(builtins)
        self._entries: dict[str, T | str] = dict(builtins)
        self._check = check
        self._lock = threading.RLock()
        self._version = 0
        self._plugins_loaded = group is None

    @property
    def version(self) -> int:
        """0 while the registry holds its built-ins only; bumped by every change."""
        return self._version

    def view(self) -> Mapping[str, T]:
        """A read-only snapshot of the entries, in registration order."""
        with self._lock:
            return MappingProxyType({name: self._resolve(name) for name in self._entries})

    def names(self) -> list[str]:
        """The registered names, sorted (for messages that list them)."""
        with self._lock:
            return sorted(self._entries)

    def get(self, name: str) -> T | None:
        """The entry called ``name`` (plug-ins loaded on a miss), or ``None``."""
        with self._lock:
            if name in self._entries:
                return self._resolve(name)
        self._load_plugins()
        with self._lock:
            return self._resolve(name) if name in self._entries else None

    def require(self, name: str, *, others: tuple[str, Iterable[str]] | None = None) -> T:
        """The entry called ``name``; :class:`ConfigurationError` listing the known
        names if there is none (and ``others``, a label and names that are valid too,
        such as a strategy's profiles, among the suggestions)."""
        entry = self.get(name)
        if entry is None:
            known = self.names()
            label, extra = others if others is not None else ("", ())
            extra = list(extra)
            more = f"; {label}: {', '.join(extra)}" if extra else ""
            raise ConfigurationError(
                f"unknown {self.kind} {name!r}{closest(name, [*known, *extra])}; "
                f"registered: {', '.join(known)}{more}"
            )
        return entry

    def register(
        self, name: str, entry: object, *, replace: bool = False, first: bool = False
    ) -> None:
        """Add ``entry`` as ``name``; a taken name raises :class:`ConfigurationError`
        unless ``replace``. ``first`` puts it before the others (order matters where
        entries are tried in turn, as format adapters are)."""
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"a {self.kind} name must be a non-empty string")
        checked = self._check(name, entry) if self._check is not None else entry
        with self._lock:
            if name in self._entries and not replace:
                raise ConfigurationError(
                    f"{self.kind} {name!r} is already registered; pass replace=True to override it"
                )
            self._entries.pop(name, None)
            if first:
                self._entries = {name: checked, **self._entries}  # type: ignore[dict-item]
            else:
                self._entries[name] = checked  # type: ignore[assignment]
            self._version += 1

    def unregister(self, name: str, *, missing_ok: bool = False) -> None:
        """Remove ``name``; raises :class:`ConfigurationError` if it is not registered
        (unless ``missing_ok``)."""
        with self._lock:
            if self._entries.pop(name, None) is None:
                if missing_ok:
                    return
                raise ConfigurationError(f"no {self.kind} is registered as {name!r}")
            self._version += 1

    def reset(self) -> None:
        """Back to the built-in entries only."""
        with self._lock:
            self._entries = dict(self._builtins)
            self._version += 1

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._entries

    def _resolve(self, name: str) -> T:
        entry = self._entries[name]
        if isinstance(entry, str) and ":" in entry:
            module, _, attribute = entry.partition(":")
            loaded: T = getattr(importlib.import_module(module), attribute)
            self._entries[name] = loaded
            if name in self._builtins and self._builtins[name] == entry:
                self._builtins[name] = loaded
            return loaded
        return entry  # type: ignore[return-value]

    def _load_plugins(self) -> None:
        """Register what other packages declare in the entry-point group (once;
        built-ins win, and a broken plug-in is logged, never raised)."""
        with self._lock:
            if self._plugins_loaded:
                return
            self._plugins_loaded = True
        for ep in entry_points(group=self.group or ""):
            if ep.name in self:
                continue
            try:
                entry = ep.load()
                checked = self._check(ep.name, entry) if self._check is not None else entry
            except Exception as exc:  # a broken plug-in must not break ctxfold
                _log.warning(
                    "%s plugin %r (%s) failed to load: %r", self.kind, ep.name, ep.value, exc
                )
                continue
            with self._lock:
                self._entries.setdefault(ep.name, checked)


def normalize_option(
    option: Any,
    overrides: Mapping[str, Any],
    resolve: Callable[[Any, dict[str, Any]], R],
    *,
    keys: tuple[str, ...],
) -> R | None:
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


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to a misspelt ``name``, or ``None`` when none is close:
    the one suggester behind every "did you mean"."""
    match = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return match[0] if match else None


def closest(name: str, known: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the known name closest to a misspelt ``name``, or
    ``""`` when none is close."""
    match = nearest(name, known)
    return f" (did you mean {match!r}?)" if match is not None else ""


def check_options(owner: str, given: Iterable[str], accepted: Iterable[str]) -> None:
    """Raise :class:`ConfigurationError` when an option in ``given`` is not one of
    ``accepted``: it names the first such option, the closest accepted one and every
    accepted one. ``owner`` is what takes the options (``"strategy 'auto'"``,
    ``"CompressionMiddleware"``)."""
    valid = sorted(set(accepted))
    unknown = sorted(set(given) - set(valid))
    if unknown:
        name = unknown[0]
        raise ConfigurationError(
            f"{owner} has no option {name!r}{closest(name, valid)}; its options: {', '.join(valid)}"
        )


def accepted_options(factory: Callable[..., Any]) -> list[str] | None:
    """The keyword options ``factory`` takes, sorted: a class's ``__init__`` parameters
    along its bases while each passes ``**kwargs`` on; None when a function passes
    them on to what it cannot name."""
    signatures: list[inspect.Signature] = []
    if isinstance(factory, type):
        for cls in factory.__mro__:
            if cls is not object and "__init__" in vars(cls):
                signatures.append(inspect.signature(vars(cls)["__init__"]))
                if not _forwards(signatures[-1]):
                    break
    else:
        try:
            signatures.append(inspect.signature(factory))
        except (TypeError, ValueError):
            return None
        if _forwards(signatures[-1]):
            return None
    names = {
        p.name
        for sig in signatures
        for p in sig.parameters.values()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"
    }
    return sorted(names)


def _forwards(sig: inspect.Signature) -> bool:
    return any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())


def build(kind: str, label: str, factory: Callable[..., R], options: Mapping[str, Any]) -> R:
    """``factory(**options)``; an option it does not take is a
    :class:`ConfigurationError` naming the closest one and every one it takes."""
    accepted = accepted_options(factory)  # None: it forwards, its TypeError will say
    if accepted is not None:
        check_options(f"{kind} {label!r}", options, accepted)
    try:
        return factory(**options)
    except TypeError as exc:
        raise ConfigurationError(f"{kind} {label!r} rejected its options: {exc}") from None
