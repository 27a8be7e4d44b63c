"""The cache's backends, each a true LRU safe to share between threads:

- :class:`MemoryBackend` (the default): an ordered dict in this process.
- :class:`SQLiteBackend`: a SQLite file, persistent and shared by the processes of one
  machine.
- :class:`RedisBackend`: a Redis server, shared by many processes or machines (needs
  ``pip install 'ctxfold[redis]'``).

A read refreshes an entry's recency, so the entry evicted to make room is always the one
least recently *read or written*, not the oldest written.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ..exceptions import CacheEntryError, CacheError, ConfigurationError
from ._closing import Closing
from ._redis import client_url, import_redis, invalid_url
from ._sqlite import SQL_CHUNK, SQLiteFile, check_sqlite_file, connect, immediate, set_commits
from .spec import mask_credentials, scrub

__all__ = ["CacheBackend", "MemoryBackend", "RedisBackend", "SQLiteBackend", "check_entry"]


def check_entry(key: object, value: object) -> None:
    if not isinstance(key, str):
        raise CacheEntryError(f"cache keys must be str, got {type(key).__name__}")
    if not isinstance(value, bytes):
        raise CacheEntryError(
            f"cache values must be bytes, got {type(value).__name__}; encode it first "
            "(e.g. text.encode('utf-8'), or json.dumps(obj).encode())"
        )


def _check_max_entries(max_entries: object) -> int:
    if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
        raise ConfigurationError(f"max_entries must be an integer >= 1, got {max_entries!r}")
    return max_entries


@runtime_checkable
class CacheBackend(Protocol):
    """Where a :class:`Cache` keeps its entries. This is a Protocol: any object with
    these members works.

    A backend is a bounded, thread-safe LRU map from ``str`` keys to ``bytes`` values:
    ``get`` and ``get_many`` refresh the recency of every entry they find, and ``set``
    evicts the least recently used entries when the backend is over its capacity.
    """

    def get(self, key: str) -> bytes | None:
        """The value under ``key`` (marking it most recently used), or ``None``."""
        ...

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The values under ``keys``, in order (``None`` for a miss), refreshing every
        hit; in one round trip where the backend allows it."""
        ...

    def set(self, key: str, value: bytes) -> int:
        """Store ``value`` under ``key`` as the most recently used entry; returns how
        many entries were evicted to make room."""
        ...

    def clear(self) -> None:
        """Remove every entry of this backend (and nothing else)."""
        ...

    def __len__(self) -> int:
        """The number of entries stored."""
        ...


# --------------------------------------------------------------------------- memory


class MemoryBackend:
    """An in-process LRU: an ordered dict behind a lock. The default backend.

    ``max_entries`` bounds the number of entries; the least recently read or written
    entries are evicted beyond it.
    """

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = _check_max_entries(max_entries)
        self._data: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        """The value under ``key`` (marking it most recently used), or ``None``."""
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The values under ``keys`` (``None`` for a miss), refreshing every hit."""
        out: list[bytes | None] = []
        with self._lock:
            for key in keys:
                value = self._data.get(key)
                if value is not None:
                    self._data.move_to_end(key)
                out.append(value)
        return out

    def set(self, key: str, value: bytes) -> int:
        """Store ``value`` as the most recently used entry; returns the evicted count."""
        check_entry(key, value)
        evicted = 0
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)
                evicted += 1
        return evicted

    def clear(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __repr__(self) -> str:
        return f"MemoryBackend(max_entries={self.max_entries})"


# --------------------------------------------------------------------------- SQLite


class SQLiteBackend(SQLiteFile):
    """An LRU kept in a SQLite file: persistent, and shared by the threads and processes
    of one machine.

    Each row stores its key, value and a recency stamp taken from a counter that is
    kept in the same file and grows by one on every read hit and write (no wall
    clock, so changing the system time cannot reorder entries). When the table holds
    more than ``max_entries`` rows, the rows with the lowest stamps are deleted. The
    file is opened in WAL mode so readers do not block the writer; the directory must
    exist. Use it as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_entries: int = 100_000,
        table: str = "ctxfold_cache",
    ) -> None:
        self.max_entries = _check_max_entries(max_entries)
        raw, self.table = check_sqlite_file(path, table, "cache")
        self.path = raw
        self._meta = f"{table}_meta"
        self._lock = threading.Lock()
        try:
            self._conn: sqlite3.Connection | None = connect(raw)
        except sqlite3.Error as exc:
            raise ConfigurationError(f"cannot open the SQLite cache {raw!r}: {exc}") from None
        try:
            self._setup(self._conn)
        except sqlite3.Error as exc:
            self._conn.close()
            self._conn = None
            raise ConfigurationError(
                f"cannot use {raw!r} as a SQLite cache: {exc}; give a new file or a "
                "SQLite database this backend created"
            ) from None

    def _setup(self, conn: sqlite3.Connection) -> None:
        t, m = self.table, self._meta
        set_commits(conn)
        conn.execute("PRAGMA journal_mode=WAL")
        with immediate(conn):
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {t} "
                "(key TEXT PRIMARY KEY, value BLOB NOT NULL, used INTEGER NOT NULL)"
            )
            conn.execute(f"CREATE INDEX IF NOT EXISTS {t}_used ON {t} (used)")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {m} (name TEXT PRIMARY KEY, value INTEGER NOT NULL)"
            )
            # The clock and the row count live in the file, so every process sharing it
            # agrees on them; triggers keep the count exact without a COUNT(*) scan.
            conn.execute(
                f"INSERT OR IGNORE INTO {m} (name, value) "
                f"SELECT 'clock', COALESCE(MAX(used), 0) FROM {t}"
            )
            conn.execute(
                f"INSERT OR IGNORE INTO {m} (name, value) SELECT 'count', COUNT(*) FROM {t}"
            )
            conn.execute(
                f"CREATE TRIGGER IF NOT EXISTS {t}_ins AFTER INSERT ON {t} BEGIN "
                f"UPDATE {m} SET value = value + 1 WHERE name = 'count'; END"
            )
            conn.execute(
                f"CREATE TRIGGER IF NOT EXISTS {t}_del AFTER DELETE ON {t} BEGIN "
                f"UPDATE {m} SET value = value - 1 WHERE name = 'count'; END"
            )

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise CacheError(f"the SQLite cache {self.path!r} is closed; open a new backend")
        return self._conn

    def _fail(self, exc: sqlite3.Error) -> CacheError:
        return CacheError(
            f"the SQLite cache {self.path!r} failed: {exc}; check that the file is "
            "writable and the disk is not full"
        )

    def _tick(self, conn: sqlite3.Connection, n: int) -> int:
        """Advance the clock by ``n`` and return its new value (inside a transaction)."""
        conn.execute(f"UPDATE {self._meta} SET value = value + ? WHERE name = 'clock'", (n,))
        row = conn.execute(f"SELECT value FROM {self._meta} WHERE name = 'clock'").fetchone()
        return int(row[0])

    def get(self, key: str) -> bytes | None:
        """The value under ``key`` (stamping it most recently used), or ``None``."""
        return self.get_many([key])[0]

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The values under ``keys`` (``None`` for a miss), read with one ``IN`` query
        per 500 keys; every hit is stamped in request order in a single transaction."""
        keys = list(keys)
        if not keys:
            return []
        with self._lock:
            conn = self._connection()
            try:
                found: dict[str, bytes] = {}
                unique = list(dict.fromkeys(keys))
                for start in range(0, len(unique), SQL_CHUNK):
                    chunk = unique[start : start + SQL_CHUNK]
                    marks = ",".join("?" * len(chunk))
                    rows = conn.execute(
                        f"SELECT key, value FROM {self.table} WHERE key IN ({marks})", chunk
                    ).fetchall()
                    found.update((str(k), bytes(v)) for k, v in rows)
                if found:
                    # Later positions are more recent; a repeated key takes its last one.
                    order = list(dict.fromkeys(k for k in reversed(keys) if k in found))
                    order.reverse()
                    with immediate(conn):
                        base = self._tick(conn, len(order)) - len(order)
                        conn.executemany(
                            f"UPDATE {self.table} SET used = ? WHERE key = ?",
                            [(base + i + 1, k) for i, k in enumerate(order)],
                        )
            except sqlite3.Error as exc:
                raise self._fail(exc) from None
        return [found.get(k) for k in keys]

    def set(self, key: str, value: bytes) -> int:
        """Store ``value`` as the most recently used row; returns the evicted count."""
        check_entry(key, value)
        t = self.table
        with self._lock:
            conn = self._connection()
            try:
                with immediate(conn):
                    stamp = self._tick(conn, 1)
                    conn.execute(
                        f"INSERT INTO {t} (key, value, used) VALUES (?, ?, ?) "
                        "ON CONFLICT(key) DO UPDATE SET value = excluded.value, "
                        "used = excluded.used",
                        (key, value, stamp),
                    )
                    count = conn.execute(
                        f"SELECT value FROM {self._meta} WHERE name = 'count'"
                    ).fetchone()[0]
                    evicted = 0
                    if count > self.max_entries:
                        cur = conn.execute(
                            f"DELETE FROM {t} WHERE key IN "
                            f"(SELECT key FROM {t} ORDER BY used LIMIT ?)",
                            (count - self.max_entries,),
                        )
                        evicted = cur.rowcount
            except sqlite3.Error as exc:
                raise self._fail(exc) from None
        return int(evicted)

    def clear(self) -> None:
        """Delete every row of this backend's table (other tables are untouched)."""
        with self._lock:
            conn = self._connection()
            try:
                with immediate(conn):
                    conn.execute(f"DELETE FROM {self.table}")
                    conn.execute(f"UPDATE {self._meta} SET value = 0 WHERE name = 'count'")
            except sqlite3.Error as exc:
                raise self._fail(exc) from None

    def __len__(self) -> int:
        with self._lock:
            conn = self._connection()
            try:
                row = conn.execute(
                    f"SELECT value FROM {self._meta} WHERE name = 'count'"
                ).fetchone()
            except sqlite3.Error as exc:
                raise self._fail(exc) from None
        return int(row[0])

    def __repr__(self) -> str:
        return f"SQLiteBackend({self.path!r}, max_entries={self.max_entries}, table={self.table!r})"


# ---------------------------------------------------------------------------- Redis

# Each script runs atomically on the server, so the values, the recency set and the
# clock stay consistent however many processes share the prefix.
#   KEYS[1] = the recency sorted set, KEYS[2] = the clock
_REDIS_GET = """
local out = {}
for i = 2, #ARGV do
  local v = redis.call('GET', ARGV[1] .. ARGV[i])
  if v then
    redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[2]), ARGV[i])
    out[i - 1] = v
  else
    out[i - 1] = false
  end
end
return out
"""
#   ARGV = value prefix, key, value, max_entries
_REDIS_SET = """
redis.call('SET', ARGV[1] .. ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[2]), ARGV[2])
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[4])
local evicted = 0
if over > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[1], over)
  for i = 1, #popped, 2 do
    redis.call('DEL', ARGV[1] .. popped[i])
    evicted = evicted + 1
  end
end
return evicted
"""
#   ARGV = value prefix; removes up to 1000 entries per call
_REDIS_CLEAR = """
local keys = redis.call('ZRANGE', KEYS[1], 0, 999)
for _, k in ipairs(keys) do
  redis.call('DEL', ARGV[1] .. k)
end
if #keys > 0 then
  redis.call('ZREM', KEYS[1], unpack(keys))
end
return #keys
"""
_REDIS_CHUNK = 1000


class RedisBackend(Closing):
    """An LRU kept on a Redis server, shared by many processes or machines.

    Needs the ``redis`` package (``pip install 'ctxfold[redis]'``). A value lives under
    ``prefix + "v:" + key``; the sorted set ``prefix + "lru"`` scores each key with a
    stamp from the counter ``prefix + "clock"``. Reads and writes run as server-side
    scripts, so a read refreshes the stamp and a write that takes the set past
    ``max_entries`` pops the lowest stamps (``ZPOPMIN``) and deletes their values, all
    atomically. Pass ``client=`` to reuse a ``redis.Redis`` you already have (it must
    not decode responses). The server is pinged here, so a wrong URL fails at once.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        client: Any = None,
        prefix: str = "ctxfold:",
        max_entries: int = 100_000,
    ) -> None:
        self.max_entries = _check_max_entries(max_entries)
        if not isinstance(prefix, str) or not prefix:
            raise ConfigurationError(f"prefix must be a non-empty string, got {prefix!r}")
        if not isinstance(url, str):
            raise ConfigurationError(f"url must be a string, got {type(url).__name__}")
        redis = import_redis()
        self._errors: tuple[type[BaseException], ...] = (redis.exceptions.RedisError,)
        self._unreachable: tuple[type[BaseException], ...] = (
            redis.exceptions.ConnectionError,
            redis.exceptions.TimeoutError,
        )
        self.prefix = prefix
        self._values = prefix + "v:"
        self._lru = prefix + "lru"
        self._clock = prefix + "clock"
        self._owns_client = client is None
        if client is None:
            self.url = url
            try:
                client = redis.Redis.from_url(url, socket_connect_timeout=5.0, socket_timeout=30.0)
            except ValueError as exc:
                raise invalid_url(url, exc) from None
        else:
            self.url = client_url(client)
            kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
            if isinstance(kwargs, dict) and kwargs.get("decode_responses"):
                raise ConfigurationError(
                    "the Redis client decodes responses to str, but cached values are "
                    "bytes; pass a client created with decode_responses=False"
                )
        self._client = client
        self._get_script = client.register_script(_REDIS_GET)
        self._set_script = client.register_script(_REDIS_SET)
        self._clear_script = client.register_script(_REDIS_CLEAR)
        self._call(client.ping)

    def _call(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except self._errors as exc:
            where, why = mask_credentials(self.url), scrub(str(exc), self.url)
            if isinstance(exc, self._unreachable):
                raise CacheError(
                    f"cannot reach the Redis server at {where}: {why.rstrip('.')}; start one "
                    "(redis-server --port 6379 --bind 127.0.0.1) or fix the URL"
                ) from None
            raise CacheError(f"the Redis cache at {where} failed: {why}") from None

    def get(self, key: str) -> bytes | None:
        """The value under ``key`` (stamping it most recently used), or ``None``."""
        return self.get_many([key])[0]

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The values under ``keys`` (``None`` for a miss), one script call (one round
        trip) per 1000 keys; each hit is stamped in request order."""
        keys = list(keys)
        out: list[bytes | None] = []
        for start in range(0, len(keys), _REDIS_CHUNK):
            chunk = keys[start : start + _REDIS_CHUNK]
            values = self._call(
                self._get_script, keys=[self._lru, self._clock], args=[self._values, *chunk]
            )
            out.extend(None if v is None else bytes(v) for v in values)
        return out

    def set(self, key: str, value: bytes) -> int:
        """Store ``value`` as the most recently used entry; returns the evicted count."""
        check_entry(key, value)
        evicted = self._call(
            self._set_script,
            keys=[self._lru, self._clock],
            args=[self._values, key, value, self.max_entries],
        )
        return int(evicted)

    def clear(self) -> None:
        """Delete this prefix's values, recency set and clock; other keys are untouched."""
        while self._call(self._clear_script, keys=[self._lru], args=[self._values]):
            pass
        self._call(self._client.delete, self._clock)

    def __len__(self) -> int:
        return int(self._call(self._client.zcard, self._lru))

    def close(self) -> None:
        """Close the connection pool when this backend created the client."""
        if self._owns_client:
            self._client.close()

    def __repr__(self) -> str:
        return (
            f"RedisBackend({mask_credentials(self.url)!r}, prefix={self.prefix!r}, "
            f"max_entries={self.max_entries})"
        )
