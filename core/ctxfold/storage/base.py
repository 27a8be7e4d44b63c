"""What every verbatim store is (:class:`VerbatimStore`; :class:`Deletes` for the
ones that can forget), and what they share: the session prefix, the default cap, the
check of a batch's entries (see :mod:`ctxfold.storage.store`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from ..exceptions import ConfigurationError

__all__ = ["DEFAULT_MAX_BYTES", "SESSION_PREFIX", "Deletes", "VerbatimStore", "check_entries"]

DEFAULT_MAX_BYTES = 256 * 2**20
#: The start of every session's namespace (``ctxfold:session:<length of id>:<id>:``):
#: a capped memory store never drops an entry under it.
SESSION_PREFIX = "ctxfold:session:"


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


def check_entries(entries: Mapping[str, bytes]) -> None:
    """Raise :class:`ctxfold.ConfigurationError` unless every id is a non-empty string
    and every value bytes."""
    for key, value in entries.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"store ids must be non-empty strings, got {key!r}")
        if not isinstance(value, bytes):
            raise ConfigurationError(
                f"store values must be bytes, got {type(value).__name__} for {key!r}"
            )
