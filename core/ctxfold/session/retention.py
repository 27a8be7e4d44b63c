"""Forgetting a session: every record of it (``Session.delete``), or what a clear left
behind (``Session.clear(drop_originals=True)``).

A session's namespace holds its log (``<epoch>:<series>:<n>`` records, ``e:<epoch>``
markers: see :mod:`.log`), the originals its rounds and its redaction stored (content
ids: decimal, or the hex ids of older versions), its rounds' tags (``tag:<round>``),
and keys ctxfold keeps there (``ctxfold:...``). After a clear, the records of the
epochs before the current one and every original are no longer referred to by
anything the session reads (its new epoch is empty): those are what a clear drops.
The markers and the keys stay, so the log reads as it did, its chain of epochs whole.
"""

from __future__ import annotations

import re

from ..storage.store import VerbatimStore, delete, delete_prefix, deleting
from .chain import namespace
from .log import SessionLog

__all__ = ["delete_session", "drop_cleared", "dropped_by_clear"]

_RECORD = re.compile(r"(?<!\d)(\d+):[a-z]+:\d+")  # a log record of an epoch: <epoch>:<series>:<n>
_ORIGINAL = re.compile(r"\d{12,64}|[0-9a-f]{8,64}|tag:.+")  # content ids, round tags


def dropped_by_clear(key: str, epoch: int) -> bool:
    """Whether ``key`` of a session's namespace is one that nothing reads once the
    session is in ``epoch`` with an empty history: a record of an older epoch, an
    original, a round's tag."""
    record = _RECORD.fullmatch(key)
    if record is not None:
        return int(record.group(1)) < epoch
    return _ORIGINAL.fullmatch(key) is not None


def drop_cleared(log: SessionLog) -> int:
    """Delete what :func:`dropped_by_clear` names from ``log``'s namespace (a log just
    cleared): how many entries there were."""
    store = log.store
    return delete(store, [k for k in store.ids_with_prefix("") if dropped_by_clear(k, log.epoch)])


def delete_session(store: VerbatimStore, session_id: str) -> int:
    """Delete every entry of the session ``session_id`` in ``store`` (its whole
    namespace: all epochs, originals, keys, and when it was written): how many."""
    deleting(store)  # a store that cannot delete says so before anything is done
    return delete_prefix(store, namespace(session_id))
