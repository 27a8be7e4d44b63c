"""Storage: the model-output cache (:mod:`.cache`: summaries and embeddings keyed by a
hash of their input, over the LRU :mod:`.backends`) and the verbatim store
(:mod:`.store`: every original a reversible round folded, under a content-derived id;
:mod:`.retention`: sessions pruned by age or count).
Both come in memory, SQLite and Redis backends and read the same specs (:mod:`.spec`)."""

from .backends import CacheBackend, MemoryBackend, RedisBackend, SQLiteBackend
from .cache import Cache, CacheStats, cache_key, get_cache
from .retention import Pruned, Retains, prune
from .spec import sqlite_path
from .store import (
    DEFAULT_MAX_BYTES,
    SESSION_PREFIX,
    Deletes,
    MemoryStore,
    NamespacedStore,
    RedisStore,
    SQLiteStore,
    VerbatimStore,
    delete,
    delete_prefix,
    get_session_store,
    get_store,
    put_new,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "SESSION_PREFIX",
    "Cache",
    "CacheBackend",
    "CacheStats",
    "Deletes",
    "MemoryBackend",
    "MemoryStore",
    "NamespacedStore",
    "Pruned",
    "RedisBackend",
    "RedisStore",
    "Retains",
    "SQLiteBackend",
    "SQLiteStore",
    "VerbatimStore",
    "cache_key",
    "delete",
    "delete_prefix",
    "get_cache",
    "get_session_store",
    "get_store",
    "prune",
    "put_new",
    "sqlite_path",
]
