"""A session that follows a message list kept elsewhere (a framework's chat history, a
chat store): each read adds to the session what is new in the list, renders once per
change, and starts over when the list was changed otherwise (cleared, edited)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from ..messages import Message
from ..recall import Query
from ..result import CompressionResult
from .session import Session

__all__ = ["Follower"]

T = TypeVar("T")


class Follower(Generic[T]):
    """Reads ``session``'s history from a list of ``T`` kept elsewhere, converted with
    ``convert``. The list is taken to grow at its end: a read compares its length and
    its last item with the last read's (``==``), adds only what follows, and renders
    once per change and budget. A list that shrank or whose known part changed is
    read again from the start (the session's earlier record stays in its store).

    A session whose store already holds messages (a persistent store reopened) is
    taken up on the first read when the list begins with exactly those messages."""

    def __init__(self, session: Session, convert: Callable[[Sequence[T]], list[Message]]) -> None:
        self.session = session
        self._convert = convert
        self._lock = threading.Lock()
        self._seen: int | None = None  # items the session holds (None: not yet known)
        self._last: T | None = None  # the last of them
        # (budget, query) and the render for them
        self._cached: tuple[tuple[int | None, Query], CompressionResult] | None = None

    def render(
        self, items: Sequence[T], budget: int | None = None, *, query: Query = None
    ) -> CompressionResult:
        """The session's render once it holds ``items`` (see the class), for
        ``query`` (see :meth:`Session.render`)."""
        with self._lock:
            if self._seen is None:
                self._take_up(items)
            seen, n = self._seen or 0, len(items)
            last = items[-1] if items else None
            if n < seen or (seen and items[seen - 1] != self._last):
                self._start_over()
                seen = 0
            if n > seen:
                self.session.add(self._convert(items[seen:]))
                self._seen, self._last, self._cached = n, last, None
            if self._cached is None or self._cached[0] != (budget, query):
                self._cached = ((budget, query), self.session.render(budget, query=query))
            return self._cached[1]

    def clear(self) -> None:
        """Start the session over (the list was cleared)."""
        with self._lock:
            self._start_over()

    def _start_over(self) -> None:
        self.session.clear()
        self._seen, self._last, self._cached = 0, None, None

    def _take_up(self, items: Sequence[T]) -> None:
        held = self.session.history
        k = len(held)
        if k and k <= len(items):
            converted = self._convert(items[:k])
            if [m.fingerprint for m in converted] == [m.fingerprint for m in held]:
                self._seen, self._last = k, items[k - 1]
                return
        if k:
            self._start_over()
        else:
            self._seen = 0
