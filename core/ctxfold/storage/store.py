"""The verbatim store: every span a compressor removes, summarizes or rewrites, kept
under a content-derived id so that it can always be given back.

A store maps ids to ``bytes`` and never overwrites: an id is derived from its content,
so writing it again is a no-op. It forgets only when told (:class:`Deletes`:
:func:`ctxfold.storage.delete`, :func:`ctxfold.storage.prune`, ``Session.delete``), or
in a memory store given a ``max_bytes`` cap (the process's default store has one),
which drops its oldest entries past the cap, never a session's
(:data:`SESSION_PREFIX`). :meth:`VerbatimStore.put_many` writes a
batch atomically (one SQLite transaction, one Redis ``MULTI``/``EXEC``), so a crash
cannot leave a compressed history whose markers point at nothing.

Backends: :class:`MemoryStore` (the default, one per process), :class:`SQLiteStore`
(a file: persistent, shared by the processes of one machine) and :class:`RedisStore`
(shared by many machines; ``pip install 'ctxfold[redis]'``).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .._state import LRU, default
from ..exceptions import CacheError, ConfigurationError, CorruptRecordError
from ._closing import Closing
from ._redis import import_redis, invalid_url
from ._sqlite import (
    SQL_CHUNK,
    WAIT_S,
    SQLiteFile,
    check_sqlite_file,
    connect,
    immediate,
    prefix_range,
    set_commits,
)
from .spec import Kind, mask_credentials, parse_spec, scrub

__all__ = [
    "SESSION_PREFIX",
    "Deletes",
    "MemoryStore",
    "NamespacedStore",
    "RedisStore",
    "SQLiteStore",
    "VerbatimStore",
    "delete",
    "delete_prefix",
    "deleting",
    "get_session_store",
    "get_store",
    "put_new",
    "session_store",
]

#: What the process's shared default memory store holds at most (256 MiB).
DEFAULT_MAX_BYTES = 256 * 2**20
#: The start of every session's namespace (``ctxfold:session:<length of id>:<id>:``):
#: a capped memory store never drops an entry under it.
SESSION_PREFIX = "ctxfold:session:"
_log = logging.getLogger("ctxfold")


@runtime_checkable
class VerbatimStore(Protocol):
    """Where originals live. This is a Protocol: any object with these methods works.

    ``put_many`` stores a batch atomically and never overwrites an id that exists;
    ``get_many`` returns the values in order, ``None`` for an unknown id.
    """

    def put_many(self, entries: Mapping[str, bytes]) -> None:
        """Store every entry, all or none; existing ids keep their value."""
        ...

    def get_many(self, ids: Sequence[str]) -> list[bytes | None]:
        """The values under ``ids``, in order (``None`` where unknown)."""
        ...


@runtime_checkable
class Deletes(Protocol):
    """What a store needs so that entries can be deleted (``Session.delete``,
    ``Session.clear(drop_originals=True)``, :func:`ctxfold.storage.prune`): optional,
    the built-in stores have it; a store of your own without it gets a
    :class:`ctxfold.ConfigurationError` saying so when asked to delete."""

    def delete_many(self, ids: Sequence[str]) -> int:
        """Delete the entries under ``ids`` (unknown ids are skipped): how many were."""
        ...

    def ids_with_prefix(self, prefix: str) -> list[str]:
        """Every id that begins with ``prefix`` (``""``: every id)."""
        ...


def _check_entries(entries: Mapping[str, bytes]) -> None:
    for key, value in entries.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"store ids must be non-empty strings, got {key!r}")
        if not isinstance(value, bytes):
            raise ConfigurationError(
                f"store values must be bytes, got {type(value).__name__} for {key!r}"
            )


class MemoryStore:
    """A dict behind a lock, for the life of the process.

    ``max_bytes`` caps what it holds outside sessions' namespaces: past it, the entries
    written longest ago go first (writing an entry again counts as new), and
    :func:`ctxfold.expand` reports their ids as missing. A session's entries (ids under
    :data:`SESSION_PREFIX`) are never dropped and do not count against the cap: they
    go only with ``Session.delete`` or :func:`ctxfold.storage.prune`. ``None`` (the
    default for a store you make) keeps everything; the process's shared default store
    keeps :data:`DEFAULT_MAX_BYTES`. For originals that must survive, use
    :class:`SQLiteStore` or :class:`RedisStore`.

    ``key`` is the secret the store's signed records and keyed marks are made with
    (:func:`ctxfold.reversible.records.secret_key`; at least 16 bytes): by default 32
    random bytes made with the store, so nothing it signs can be forged or confirmed
    from outside the process. Pass one to make such output the same across processes.
    """

    def __init__(self, *, max_bytes: int | None = None, key: bytes | None = None) -> None:
        if key is not None and (not isinstance(key, bytes) or len(key) < 16):
            raise ConfigurationError(
                f"key must be bytes of at least 16 (os.urandom(32)), got {key!r:.40}"
            )
        self.key: bytes = os.urandom(32) if key is None else key
        if max_bytes is not None and (
            isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1
        ):
            raise ConfigurationError(
                f"max_bytes must be a positive integer or None, got {max_bytes!r}"
            )
        self._max_bytes = max_bytes
        # Every entry is in a plain dict of strings and bytes, which the garbage
        # collector does not track. A capped store also keeps the ids it may drop in the
        # order written, the oldest found at once (an ordered dict), a session's never;
        # an uncapped one, whose order nothing reads, keeps none: some 40 bytes an
        # entry less (a 100,000-message session holds 200,000).
        self._data: dict[str, bytes] = {}
        self._order: OrderedDict[str, None] | None = None if max_bytes is None else OrderedDict()
        self._bytes = 0
        self._capped_bytes = 0  # of the entries in _order
        self._written: dict[str, float] = {}  # namespace -> when it was last written
        self._lock = threading.Lock()
        self.evicted = 0  # entries dropped to stay within max_bytes

    def put_many(self, entries: Mapping[str, bytes], *, namespace: str | None = None) -> None:
        """Store every entry; existing ids keep their value (and count as new).
        ``namespace``: the entries are that namespace's, written now (see
        :meth:`namespaces`)."""
        _check_entries(entries)
        with self._lock:
            self._put(entries)
            if namespace is not None:
                self._written[namespace] = time.time()

    def put_new(self, entries: Mapping[str, bytes], *, namespace: str | None = None) -> list[str]:
        """Store every entry if none of the ids exists, else nothing: the ids taken
        (``namespace`` as for :meth:`put_many`)."""
        _check_entries(entries)
        with self._lock:
            taken = [key for key in entries if key in self._data]
            if not taken:
                self._put(entries)
                if namespace is not None:
                    self._written[namespace] = time.time()
            return taken

    @property
    def max_bytes(self) -> int | None:
        """The most the store holds, ids and values (``None``: no cap)."""
        return self._max_bytes

    def _put(self, entries: Mapping[str, bytes]) -> None:
        data, order = self._data, self._order
        if order is None:
            for key, value in entries.items():
                if key not in data:
                    data[key] = value
                    self._bytes += len(key) + len(value)
            return
        for key, value in entries.items():
            if key not in data:
                data[key] = value
                self._bytes += len(key) + len(value)
                if not key.startswith(SESSION_PREFIX):
                    order[key] = None
                    self._capped_bytes += len(key) + len(value)
            elif key in order:
                order.move_to_end(key)  # written again: the newest
        if self._max_bytes is not None and self._capped_bytes > self._max_bytes:
            self._evict(order, self._max_bytes, set(entries))

    def _evict(self, order: OrderedDict[str, None], cap: int, written: set[str]) -> None:
        """Drop the entries written longest ago until ``cap`` holds, never one of
        ``written`` (the batch just written) nor a session's (never in ``order``)."""
        dropped = 0
        while self._capped_bytes > cap and order:
            key = next(iter(order))
            if key in written:
                break
            del order[key]
            size = len(key) + len(self._data.pop(key))
            self._bytes -= size
            self._capped_bytes -= size
            dropped += 1
        if dropped and not self.evicted:
            _log.warning(
                "ctxfold: the memory store passed %d bytes and dropped its oldest "
                "originals; give the compressor store='sqlite:///originals.db' (or a "
                "Redis URL) to keep every one",
                cap,
            )
        self.evicted += dropped

    def get_many(self, ids: Sequence[str]) -> list[bytes | None]:
        """The values under ``ids``, in order (``None`` where unknown)."""
        with self._lock:
            return list(map(self._data.get, ids))

    def delete_many(self, ids: Sequence[str]) -> int:
        """Delete the entries under ``ids``: how many there were."""
        with self._lock:
            return self._delete(ids)

    def _delete(self, ids: Iterable[str]) -> int:
        data, order, n = self._data, self._order, 0
        for key in ids:
            value = data.pop(key, None)
            if value is None:
                continue
            n += 1
            self._bytes -= len(key) + len(value)
            if order is not None and key in order:
                del order[key]
                self._capped_bytes -= len(key) + len(value)
        return n

    def ids_with_prefix(self, prefix: str) -> list[str]:
        """Every id that begins with ``prefix``."""
        with self._lock:
            return [key for key in self._data if key.startswith(prefix)]

    def delete_prefix(self, prefix: str) -> int:
        """Delete every entry whose id begins with ``prefix``, and the write times of
        the namespaces that do, at once: how many entries there were."""
        with self._lock:
            n = self._delete([key for key in self._data if key.startswith(prefix)])
            for namespace in [ns for ns in self._written if ns.startswith(prefix)]:
                del self._written[namespace]
            return n

    def namespaces(self, prefix: str = "") -> dict[str, float]:
        """When each namespace beginning with ``prefix`` was last written (seconds since
        the epoch), as :class:`NamespacedStore` writes report it."""
        with self._lock:
            return {ns: t for ns, t in self._written.items() if ns.startswith(prefix)}

    @property
    def nbytes(self) -> int:
        """The bytes of the ids and values held."""
        return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __repr__(self) -> str:
        return f"MemoryStore({len(self)} entries, {self._bytes} bytes)"


_STAMP_EVERY = 1.0  # seconds: how stale a namespace's recorded write time may be


class _Stamps:
    """When this store object last recorded each namespace's write time (see
    :meth:`SQLiteStore.namespaces`): a write records it again once that is
    ``_STAMP_EVERY`` old, so a session's turns do not each cost one more statement
    (prune's clock is to the second)."""

    def __init__(self) -> None:
        self._at: LRU[float] = LRU(4096)

    def due(self, namespace: str | None) -> float | None:
        """The time to record for ``namespace`` with a write now, or None (no
        namespace, or one recorded within ``_STAMP_EVERY``)."""
        if namespace is None:
            return None
        now, last = time.time(), self._at.get(namespace)
        return now if last is None or now - last >= _STAMP_EVERY else None

    def forget(self) -> None:
        """Forget what was recorded (namespaces were deleted: a write records again)."""
        self._at = LRU(4096)

    def recorded(self, namespace: str | None, at: float | None) -> None:
        """Note that ``at`` was recorded for ``namespace`` (nothing if either is None)."""
        if namespace is not None and at is not None:
            self._at.put(namespace, at)


class SQLiteStore(SQLiteFile):
    """A table in a SQLite file (WAL mode): persistent, and shared by the threads and
    processes of one machine. A batch is one transaction. Use it as a context manager
    or call :meth:`close`.

    A commit survives the process's crash; ``durable=True`` flushes each one to the
    disk so that it survives a power loss too (a disk flush per write).

    When each namespace was last written (see :meth:`namespaces`) is kept in a second
    table, ``<table>_written``, written in the same transaction as the entries."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table: str = "ctxfold_store",
        durable: bool = False,
    ) -> None:
        self.path, self.table = check_sqlite_file(path, table, "store")
        #: Whether every commit is flushed to the disk (``synchronous=FULL``).
        self.durable = bool(durable)
        self._lock = threading.Lock()
        self._written = f"{self.table}_written"  # namespace -> when last written
        self._has_written = False  # whether that table is known to exist
        self._stamps = _Stamps()
        exists = self.path != ":memory:" and os.path.exists(self.path)
        #: Whether the file can only be read (``expand`` works; writing raises).
        self.read_only = exists and not os.access(self.path, os.W_OK)
        self._conn: sqlite3.Connection | None = self._open(exists)

    def _open(self, exists: bool) -> sqlite3.Connection:
        """Connect; create the table only when it is missing, so opening an existing
        store writes nothing (a read-only file opens, a writer elsewhere is no hurdle)."""
        target = f"file:{self.path}?mode=ro" if self.read_only else self.path
        try:
            conn = connect(target, uri=self.read_only)
        except sqlite3.Error as exc:
            raise ConfigurationError(f"cannot open the SQLite store {self.path!r}: {exc}") from None
        try:
            set_commits(conn, durable=self.durable)
            if exists and self._has_table(conn):
                return conn
            if self.read_only:
                raise sqlite3.OperationalError(f"no table {self.table} in a read-only file")
            conn.execute("PRAGMA journal_mode=WAL")
            with immediate(conn):
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.table} "
                    "(id TEXT PRIMARY KEY, value BLOB NOT NULL)"
                )
                self._create_written(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise ConfigurationError(
                f"cannot use {self.path!r} as a SQLite store: {_why(exc)}"
            ) from None
        return conn

    def _has_table(self, conn: sqlite3.Connection, table: str | None = None) -> bool:
        row = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
            (table or self.table,),
        ).fetchone()
        return row is not None

    def _create_written(self, conn: sqlite3.Connection) -> None:
        """The table of namespaces' write times (in a write transaction; a file made by
        an older ctxfold gets it at its first write to a namespace)."""
        if not self._has_written:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._written} "
                "(namespace TEXT PRIMARY KEY, at REAL NOT NULL)"
            )
            self._has_written = True

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise CacheError(f"the SQLite store {self.path!r} is closed; open a new one")
        return self._conn

    def put_many(self, entries: Mapping[str, bytes], *, namespace: str | None = None) -> None:
        """Store every entry in one transaction; existing ids keep their value.
        ``namespace``: the entries are that namespace's, written now (see
        :meth:`namespaces`; in the same transaction)."""
        self._write(entries, only_new=False, namespace=namespace)

    def put_new(self, entries: Mapping[str, bytes], *, namespace: str | None = None) -> list[str]:
        """Store every entry if none of the ids exists, else nothing (one transaction
        that holds the file's write lock, so two processes cannot both succeed): the
        ids taken (``namespace`` as for :meth:`put_many`)."""
        return self._write(entries, only_new=True, namespace=namespace)

    def _write(
        self, entries: Mapping[str, bytes], *, only_new: bool, namespace: str | None = None
    ) -> list[str]:
        _check_entries(entries)
        if not entries:
            return []
        verb = "INSERT" if only_new else "INSERT OR IGNORE"
        with self._lock:
            conn, at = self._connection(), self._stamps.due(namespace)
            try:
                with immediate(conn):
                    taken = list(self._found(conn, list(entries))) if only_new else []
                    if not taken:
                        conn.executemany(
                            f"{verb} INTO {self.table} (id, value) VALUES (?, ?)",
                            list(entries.items()),
                        )
                    if not taken and at is not None:
                        self._create_written(conn)
                        conn.execute(
                            f"INSERT OR REPLACE INTO {self._written} (namespace, at) VALUES (?, ?)",
                            (namespace, at),
                        )
            except sqlite3.Error as exc:
                raise CacheError(
                    f"the SQLite store {self.path!r} failed: {_why(exc)}; nothing of this "
                    "batch was written"
                ) from None
            if not taken:
                self._stamps.recorded(namespace, at)
        return taken

    def get_many(self, ids: Sequence[str]) -> list[bytes | None]:
        """The values under ``ids``, in order (``None`` where unknown)."""
        ids = list(ids)
        with self._lock:
            conn = self._connection()
            try:
                found = self._found(conn, ids)
            except sqlite3.Error as exc:
                raise CacheError(f"the SQLite store {self.path!r} failed: {_why(exc)}") from None
        return [found.get(i) for i in ids]

    def delete_many(self, ids: Sequence[str]) -> int:
        """Delete the entries under ``ids``, in one transaction: how many there were."""
        ids = list(dict.fromkeys(ids))
        with self._lock:
            conn = self._connection()
            try:
                with immediate(conn):
                    n = 0
                    for start in range(0, len(ids), SQL_CHUNK):
                        chunk = ids[start : start + SQL_CHUNK]
                        marks = ",".join("?" * len(chunk))
                        cur = conn.execute(f"DELETE FROM {self.table} WHERE id IN ({marks})", chunk)
                        n += cur.rowcount
            except sqlite3.Error as exc:
                raise CacheError(
                    f"the SQLite store {self.path!r} failed: {_why(exc)}; nothing was deleted"
                ) from None
        return n

    def ids_with_prefix(self, prefix: str) -> list[str]:
        """Every id that begins with ``prefix`` (a range of the table's index)."""
        where, params = prefix_range("id", prefix)
        with self._lock:
            conn = self._connection()
            try:
                rows = conn.execute(f"SELECT id FROM {self.table} WHERE {where}", params)
                return [str(row[0]) for row in rows]
            except sqlite3.Error as exc:
                raise CacheError(f"the SQLite store {self.path!r} failed: {_why(exc)}") from None

    def delete_prefix(self, prefix: str) -> int:
        """Delete every entry whose id begins with ``prefix``, and the write times of
        the namespaces that do, in one transaction: how many entries there were."""
        where, params = prefix_range("id", prefix)
        spaces, space_params = prefix_range("namespace", prefix)
        self._stamps.forget()
        with self._lock:
            conn = self._connection()
            try:
                with immediate(conn):
                    n = conn.execute(f"DELETE FROM {self.table} WHERE {where}", params).rowcount
                    if self._has_written or self._has_table(conn, self._written):
                        conn.execute(f"DELETE FROM {self._written} WHERE {spaces}", space_params)
            except sqlite3.Error as exc:
                raise CacheError(
                    f"the SQLite store {self.path!r} failed: {_why(exc)}; nothing was deleted"
                ) from None
        return int(n)

    def namespaces(self, prefix: str = "") -> dict[str, float]:
        """When each namespace beginning with ``prefix`` was last written (seconds since
        the epoch), as :class:`NamespacedStore` writes report it."""
        where, params = prefix_range("namespace", prefix)
        with self._lock:
            conn = self._connection()
            try:
                if not (self._has_written or self._has_table(conn, self._written)):
                    return {}
                rows = conn.execute(
                    f"SELECT namespace, at FROM {self._written} WHERE {where}", params
                )
                return {str(ns): float(at) for ns, at in rows}
            except sqlite3.Error as exc:
                raise CacheError(f"the SQLite store {self.path!r} failed: {_why(exc)}") from None

    def _found(self, conn: sqlite3.Connection, ids: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for start in range(0, len(ids), SQL_CHUNK):
            chunk = ids[start : start + SQL_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(f"SELECT id, value FROM {self.table} WHERE id IN ({marks})", chunk)
            for k, v in rows:
                if not isinstance(v, (bytes, memoryview)):  # the file was edited by hand
                    raise CorruptRecordError(
                        f"the SQLite store {self.path!r} holds a {type(v).__name__} under "
                        f"{k!r}, not bytes: restore the file from a backup",
                        ids=(k,),
                    )
                found[k] = bytes(v)
        return found

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r}, table={self.table!r})"


def _why(exc: sqlite3.Error) -> str:
    """What went wrong with a SQLite file, and what to do about it."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return (
            f"{text}: another process holds the file's write lock (waited {WAIT_S:g} s); retry "
            "when it is done, or give each writer its own file"
        )
    if "readonly" in text or "read-only" in text:
        return f"{text}: the file (or its folder) is read-only; it can be read, not written"
    if "not a database" in text or "malformed" in text:
        return f"{text}: the file is not a SQLite store; give a new file or one a store created"
    return f"{text}; check that the file is writable and the disk not full"


_WRITTEN = "~namespaces"  # after a Redis store's prefix: its namespaces' write times
_REDIS_CHUNK = 500


def _glob_escape(text: str) -> str:
    """``text`` matched literally in a Redis ``SCAN MATCH`` pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class RedisStore(Closing):
    """Keys ``prefix + id`` in a Redis server, shared by every process and machine that
    reaches it. A batch is one ``MULTI``/``EXEC`` of ``SET NX`` (all or none, never an
    overwrite). Entries do not expire: configure the server without eviction
    (``maxmemory-policy noeviction``) so nothing is lost.

    When each namespace was last written (see :meth:`namespaces`) is kept in the sorted
    set ``prefix + "~namespaces"`` (no id ctxfold makes), updated in the transaction
    of the write."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        client: Any = None,
        prefix: str = "ctxfold:store:",
    ) -> None:
        if not isinstance(prefix, str) or not prefix:
            raise ConfigurationError(f"prefix must be a non-empty string, got {prefix!r}")
        if not isinstance(url, str):
            raise ConfigurationError(f"url must be a string, got {type(url).__name__}")
        redis = import_redis("store")
        self._errors: tuple[type[BaseException], ...] = (redis.exceptions.RedisError,)
        self.prefix = prefix
        self._written = prefix + _WRITTEN  # the sorted set of namespaces' write times
        self._stamps = _Stamps()
        self._owns_client = client is None
        if client is None:
            try:
                client = redis.Redis.from_url(url, socket_connect_timeout=5.0, socket_timeout=30.0)
            except ValueError as exc:
                raise invalid_url(url, exc) from None
        self.url = url
        self._client = client
        self._call(client.ping)

    def _call(self, func: Any, *args: Any) -> Any:
        try:
            return func(*args)
        except self._errors as exc:
            raise CacheError(
                f"the Redis store at {mask_credentials(self.url)} failed: "
                f"{scrub(str(exc), self.url)}; check that the "
                "server runs (redis-server --port 6379 --bind 127.0.0.1) and the URL"
            ) from None

    def put_many(self, entries: Mapping[str, bytes], *, namespace: str | None = None) -> None:
        """Store every entry in one transaction; existing ids keep their value.
        ``namespace``: the entries are that namespace's, written now (see
        :meth:`namespaces`; in the same transaction)."""
        _check_entries(entries)
        if not entries:
            return
        pipe = self._client.pipeline(transaction=True)
        for key, value in entries.items():
            pipe.set(self.prefix + key, value, nx=True)
        at = self._stamps.due(namespace)
        if namespace is not None and at is not None:
            pipe.zadd(self._written, {namespace: at})
        self._call(pipe.execute)
        self._stamps.recorded(namespace, at)

    def put_new(self, entries: Mapping[str, bytes], *, namespace: str | None = None) -> list[str]:
        """Store every entry if none of the ids exists, else nothing (one ``MSETNX``,
        atomic on the server): the ids taken (``namespace`` as for :meth:`put_many`,
        in the same transaction)."""
        _check_entries(entries)
        if not entries:
            return []
        keyed = {self.prefix + key: value for key, value in entries.items()}
        at = self._stamps.due(namespace)
        if namespace is None or at is None:
            stored = self._call(self._client.msetnx, keyed)
        else:
            pipe = self._client.pipeline(transaction=True)
            pipe.msetnx(keyed)
            pipe.zadd(self._written, {namespace: at})
            stored = self._call(pipe.execute)[0]
        if stored:
            self._stamps.recorded(namespace, at)
            return []
        values = self.get_many(list(entries))
        return [key for key, v in zip(entries, values, strict=True) if v is not None]

    def delete_many(self, ids: Sequence[str]) -> int:
        """Delete the entries under ``ids`` (``UNLINK``, 500 a call): how many there were."""
        ids = list(dict.fromkeys(ids))
        n = 0
        for start in range(0, len(ids), _REDIS_CHUNK):
            chunk = [self.prefix + i for i in ids[start : start + _REDIS_CHUNK]]
            n += int(self._call(self._client.unlink, *chunk))
        return n

    def ids_with_prefix(self, prefix: str) -> list[str]:
        """Every id that begins with ``prefix`` (a ``SCAN`` of the server's keys)."""
        pattern = _glob_escape(self.prefix + prefix) + "*"
        keys = self._call(lambda: list(self._client.scan_iter(match=pattern, count=1000)))
        n = len(self.prefix)
        ids = [(k.decode() if isinstance(k, bytes) else str(k))[n:] for k in keys]
        return [i for i in ids if i != _WRITTEN]

    def delete_prefix(self, prefix: str) -> int:
        """Delete every entry whose id begins with ``prefix``, then the write times of
        the namespaces that do: how many entries there were (not atomic: a ``SCAN``,
        then ``UNLINK`` in batches)."""
        self._stamps.forget()
        n = self.delete_many(self.ids_with_prefix(prefix))
        gone = list(self.namespaces(prefix))
        if gone:
            self._call(self._client.zrem, self._written, *gone)
        return n

    def namespaces(self, prefix: str = "") -> dict[str, float]:
        """When each namespace beginning with ``prefix`` was last written (seconds since
        the epoch), as :class:`NamespacedStore` writes report it."""
        pairs = self._call(self._client.zrange, self._written, 0, -1, False, True)
        out = {}
        for ns, at in pairs:
            name = ns.decode() if isinstance(ns, bytes) else str(ns)
            if name.startswith(prefix):
                out[name] = float(at)
        return out

    def get_many(self, ids: Sequence[str]) -> list[bytes | None]:
        """The values under ``ids``, in order (``None`` where unknown)."""
        ids = list(ids)
        if not ids:
            return []
        values = self._call(self._client.mget, [self.prefix + i for i in ids])
        return [None if v is None else bytes(v) for v in values]

    def close(self) -> None:
        """Release the connection pool this store created (not a client passed in)."""
        if self._owns_client:
            self._client.close()

    def __repr__(self) -> str:
        return f"RedisStore({mask_credentials(self.url)!r}, prefix={self.prefix!r})"


class NamespacedStore:
    """One namespace of another store: every id is written and read as
    ``namespace + id``. A :class:`ctxfold.Session` writes through one named for its id,
    so two sessions sharing a store never read each other's entries. A write through
    it records when the namespace was last written, in a built-in store (see
    :meth:`MemoryStore.namespaces`)."""

    def __init__(self, store: VerbatimStore, namespace: str) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise ConfigurationError(f"namespace must be a non-empty string, got {namespace!r}")
        self.store = store
        self.namespace = namespace

    def put_many(self, entries: Mapping[str, bytes]) -> None:
        """Store every entry under the namespace, all or none."""
        _check_entries(entries)
        ns, store = self.namespace, self.store
        keyed = {ns + key: value for key, value in entries.items()}
        if isinstance(store, _TRACKING):
            store.put_many(keyed, namespace=ns)
        else:
            store.put_many(keyed)

    def put_new(self, entries: Mapping[str, bytes]) -> list[str]:
        """Store every entry under the namespace if none exists, else nothing: the ids
        taken (see :func:`put_new`)."""
        _check_entries(entries)
        ns, store = self.namespace, self.store
        keyed = {ns + key: value for key, value in entries.items()}
        if isinstance(store, _TRACKING):
            taken = store.put_new(keyed, namespace=ns)
        else:
            taken = put_new(store, keyed)
        return [key.removeprefix(ns) for key in taken]

    def get_many(self, ids: Sequence[str]) -> list[bytes | None]:
        """The values under ``ids`` in the namespace, in order (``None`` where unknown)."""
        ns = self.namespace
        return self.store.get_many([ns + i for i in ids])

    def delete_many(self, ids: Sequence[str]) -> int:
        """Delete the entries under ``ids`` in the namespace: how many there were."""
        ns = self.namespace
        return deleting(self.store).delete_many([ns + i for i in ids])

    def ids_with_prefix(self, prefix: str) -> list[str]:
        """Every id in the namespace that begins with ``prefix`` (without the namespace)."""
        ns = self.namespace
        return [i.removeprefix(ns) for i in deleting(self.store).ids_with_prefix(ns + prefix)]

    def delete_prefix(self, prefix: str) -> int:
        """Delete every entry in the namespace whose id begins with ``prefix`` (``""``:
        the whole namespace, and when it was written): how many there were."""
        return delete_prefix(self.store, self.namespace + prefix)

    def __repr__(self) -> str:
        return f"NamespacedStore({self.store!r}, {self.namespace!r})"


def deleting(store: VerbatimStore) -> Deletes:
    """``store``, checked to be able to delete (:class:`Deletes`), or a
    :class:`ctxfold.ConfigurationError` saying what it lacks."""
    if isinstance(store, Deletes):
        return store
    raise ConfigurationError(
        f"the store {store!r} cannot delete entries: give its class the methods "
        "delete_many(ids) -> int and ids_with_prefix(prefix) -> list[str] "
        "(see ctxfold.storage.Deletes), or use a built-in store"
    )


def delete(store: VerbatimStore, ids: Iterable[str]) -> int:
    """Delete the entries under ``ids`` from ``store``: how many there were. A store of
    your own must implement :class:`Deletes` (else :class:`ctxfold.ConfigurationError`)."""
    return deleting(store).delete_many(list(ids))


def delete_prefix(store: VerbatimStore, prefix: str) -> int:
    """Delete every entry of ``store`` whose id begins with ``prefix`` (in one
    transaction in SQLite; a ``SCAN`` and batches of ``UNLINK`` in Redis), and the
    write times of the namespaces that do: how many entries there were."""
    if not isinstance(prefix, str):
        raise ConfigurationError(f"prefix must be a string, got {type(prefix).__name__}")
    method = getattr(store, "delete_prefix", None)
    if callable(method):
        n: int = method(prefix)
        return n
    deleter = deleting(store)
    return deleter.delete_many(deleter.ids_with_prefix(prefix))


def put_new(store: VerbatimStore, entries: Mapping[str, bytes]) -> list[str]:
    """Write ``entries`` to ``store`` only if none of their ids exists there: the ids
    already taken (nothing written), or ``[]``. Atomic with the built-in stores; a store
    of your own without a ``put_new`` method is checked, then written, which two
    processes could interleave."""
    method = getattr(store, "put_new", None)
    if callable(method):
        taken: list[str] = method(entries)
        return taken
    values = store.get_many(list(entries))
    taken = [key for key, v in zip(entries, values, strict=True) if v is not None]
    if not taken:
        store.put_many(entries)
    return taken


#: The stores that record when each namespace was written (``namespace=`` on writes).
_TRACKING = (MemoryStore, SQLiteStore, RedisStore)

_FORMS = (
    "None or 'memory' (the process's memory store), 'sqlite:///relative.db', "
    "'sqlite:////abs/path.db' (or a path ending in .db), 'redis://host:6379/0', or an "
    "object with put_many and get_many"
)


def _shared_memory_store() -> MemoryStore:
    return default("store", lambda: MemoryStore(max_bytes=DEFAULT_MAX_BYTES))


def session_store() -> MemoryStore:
    """The memory store of this process's sessions: one, never capped (a memory
    history lives as long as the process, as in every chat-history class, or until
    ``Session.delete`` or :func:`ctxfold.storage.prune`)."""
    return default("sessions", MemoryStore)


def get_session_store(spec: VerbatimStore | str | os.PathLike[str] | None = None) -> VerbatimStore:
    """:func:`get_store` for sessions: ``None``, ``"memory"`` and ``"sqlite:///:memory:"``
    name :func:`session_store`, never the capped store ``compress`` shares, whose cap
    would drop a session's records."""
    if spec is None:
        return session_store()
    if isinstance(spec, str):
        parsed = parse_spec(spec)
        if parsed is not None and parsed.kind is Kind.MEMORY:
            return session_store()
    return get_store(spec)


def get_store(spec: VerbatimStore | str | os.PathLike[str] | None = None) -> VerbatimStore:
    """Resolve a store spec: ``None``, ``"memory"`` or ``"sqlite:///:memory:"`` (the one
    in-memory store this process shares, holding at most :data:`DEFAULT_MAX_BYTES`: a
    new one per call could expand nothing), ``"sqlite:///relative.db"`` /
    ``"sqlite:////abs/path.db"`` / a ``.db`` path, a Redis URL, or any
    :class:`VerbatimStore` (``MemoryStore()`` for a private one)."""
    if spec is None:
        return _shared_memory_store()
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if isinstance(spec, str):
        parsed = parse_spec(spec)
        if parsed is None:
            raise ConfigurationError(f"unknown store spec {mask_credentials(spec)!r}; use {_FORMS}")
        if parsed.kind is Kind.MEMORY:
            return _shared_memory_store()
        if parsed.kind is Kind.REDIS:
            return RedisStore(parsed.target)
        if not parsed.target:
            raise ConfigurationError(
                f"store spec {mask_credentials(spec)!r} names no file; use {_FORMS}"
            )
        return SQLiteStore(parsed.target)
    if isinstance(spec, VerbatimStore):
        return spec
    raise ConfigurationError(f"store must be {_FORMS}; got {type(spec).__name__}")
