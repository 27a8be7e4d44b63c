"""When a store object last recorded each namespace's write time (SQLite and Redis)."""

from __future__ import annotations

import time

from .._state import LRU

__all__ = ["Stamps"]

_STAMP_EVERY = 1.0  # seconds: how stale a namespace's recorded write time may be


class Stamps:
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
