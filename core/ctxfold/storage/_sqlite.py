"""The one SQLite helper of the cache and the store: checked file paths and table
names, write transactions, and a connection behind a lock that closes once."""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..exceptions import ConfigurationError
from ._closing import Closing

__all__ = ["SQL_CHUNK", "SQLiteFile", "check_sqlite_file", "immediate"]

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
SQL_CHUNK = 500  # keys per IN (...) query, well under SQLite's parameter limit


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


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction: takes the file's write lock up front (waiting up to the
    connection's timeout), commits on success, rolls back on any error."""
    conn.execute("BEGIN IMMEDIATE")
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
