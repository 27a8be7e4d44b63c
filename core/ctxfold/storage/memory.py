"""The in-process store: a dict, optionally capped (never a session's entries)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence

from ..exceptions import ConfigurationError
from .base import SESSION_PREFIX, check_entries

__all__ = ["MemoryStore"]

_log = logging.getLogger("ctxfold")


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
        check_entries(entries)
        with self._lock:
            self._put(entries)
            if namespace is not None:
                self._written[namespace] = time.time()

    def put_new(self, entries: Mapping[str, bytes], *, namespace: str | None = None) -> list[str]:
        """Store every entry if none of the ids exists, else nothing: the ids taken
        (``namespace`` as for :meth:`put_many`)."""
        check_entries(entries)
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
