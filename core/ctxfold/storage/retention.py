"""Retention: sessions deleted once idle too long, or past a number kept.

A built-in store records when each namespace was last written (in the transaction of
the write: a second SQLite table, a Redis sorted set, a dict in memory), so
:func:`prune` finds the sessions of a store (namespaces under
:data:`ctxfold.storage.SESSION_PREFIX`) without reading their records. A session last
written by a ctxfold older than this module has no such time until it is written
again; ``Session.delete`` removes one by its id whatever its age.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, runtime_checkable

from ..exceptions import ConfigurationError
from .store import SESSION_PREFIX, VerbatimStore, delete_prefix, deleting, get_session_store

__all__ = ["Pruned", "Retains", "prune", "session_id_of"]


@runtime_checkable
class Retains(Protocol):
    """A store that knows when each namespace was last written (the built-in ones)."""

    def namespaces(self, prefix: str = "") -> dict[str, float]:
        """When each namespace beginning with ``prefix`` was last written (seconds
        since the epoch)."""
        ...


@dataclass(frozen=True)
class Pruned:
    """What :func:`prune` deleted: the ids of the sessions (newest write first) and how
    many entries they held."""

    sessions: tuple[str, ...]
    entries: int


def session_id_of(namespace: str) -> str | None:
    """The session id a namespace ``ctxfold:session:<length of id>:<id>:`` names, or
    ``None`` for any other namespace."""
    if not namespace.startswith(SESSION_PREFIX) or not namespace.endswith(":"):
        return None
    size, _, rest = namespace[len(SESSION_PREFIX) : -1].partition(":")
    if not size.isdigit() or len(rest) != int(size):
        return None
    return rest


def _check_age(max_age: float | timedelta | None) -> float | None:
    if isinstance(max_age, timedelta):
        max_age = max_age.total_seconds()
    if max_age is None:
        return None
    if isinstance(max_age, bool) or not isinstance(max_age, (int, float)):
        raise ConfigurationError(
            f"max_age must be seconds (a number) or a timedelta, got {max_age!r}"
        )
    if not math.isfinite(max_age) or max_age < 0:
        raise ConfigurationError(f"max_age must be finite and at least 0, got {max_age!r}")
    return float(max_age)


def _check_count(max_sessions: int | None) -> int | None:
    if max_sessions is not None and (
        isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 0
    ):
        raise ConfigurationError(
            f"max_sessions must be an integer of at least 0 or None, got {max_sessions!r}"
        )
    return max_sessions


def prune(
    store: VerbatimStore | str | os.PathLike[str] | None = None,
    *,
    max_age: float | timedelta | None = None,
    max_sessions: int | None = None,
    now: float | None = None,
) -> Pruned:
    """Delete the sessions of ``store`` (a spec as ``Session`` takes it; ``None``: this
    process's memory sessions) last written more than ``max_age`` ago (seconds or a
    :class:`~datetime.timedelta`), and all but the ``max_sessions`` written most
    recently: every record of each, all epochs, originals and keys (as
    ``Session.delete``). ``now``: the time to measure ages from (default: now).

    Run it for sessions nobody is writing: a ``Session`` object still open on a pruned
    session finds its records gone. Entries outside sessions (``compress``'s
    originals) are left alone. A store of your own needs :class:`Retains` and
    :class:`ctxfold.storage.Deletes` (else :class:`ctxfold.ConfigurationError`)."""
    age, count = _check_age(max_age), _check_count(max_sessions)
    if age is None and count is None:
        raise ConfigurationError("prune needs max_age=..., max_sessions=..., or both")
    target = get_session_store(store)
    if not isinstance(target, Retains):
        raise ConfigurationError(
            f"the store {target!r} does not record when its sessions were written: give "
            "its class namespaces(prefix) -> dict[str, float], or use a built-in store"
        )
    deleting(target)
    clock = time.time() if now is None else now
    written = sorted(target.namespaces(SESSION_PREFIX).items(), key=lambda kv: (-kv[1], kv[0]))
    doomed = [
        ns
        for rank, (ns, at) in enumerate(written)
        if (count is not None and rank >= count) or (age is not None and clock - at > age)
    ]
    entries = sum(delete_prefix(target, ns) for ns in doomed)
    ids = (session_id_of(ns) for ns in doomed)
    return Pruned(tuple(i for i in ids if i is not None), entries)
