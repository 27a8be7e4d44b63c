"""The one SQLite helper of the cache and the store: checked file paths and table
names, connections, write transactions, and a connection behind a lock that closes
once."""

from __future__ import annotations

import os
import random
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from time import monotonic, sleep

from ..exceptions import ConfigurationError
from ._closing import Closing

__all__ = [
    "SQL_CHUNK",
    "WAIT_S",
    "SQLiteFile",
    "check_sqlite_file",
    "connect",
    "immediate",
    "prefix_range",
    "set_commits",
]

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
SQL_CHUNK = 500  # keys per IN (...) query, well under SQLite's parameter limit
#: How long a connection waits for a file another process is writing (seconds).
WAIT_S = 30.0
# A busy write lock is tried again after pauses that double from the first to the
# last (seconds, each jittered by +-50%; a private generator, so that a program's own
# seeded `random` is untouched). SQLite's own waits grow to 100 ms, so a writer could
# sleep for 100 ms after a transaction of a millisecond had ended: with every commit
# flushed (`durable`), 8 processes of benchmarks/load.py had a p99 SQLite turn of
# 155 ms and a slowest of 969 ms; 71 and 136 ms with these pauses.
_FIRST_PAUSE, _LAST_PAUSE = 0.0005, 0.002
_JITTER = random.Random()
_SQLITE_BUSY = 5


def check_sqlite_file(path: object, table: object, what: str) -> tuple[str, str]:
    """Check a SQLite file path and table name for a ``what`` (cache, store): the
    expanded path (or ``":memory:"``) and the table."""
    if not isinstance(table, str) or not IDENTIFIER.match(table):
        raise ConfigurationError(
            f"table must be a plain SQL identifier (letters, digits, _; not starting "
            f"with a digit), got {table!r}"
        )
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigurationError(
            f"path must be a file path (str or os.PathLike), got {type(path).__name__}"
        )
    raw = os.fspath(path)
    if raw == ":memory:":
        return raw, table
    file = Path(raw).expanduser()
    if not raw.strip():
        raise ConfigurationError("path must name a SQLite file, got an empty string")
    if file.is_dir():
        raise ConfigurationError(
            f"path {str(file)!r} is a directory; give a file path such as "
            f"{str(file / f'ctxfold-{what}.db')!r}"
        )
    if not file.parent.is_dir():
        raise ConfigurationError(
            f"cannot create the SQLite {what} {str(file)!r}: the directory "
            f"{str(file.parent)!r} does not exist; create it first "
            "(e.g. os.makedirs(dirname, exist_ok=True))"
        )
    return str(file), table


def prefix_range(column: str, prefix: str) -> tuple[str, list[str]]:
    """A ``WHERE`` clause (and its parameters) for the rows whose text ``column`` begins
    with ``prefix``, as a range of the column's index: ``prefix <= column < next``,
    ``next`` the prefix with its last character one higher (text compares by code
    point, as UTF-8 bytes do); every row for ``""``."""
    if not prefix:
        return "1", []
    last = ord(prefix[-1])
    if last >= 0x10FFFF or 0xD7FF <= last <= 0xDFFF:  # no next character to encode
        return f"substr({column}, 1, {len(prefix)}) = ?", [prefix]
    return f"{column} >= ? AND {column} < ?", [prefix, prefix[:-1] + chr(last + 1)]


def connect(target: str, *, uri: bool = False) -> sqlite3.Connection:
    """A connection as the cache and the store use it: transactions explicit, shared by
    the owner's threads behind its lock, waiting up to :data:`WAIT_S` for a busy file.
    Nothing is read yet: :func:`set_commits` is the first statement."""
    return sqlite3.connect(
        target, timeout=WAIT_S, check_same_thread=False, isolation_level=None, uri=uri
    )


def set_commits(conn: sqlite3.Connection, *, durable: bool = False) -> None:
    """Flush a commit to the disk only at checkpoints (``synchronous=NORMAL``; it is
    not kept in the file, so every connection sets it): in WAL mode a commit survives
    the process's crash, and the system's crash or a power loss can lose the newest
    commits but never corrupts the file. ``durable`` flushes every commit (``FULL``),
    so that it survives a power loss too, at the cost of a disk flush per write."""
    conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")


def _busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is None:
        return str(exc).startswith("database is locked")
    return int(code) & 0xFF == _SQLITE_BUSY


def _begin(conn: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE``, trying a busy write lock again in short, jittered pauses
    until the connection's busy timeout has passed (then SQLite's "database is
    locked")."""
    wait_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        pause, deadline = _FIRST_PAUSE, monotonic() + wait_ms / 1000
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                left = deadline - monotonic()
                if not _busy(exc) or left <= 0:
                    raise
            sleep(min(left, pause * _JITTER.uniform(0.5, 1.5)))
            pause = min(2 * pause, _LAST_PAUSE)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {wait_ms}")


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction: takes the file's write lock up front (waiting up to the
    connection's busy timeout), commits on success, rolls back on any error."""
    _begin(conn)
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class SQLiteFile(Closing):
    """A SQLite connection behind a lock (``_conn``, ``_lock``), closed once."""

    _conn: sqlite3.Connection | None
    _lock: threading.Lock

    def close(self) -> None:
        """Close the file. Further use raises :class:`~ctxfold.CacheError`; closing twice
        is harmless."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
