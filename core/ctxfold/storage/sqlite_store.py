"""A store in a SQLite file: persistent, shared by the processes of one machine."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Mapping, Sequence

from ..exceptions import CacheError, ConfigurationError, CorruptRecordError
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
from ._stamps import Stamps
from .base import check_entries

__all__ = ["SQLiteStore"]


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
        self._stamps = Stamps()
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
        check_entries(entries)
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
