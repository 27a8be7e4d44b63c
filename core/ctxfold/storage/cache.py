"""A cache for summaries and embeddings: content-derived keys, true LRU, three backends
(:mod:`.backends`).

Keys come from :func:`cache_key`, a SHA-256 of everything that determines the value
(the input text, the model, the settings). A :class:`Cache` counts hits, misses and
evictions over any :class:`CacheBackend`:

- :class:`MemoryBackend` (the default): an ordered dict in this process.
- :class:`SQLiteBackend`: a SQLite file, persistent and shared by the processes of one
  machine.
- :class:`RedisBackend`: a Redis server, shared by many processes or machines (needs
  ``pip install 'ctxfold[redis]'``).

Every backend is a true LRU: a read refreshes the entry's recency, so the entry evicted
to make room is always the one least recently *read or written*, not the oldest written.
All of them are safe to share between threads; :class:`Cache` adds ``aget`` / ``aset``
for asyncio, which run the backend call in a worker thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from .._state import default
from ..exceptions import CacheEntryError, ConfigurationError
from ._closing import Closing
from .backends import CacheBackend, MemoryBackend, RedisBackend, SQLiteBackend, check_entry
from .spec import Kind, mask_credentials, require_spec

__all__ = ["Cache", "CacheStats", "cache_key", "get_cache"]


def cache_key(*parts: str | bytes) -> str:
    """A SHA-256 hex digest of ``parts``, for use as a cache key.

    Each part is length-prefixed before hashing, so ``cache_key("ab", "c")`` differs
    from ``cache_key("a", "bc")``; ``str`` parts are UTF-8 encoded, so ``"x"`` and
    ``b"x"`` give the same key. Pass everything that determines the cached value: the
    input, the model or method name, and its settings.
    """
    digest = hashlib.sha256()
    for i, part in enumerate(parts):
        if isinstance(part, str):
            data = part.encode("utf-8", "surrogatepass")
        elif isinstance(part, bytes):
            data = part
        else:
            raise CacheEntryError(
                f"cache_key parts must be str or bytes, part {i} is {type(part).__name__}; "
                "convert it first (e.g. json.dumps(settings, sort_keys=True))"
            )
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


# ---------------------------------------------------------------------------- Cache


@dataclass(frozen=True)
class CacheStats:
    """Counts since the cache was made or its stats were reset.

    ``entries`` is the number of entries the backend holds now (shared backends count
    other processes' entries too).
    """

    hits: int
    misses: int
    evictions: int
    entries: int

    @property
    def hit_rate(self) -> float:
        """Hits over lookups, from 0.0 to 1.0 (0.0 before any lookup)."""
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0


class Cache(Closing):
    """A cache of ``bytes`` values over a :class:`CacheBackend`, with hit, miss and
    eviction counts.

    ``namespace`` keeps caches that share a backend apart (stored keys become
    ``namespace + ":" + key``). Safe to share between threads; ``aget`` / ``aset``
    give the same results from asyncio without blocking the event loop. ``close()``
    (or ``with Cache(...) as cache:``) closes the backend (a SQLite connection, a Redis
    client pool).

    >>> cache = Cache()
    >>> key = cache_key("summarize", "extractive", text)           # doctest: +SKIP
    >>> summary = cache.get_or_compute(key, lambda: summarize(text).encode())  # doctest: +SKIP
    """

    def __init__(self, backend: CacheBackend | None = None, *, namespace: str = "") -> None:
        if backend is None:
            backend = MemoryBackend()
        elif not isinstance(backend, CacheBackend):
            raise ConfigurationError(
                f"backend must be a CacheBackend (MemoryBackend, SQLiteBackend, "
                f"RedisBackend, or an object with get, get_many, set, clear and "
                f"__len__), got {type(backend).__name__}"
            )
        if not isinstance(namespace, str) or ":" in namespace:
            raise ConfigurationError(f"namespace must be a string without ':', got {namespace!r}")
        self.backend = backend
        self.namespace = namespace
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._evictions = 0

    def close(self) -> None:
        """Close the backend, if it has anything to close."""
        close = getattr(self.backend, "close", None)
        if callable(close):
            close()

    def _key(self, key: str) -> str:
        if not isinstance(key, str):
            raise CacheEntryError(f"cache keys must be str, got {type(key).__name__}")
        return f"{self.namespace}:{key}" if self.namespace else key

    def _count(self, hits: int = 0, misses: int = 0, evictions: int = 0) -> None:
        with self._lock:
            self._hits += hits
            self._misses += misses
            self._evictions += evictions

    def get(self, key: str) -> bytes | None:
        """The value under ``key``, or ``None``; counts a hit or a miss."""
        value = self.backend.get(self._key(key))
        self._count(hits=int(value is not None), misses=int(value is None))
        return value

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The values under ``keys``, in order (``None`` for a miss); counts each."""
        if isinstance(keys, (str, bytes)):
            raise CacheEntryError("get_many takes a sequence of keys, not a single key")
        values = self.backend.get_many([self._key(k) for k in keys])
        hits = sum(v is not None for v in values)
        self._count(hits=hits, misses=len(values) - hits)
        return values

    def set(self, key: str, value: bytes) -> None:
        """Store ``value`` (``bytes``) under ``key``; counts any evictions it causes."""
        check_entry(key, value)
        evicted = self.backend.set(self._key(key), value)
        if evicted:
            self._count(evictions=evicted)

    def get_or_compute(self, key: str, compute: Callable[[], bytes]) -> bytes:
        """The value under ``key``; on a miss, ``compute()`` it, store it and return it.

        Two threads that miss the same key at once may both compute it; the last
        write wins, which is harmless when ``compute`` is deterministic.
        """
        value = self.get(key)
        if value is None:
            value = compute()
            self.set(key, value)
        return value

    async def aget(self, key: str) -> bytes | None:
        """:meth:`get`, run in a worker thread."""
        return await asyncio.to_thread(self.get, key)

    async def aget_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """:meth:`get_many`, run in a worker thread."""
        return await asyncio.to_thread(self.get_many, keys)

    async def aset(self, key: str, value: bytes) -> None:
        """:meth:`set`, run in a worker thread."""
        check_entry(key, value)
        await asyncio.to_thread(self.set, key, value)

    async def aget_or_compute(self, key: str, compute: Callable[[], Awaitable[bytes]]) -> bytes:
        """:meth:`get_or_compute` with an async ``compute`` (e.g. an LLM call)."""
        value = await self.aget(key)
        if value is None:
            value = await compute()
            await self.aset(key, value)
        return value

    @property
    def stats(self) -> CacheStats:
        """Hits, misses and evictions so far, and the entries the backend holds now."""
        entries = len(self.backend)
        with self._lock:
            return CacheStats(self._hits, self._misses, self._evictions, entries)

    def reset_stats(self) -> None:
        """Set the hit, miss and eviction counts back to zero."""
        with self._lock:
            self._hits = self._misses = self._evictions = 0

    def clear(self) -> None:
        """Remove every entry from the backend (the counts are kept)."""
        self.backend.clear()

    def __repr__(self) -> str:
        ns = f", namespace={self.namespace!r}" if self.namespace else ""
        return f"Cache({self.backend!r}{ns})"


_SPEC_FORMS = (
    "None (the shared in-memory cache), 'memory', 'sqlite:////abs/path.db', "
    "'sqlite:///relative.db', a path ending in .db/.sqlite/.sqlite3, 'redis://host:port/db' "
    "(or rediss://), a Cache, or a CacheBackend"
)


def get_cache(spec: Cache | CacheBackend | str | os.PathLike[str] | None = None) -> Cache:
    """Resolve a cache spec to a :class:`Cache`.

    ``None`` gives the one in-memory cache this process shares; ``"memory"`` a new
    in-memory cache; ``"sqlite:////abs/path.db"`` (four slashes),
    ``"sqlite:///relative.db"`` (three) or a path
    ending in ``.db`` / ``.sqlite`` / ``.sqlite3`` a SQLite cache; ``"redis://..."``
    (or ``rediss://``) a Redis cache; a :class:`Cache` is returned as is and a
    :class:`CacheBackend` is wrapped in one.
    """
    if spec is None:
        return default("cache", lambda: Cache(MemoryBackend()))
    if isinstance(spec, Cache):
        return spec
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if isinstance(spec, str):
        parsed = require_spec(spec, "cache", _SPEC_FORMS)
        if parsed.kind is Kind.MEMORY:
            return Cache(MemoryBackend())
        if parsed.kind is Kind.REDIS:
            return Cache(RedisBackend(parsed.target))
        if not parsed.target:
            raise ConfigurationError(
                f"cache spec {mask_credentials(spec)!r} names no file; use "
                "'sqlite:////abs/path.db' or "
                "'sqlite:///relative.db'"
            )
        return Cache(SQLiteBackend(parsed.target))
    if isinstance(spec, CacheBackend):
        return Cache(spec)
    raise ConfigurationError(f"cache must be one of {_SPEC_FORMS}; got {type(spec).__name__}")
