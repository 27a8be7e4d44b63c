"""The verbatim store: every span a compressor removes, summarizes or rewrites, kept
under a content-derived id so that it can always be given back.

A store maps ids to ``bytes`` and never overwrites: an id is derived from its content,
so writing it again is a no-op. It never forgets either, except a memory store given a
``max_bytes`` cap (the process's default store has one), which drops its oldest entries
past the cap. :meth:`VerbatimStore.put_many` writes a
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
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .._state import default
from ..exceptions import CacheError, ConfigurationError
from ._closing import Closing
from ._redis import import_redis, invalid_url
from ._sqlite import (
    SQL_CHUNK,
    WAIT_S,
    SQLiteFile,
    check_sqlite_file,
    connect,
    immediate,
    set_commits,
)
from .spec import Kind, mask_credentials, parse_spec, scrub

__all__ = [
    "MemoryStore",
    "NamespacedStore",
    "RedisStore",
    "SQLiteStore",
    "VerbatimStore",
    "get_store",
    "put_new",
]

#: What the process's shared default memory store holds at most (256 MiB).
DEFAULT_MAX_BYTES = 256 * 2**20
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

    ``max_bytes`` caps what it holds: past it, the entries written longest ago go first
    (writing an entry again counts as new), and :func:`ctxfold.expand` reports their
    ids as missing. ``None`` (the default for a store you make) keeps everything; the
    process's shared default store keeps :data:`DEFAULT_MAX_BYTES`. For originals that
    must survive, use :class:`SQLiteStore` or :class:`RedisStore`.

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
        # A capped store keeps its entries in the order written, the oldest found at
        # once (an ordered dict). An uncapped one, whose order nothing reads, is a plain
        # dict of strings and bytes: some 40 bytes an entry less (a 100,000-message
        # session holds 200,000), and nothing the garbage collector tracks, where it
        # walks an ordered dict entry by entry in every full collection.
        self._order: OrderedDict[str, bytes] | None = None if max_bytes is None else OrderedDict()
        self._data: dict[str, bytes] = {} if self._order is None else self._order
        self._bytes = 0
        self._lock = threading.Lock()
        self.evicted = 0  # entries dropped to stay within max_bytes

    def put_many(self, entries: Mapping[str, bytes]) -> None:
        """Store every entry; existing ids keep their value (and count as new)."""
        _check_entries(entries)
        with self._lock:
            self._put(entries)

    def put_new(self, entries: Mapping[str, bytes]) -> list[str]:
        """Store every entry if none of the ids exists, else nothing: the ids taken."""
        _check_entries(entries)
        with self._lock:
            taken = [key for key in entries if key in self._data]
            if not taken:
                self._put(entries)
            return taken

    @property
    def max_bytes(self) -> int | None:
        """The most the store holds, ids and values (``None``: no cap)."""
        return self._max_bytes

    def _put(self, entries: Mapping[str, bytes]) -> None:
        data, order = self._data, self._order
        for key, value in entries.items():
            if key not in data:
                data[key] = value
                self._bytes += len(key) + len(value)
            elif order is not None:
                order.move_to_end(key)  # written again: the newest
        if order is not None and self._max_bytes is not None and self._bytes > self._max_bytes:
            self._evict(order, self._max_bytes, set(entries))

    def _evict(self, order: OrderedDict[str, bytes], cap: int, written: set[str]) -> None:
        """Drop the entries written longest ago until ``cap`` holds, never one of
        ``written`` (the batch just written)."""
        dropped = 0
        while self._bytes > cap and order:
            key, value = next(iter(order.items()))
            if key in written:
                break
            del order[key]
            self._bytes -= len(key) + len(value)
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

    @property
    def nbytes(self) -> int:
        """The bytes of the ids and values held."""
        return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __repr__(self) -> str:
        return f"MemoryStore({len(self)} entries, {self._bytes} bytes)"


class SQLiteStore(SQLiteFile):
    """A table in a SQLite file (WAL mode): persistent, and shared by the threads and
    processes of one machine. A batch is one transaction. Use it as a context manager
    or call :meth:`close`.

    A commit survives the process's crash; ``durable=True`` flushes each one to the
    disk so that it survives a power loss too (a disk flush per write)."""

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
        except sqlite3.Error as exc:
            conn.close()
            raise ConfigurationError(
                f"cannot use {self.path!r} as a SQLite store: {_why(exc)}"
            ) from None
        return conn

    def _has_table(self, conn: sqlite3.Connection) -> bool:
        row = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (self.table,)
        ).fetchone()
        return row is not None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise CacheError(f"the SQLite store {self.path!r} is closed; open a new one")
        return self._conn

    def put_many(self, entries: Mapping[str, bytes]) -> None:
        """Store every entry in one transaction; existing ids keep their value."""
        self._write(entries, only_new=False)

    def put_new(self, entries: Mapping[str, bytes]) -> list[str]:
        """Store every entry if none of the ids exists, else nothing (one transaction
        that holds the file's write lock, so two processes cannot both succeed): the
        ids taken."""
        return self._write(entries, only_new=True)

    def _write(self, entries: Mapping[str, bytes], *, only_new: bool) -> list[str]:
        _check_entries(entries)
        if not entries:
            return []
        verb = "INSERT" if only_new else "INSERT OR IGNORE"
        with self._lock:
            conn = self._connection()
            try:
                with immediate(conn):
                    taken = list(self._found(conn, list(entries))) if only_new else []
                    if not taken:
                        conn.executemany(
                            f"{verb} INTO {self.table} (id, value) VALUES (?, ?)",
                            list(entries.items()),
                        )
            except sqlite3.Error as exc:
                raise CacheError(
                    f"the SQLite store {self.path!r} failed: {_why(exc)}; nothing of this "
                    "batch was written"
                ) from None
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

    def _found(self, conn: sqlite3.Connection, ids: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for start in range(0, len(ids), SQL_CHUNK):
            chunk = ids[start : start + SQL_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(f"SELECT id, value FROM {self.table} WHERE id IN ({marks})", chunk)
            found.update((k, bytes(v)) for k, v in rows)
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


class RedisStore(Closing):
    """Keys ``prefix + id`` in a Redis server, shared by every process and machine that
    reaches it. A batch is one ``MULTI``/``EXEC`` of ``SET NX`` (all or none, never an
    overwrite). Entries do not expire: configure the server without eviction
    (``maxmemory-policy noeviction``) so nothing is lost."""

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

    def put_many(self, entries: Mapping[str, bytes]) -> None:
        """Store every entry in one transaction; existing ids keep their value."""
        _check_entries(entries)
        if not entries:
            return
        pipe = self._client.pipeline(transaction=True)
        for key, value in entries.items():
            pipe.set(self.prefix + key, value, nx=True)
        self._call(pipe.execute)

    def put_new(self, entries: Mapping[str, bytes]) -> list[str]:
        """Store every entry if none of the ids exists, else nothing (one ``MSETNX``,
        atomic on the server): the ids taken."""
        _check_entries(entries)
        if not entries:
            return []
        keyed = {self.prefix + key: value for key, value in entries.items()}
        if self._call(self._client.msetnx, keyed):
            return []
        values = self.get_many(list(entries))
        return [key for key, v in zip(entries, values, strict=True) if v is not None]

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
    so two sessions sharing a store never read each other's entries."""

    def __init__(self, store: VerbatimStore, namespace: str) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise ConfigurationError(f"namespace must be a non-empty string, got {namespace!r}")
        self.store = store
        self.namespace = namespace

    def put_many(self, entries: Mapping[str, bytes]) -> None:
        """Store every entry under the namespace, all or none."""
        _check_entries(entries)
        ns = self.namespace
        self.store.put_many({ns + key: value for key, value in entries.items()})

    def put_new(self, entries: Mapping[str, bytes]) -> list[str]:
        """Store every entry under the namespace if none exists, else nothing: the ids
        taken (see :func:`put_new`)."""
        _check_entries(entries)
        ns = self.namespace
        taken = put_new(self.store, {ns + key: value for key, value in entries.items()})
        return [key.removeprefix(ns) for key in taken]

    def get_many(self, ids: Sequence[str]) -> list[bytes | None]:
        """The values under ``ids`` in the namespace, in order (``None`` where unknown)."""
        ns = self.namespace
        return self.store.get_many([ns + i for i in ids])

    def __repr__(self) -> str:
        return f"NamespacedStore({self.store!r}, {self.namespace!r})"


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


_FORMS = (
    "None or 'memory' (the process's memory store), 'sqlite:///relative.db', "
    "'sqlite:////abs/path.db' (or a path ending in .db), 'redis://host:6379/0', or an "
    "object with put_many and get_many"
)


def _shared_memory_store() -> MemoryStore:
    return default("store", lambda: MemoryStore(max_bytes=DEFAULT_MAX_BYTES))


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
