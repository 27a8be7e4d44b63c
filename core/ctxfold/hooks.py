"""Event hooks: callbacks that observe compaction without being able to break it.

Events and their data:

- ``compaction_started``: ``strategy`` (name), ``messages`` (count), ``tokens``
  (before), ``budget``;
- ``reference_extracted``: ``reference`` (a new :class:`~ctxfold.Reference`);
- ``reference_deduplicated``: ``reference`` (merged), ``duplicate`` (the new sighting);
- ``compaction_completed``: ``result`` (the :class:`~ctxfold.CompressionResult`).

A callback receives an :class:`Event`; one that raises is logged to the ``ctxfold``
logger and the rest of the callbacks, and compression, carry on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .exceptions import ConfigurationError

if TYPE_CHECKING:  # hooks sit below the result in the layers: a type, nothing run
    from .result import CompressionResult

__all__ = ["EVENTS", "Event", "completed", "emit", "off", "on"]

EVENTS: tuple[str, ...] = (
    "compaction_started",
    "reference_extracted",
    "reference_deduplicated",
    "compaction_completed",
)

_log = logging.getLogger("ctxfold")


@dataclass(frozen=True)
class Event:
    """What happened (``name``, one of :data:`EVENTS`) and its ``data``."""

    name: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]


Callback = Callable[[Event], object]

_lock = threading.Lock()
_callbacks: dict[str, tuple[Callback, ...]] = {name: () for name in EVENTS}


def on(event: str, callback: Callback) -> Callable[[], None]:
    """Call ``callback(event)`` whenever ``event`` happens; returns a function that
    removes it again (as :func:`off` does)."""
    if event not in _callbacks:
        raise ConfigurationError(f"unknown event {event!r}; use one of {', '.join(EVENTS)}")
    if not callable(callback):
        raise ConfigurationError(f"the callback for {event!r} must be callable")
    with _lock:
        _callbacks[event] = (*_callbacks[event], callback)
    return lambda: off(event, callback)


def off(event: str, callback: Callback) -> None:
    """Stop calling ``callback`` for ``event`` (nothing happens if it was not on)."""
    if event not in _callbacks:
        raise ConfigurationError(f"unknown event {event!r}; use one of {', '.join(EVENTS)}")
    with _lock:
        callbacks = list(_callbacks[event])
        if callback in callbacks:
            callbacks.remove(callback)
        _callbacks[event] = tuple(callbacks)


def emit(name: str, **data: Any) -> None:
    """Call the callbacks of ``name`` with an :class:`Event`; failures are logged."""
    callbacks = _callbacks[name]  # a tuple, replaced (never changed) under the lock
    if not callbacks:
        return
    event = Event(name, MappingProxyType(data))
    for callback in callbacks:
        try:
            callback(event)
        except Exception:
            _log.exception("ctxfold: a %r callback failed; compression goes on", name)


def completed(result: CompressionResult) -> None:
    """Announce a finished compression or session render, the one way every entry
    point does: its stats to the ``ctxfold`` logger at INFO (``extra`` holds them as
    ``ctxfold_stats``), then the ``compaction_completed`` callbacks."""
    if _log.isEnabledFor(logging.INFO):
        s = result.stats
        _log.info(
            "%s: %d -> %d tokens (%.2fx, budget %d%s), %d -> %d messages, %.1f ms",
            s.strategy,
            s.tokens_before,
            s.tokens_after,
            s.ratio,
            s.budget,
            "" if s.fits else ", OVER BUDGET",
            s.messages_before,
            s.messages_after,
            s.elapsed_ms,
            extra={"ctxfold_stats": s.as_dict()},
        )
    emit("compaction_completed", result=result)
