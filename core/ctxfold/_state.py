"""Process-wide state, in one place: the memo tables of pure functions, the shared
defaults (the cache and the verbatim store a strategy uses when given none) and
:func:`clear_caches`.

A memo table is an :class:`LRU` made with :func:`memo`; a default is made on first use
by :func:`default`. Nothing else in ctxfold keeps module-level mutable state, so
``clear_caches()`` really gives a cold start (the shared cache and store keep their
entries: they hold data, not memos).
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["LRU", "clear_caches", "default", "interned", "memo", "on_clear"]

V = TypeVar("V")
D = TypeVar("D")


class LRU(Generic[V]):
    """At most ``maxsize`` entries; the least recently used goes first. Thread-safe."""

    def __init__(self, maxsize: int) -> None:
        self._data: OrderedDict[Hashable, V] = OrderedDict()
        self._maxsize = maxsize
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                self._data.move_to_end(key)
            return hit

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            if len(self._data) > self._maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


_lock = threading.Lock()
_clearers: list[Callable[[], None]] = []
_defaults: dict[str, Any] = {}


def memo(maxsize: int) -> LRU[Any]:
    """A new memo table that :func:`clear_caches` empties."""
    table: LRU[Any] = LRU(maxsize)
    on_clear(table.clear)
    return table


_interned: dict[Hashable, int] = {}
_next_id = itertools.count()


def interned(value: Hashable) -> int:
    """A number standing for ``value`` (equal values, the same number; never one
    that stood for another value): for a memo key of strings and numbers only, which
    the garbage collector stops tracking, where ``value`` (settings, adapters) is an
    object it would walk in every key. :func:`clear_caches` forgets the numbers."""
    with _lock:
        hit = _interned.get(value)
        if hit is None:
            hit = _interned[value] = next(_next_id)
        return hit


def on_clear(clear: Callable[[], None]) -> None:
    """Have :func:`clear_caches` call ``clear`` (for a memo that is not an LRU, such
    as a ``functools.lru_cache``'s ``cache_clear``)."""
    with _lock:
        _clearers.append(clear)


def clear_caches() -> None:
    """Forget every memo of this process: the analyses of messages, the references
    found in texts, the shortened texts (for cold timings, or to free memory)."""
    with _lock:
        clearers = list(_clearers)
        _interned.clear()
    for clear in clearers:
        clear()


def default(name: str, make: Callable[[], D]) -> D:
    """The process-wide default called ``name``, made by ``make`` on first use."""
    with _lock:
        if name not in _defaults:
            _defaults[name] = make()
        value: D = _defaults[name]
        return value
