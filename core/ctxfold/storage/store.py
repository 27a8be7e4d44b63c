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

import os
from collections.abc import Iterable, Mapping, Sequence

from .._state import default
from ..exceptions import ConfigurationError
from .base import DEFAULT_MAX_BYTES, SESSION_PREFIX, Deletes, VerbatimStore, check_entries
from .memory import MemoryStore
from .redis_store import RedisStore
from .spec import Kind, mask_credentials, parse_spec, require_spec
from .sqlite_store import SQLiteStore

__all__ = [
    "DEFAULT_MAX_BYTES",
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
        check_entries(entries)
        ns, store = self.namespace, self.store
        keyed = {ns + key: value for key, value in entries.items()}
        if isinstance(store, _TRACKING):
            store.put_many(keyed, namespace=ns)
        else:
            store.put_many(keyed)

    def put_new(self, entries: Mapping[str, bytes]) -> list[str]:
        """Store every entry under the namespace if none exists, else nothing: the ids
        taken (see :func:`put_new`)."""
        check_entries(entries)
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
        parsed = require_spec(spec, "store", _FORMS)
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
