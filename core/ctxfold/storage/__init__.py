"""Storage: the model-output cache (:mod:`.cache`: summaries and embeddings keyed by a
hash of their input, over the LRU :mod:`.backends`) and the verbatim store
(:mod:`.store`: every original a reversible round folded, under a content-derived id).
Both come in memory, SQLite and Redis backends and read the same specs (:mod:`.spec`)."""

from .backends import CacheBackend, MemoryBackend, RedisBackend, SQLiteBackend
from .cache import Cache, CacheStats, cache_key, get_cache
from .spec import sqlite_path
from .store import (
    DEFAULT_MAX_BYTES,
    MemoryStore,
    NamespacedStore,
    RedisStore,
    SQLiteStore,
    VerbatimStore,
    get_store,
    put_new,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "Cache",
    "CacheBackend",
    "CacheStats",
    "MemoryBackend",
    "MemoryStore",
    "NamespacedStore",
    "RedisBackend",
    "RedisStore",
    "SQLiteBackend",
    "SQLiteStore",
    "VerbatimStore",
    "cache_key",
    "get_cache",
    "get_store",
    "put_new",
    "sqlite_path",
]
