"""Process-wide state, in one place: the memo tables of pure functions, the shared
defaults (the cache and the verbatim store a strategy uses when given none) and
:func:`clear_caches`.

A memo table is an :class:`LRU` made with :func:`memo`; a default is made on first use
by :func:`default`. Nothing else in ctxfold keeps module-level mutable state, so
``clear_caches()`` really gives a cold start (the shared cache and store keep their
entries: they hold data, not memos). An :class:`OwnMemo` belongs to an owner (a
session), not to the process: it goes with its owner.
"""

from __future__ import annotations

import gc
import itertools
import operator
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic, TypeVar, cast

__all__ = [
    "LRU",
    "OwnMemo",
    "clear_caches",
    "collector_paused",
    "default",
    "interned",
    "memo",
    "on_clear",
    "own_memo",
    "owning",
    "pause_gc",
]

V = TypeVar("V")
K = TypeVar("K", bound=Hashable)
_MISSING: Any = object()
D = TypeVar("D")


class LRU(Generic[V]):
    """At most ``maxsize`` entries; the least recently used go first, an eighth of
    ``maxsize`` at a time. Thread-safe.

    The entries live in plain dicts in recency order (a hit moves to the end). A
    dict of strings, numbers and tuples of them is one the garbage collector stops
    tracking, where an ``OrderedDict`` is walked entry by entry in every full
    collection (a process's memos were most of what one walked). Eviction goes by
    eighths because a dict finds its oldest key by walking past the slots earlier
    deletions left: one key per insert would cost such a walk each.

    A new entry is a tuple the collector still tracks (it stops after a young
    collection has seen it), and putting one into a dict has the collector walk the
    whole dict again, until a full collection looks at it: a long session's memos,
    a hundred thousand entries, walked in every full collection for the few entries
    a render added (most of such a pause). So new entries wait in a small dict of
    their own and move into the main one once the collector no longer tracks them
    (looked at whenever that dict has doubled): the main table, once a full
    collection has untracked it, stays untracked, unless one call with the collector
    paused adds more than a quarter of ``maxsize`` (the oldest of those move while
    still tracked, so the fresh dict stays bounded; the next full collection
    untracks the table again)."""

    __slots__ = ("_data", "_fresh", "_lock", "_maxsize", "_settle_at")

    def __init__(self, maxsize: int) -> None:
        self._data: dict[Hashable, V] = {}
        self._fresh: dict[Hashable, V] = {}  # entries the collector may still track
        self._maxsize = maxsize
        self._settle_at = min(_SETTLE_FROM, self._fresh_limit() + 1)
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        # No lock: each dict operation is atomic, and a hit that another thread's
        # put or get races with only moves or is computed again (a memo is pure).
        data = self._data
        hit = data.pop(key, None)
        if hit is not None:
            data[key] = hit  # the most recent now
            return hit
        return self._fresh.get(key)  # recent already

    def put(self, key: Hashable, value: V) -> None:
        self._data.pop(key, None)
        fresh = self._fresh
        fresh[key] = value
        if len(fresh) >= self._settle_at or len(fresh) + len(self._data) > self._maxsize:
            self._settle()

    def _fresh_limit(self) -> int:
        return max(self._maxsize // 4, 1)

    def _settle(self) -> None:
        """Move the fresh entries the collector no longer tracks into the main table
        (and, past a quarter of ``maxsize``, the oldest others: values the collector
        keeps tracking must not grow the fresh dict without bound), then forget the
        least recent if the table is over its size."""
        with self._lock:  # one thread moves
            fresh, data, limit = self._fresh, self._data, self._fresh_limit()
            # A copy (at C speed, making no object a collection could start on, so no
            # other thread runs meanwhile): other threads may add to ``fresh``.
            entries = fresh.copy()
            # Over the limit, the oldest move anyway, down to half of it (so the next
            # such move comes after as many more puts: a collector the program
            # turned off must not make every put look through the fresh dict).
            anyway = len(entries) - limit // 2 if len(entries) > limit else 0
            for k, v in entries.items():
                if anyway > 0 or not (gc.is_tracked(v) or gc.is_tracked(k)):
                    data[k] = v
                    fresh.pop(k, None)
                anyway -= 1
            self._settle_at = min(max(2 * len(fresh), _SETTLE_FROM), limit + 1)
        if len(data) + len(fresh) > self._maxsize:
            self._evict()

    def _evict(self) -> None:
        with self._lock:  # one thread evicts
            data = self._data
            extra = len(data) + len(self._fresh) - self._maxsize
            if extra > 0:
                # list(data) copies the keys at once (a get moving a key meanwhile
                # could break an iteration); the oldest come first.
                for old in list(data)[: extra + self._maxsize // 8]:
                    data.pop(old, None)
                fresh = self._fresh  # a tiny table's entries may all be fresh
                for old in list(fresh)[: len(data) + len(fresh) - self._maxsize]:
                    fresh.pop(old, None)

    def cached(self, key: Hashable, make: Callable[..., V], *args: Any) -> V:
        """The value under ``key``; on a miss, ``make(*args)``, kept (None too)."""
        data = self._data
        hit = data.pop(key, _MISSING)
        if hit is not _MISSING:
            data[key] = hit  # the most recent now
            return hit  # type: ignore[no-any-return]
        hit = self._fresh.get(key, _MISSING)
        if hit is _MISSING:
            hit = make(*args)
            self.put(key, hit)
        return hit  # type: ignore[no-any-return]

    def map(self, keys: Sequence[K], make: Callable[[list[K]], Iterable[V]]) -> list[V]:
        """The value of each of ``keys``, in order, looked up in bulk (at C speed, for
        many keys such as a text's words): the keys missing are made in one call,
        ``make(missing)`` (each once, in first-seen order; it returns their values,
        never None, in that order), and kept. Hits found this way keep their place in
        the recency order: the oldest made go first."""
        found = list(map(self._data.get, keys))
        if None not in found:  # all known: the common case, two passes at C speed
            return cast("list[V]", found)
        fresh = self._fresh
        unknown = itertools.compress(keys, map(operator.is_, found, itertools.repeat(None)))
        missing = list(dict.fromkeys(unknown))
        known = {k: v for k in missing if (v := fresh.get(k)) is not None}
        new = [k for k in missing if k not in known]
        if new:
            made = dict(zip(new, make(new), strict=True))
            fresh.update(made.items())
            known.update(made)
        found = list(map(known.get, keys, found))  # found's own where known lacks it
        if len(fresh) >= self._settle_at or len(fresh) + len(self._data) > self._maxsize:
            self._settle()
        return cast("list[V]", found)

    def reserve(self, n: int) -> None:
        """Keep at least ``n`` entries from now on."""
        with self._lock:
            self._maxsize = max(self._maxsize, n)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._fresh.clear()
            self._settle_at = min(_SETTLE_FROM, self._fresh_limit() + 1)

    def __len__(self) -> int:
        return len(self._data) + len(self._fresh)


#: How many fresh entries a table holds before it first looks for settled ones.
_SETTLE_FROM = 256


class OwnMemo:
    """A memo an owner keeps for itself, beside the process's tables: what its calls
    read or made since its last :meth:`turn`, and in the turn before. A value not asked
    for in a whole turn is dropped at the next, so it holds what one turn of its owner
    reads, whatever other owners do with the shared tables (which evict by use across
    all of them).

    Made current for a block by :func:`owning`; a function that memoizes asks
    :func:`own_memo` for it (``None``: no owner, the shared table alone)."""

    __slots__ = ("_before", "_now")

    def __init__(self) -> None:
        self._now: dict[Hashable, Any] = {}
        self._before: dict[Hashable, Any] = {}

    def get(self, key: Hashable) -> Any:
        """The value kept under ``key``, or ``None``."""
        value = self._now.get(key)
        if value is None:
            value = self._before.pop(key, None)
            if value is not None:
                self._now[key] = value
        return value

    def put(self, key: Hashable, value: Any) -> None:
        self._now[key] = value

    def turn(self) -> None:
        """Start a turn: drop what the last turn did not ask for."""
        self._before, self._now = self._now, {}

    def __len__(self) -> int:
        return len(self._now) + len(self._before)


_owner: ContextVar[OwnMemo | None] = ContextVar("ctxfold_own_memo", default=None)


def own_memo() -> OwnMemo | None:
    """The memo of the owner the running call works for (see :func:`owning`)."""
    return _owner.get()


@contextmanager
def owning(memo: OwnMemo) -> Iterator[None]:
    """Run the block for the owner of ``memo`` (in this thread or task only)."""
    token = _owner.set(memo)
    try:
        yield
    finally:
        _owner.reset(token)


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


class _Pause:
    """The collector's pause across calls: how many run, whether to enable it again."""

    wanted = True
    running = 0
    resume = False


def pause_gc(enabled: bool = True) -> None:
    """Whether a call (``compress``, a session's render) pauses Python's cyclic garbage
    collector while it runs (on by default).

    A call makes tens of thousands of objects that live until it returns; a full
    collection in the middle walks them all (a tenth of a cold ``compress``, and up to
    half of a long session's slowest render), though reference counting frees them at
    the end anyway: a call makes no cycles worth collecting early. The pause is shared:
    calls on several threads at once enable the collector again when the last one
    returns, if it was enabled when the first began; a collector disabled by the
    program stays disabled. Turn it off when other threads make much cyclic garbage
    during long calls (a first render of 100,000 messages takes seconds)."""
    _Pause.wanted = enabled


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic garbage collector paused (see :func:`pause_gc`)."""
    if not _Pause.wanted:
        yield
        return
    with _lock:
        if _Pause.running == 0:
            _Pause.resume = gc.isenabled()
            gc.disable()
        _Pause.running += 1
    try:
        yield
    finally:
        with _lock:
            _Pause.running -= 1
            if _Pause.running == 0 and _Pause.resume:
                gc.enable()
