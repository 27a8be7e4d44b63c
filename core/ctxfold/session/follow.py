"""A session that follows a message list kept elsewhere (a framework's chat history, a
chat store, an agent's checkpointed state): each read adds to the session what is new
in the list, renders once per change, and cuts the session back to the first item
that changed when the list was changed otherwise (cleared, edited), taking up what
another writer of the same session wrote first; and the split of a render into what
stands for the older messages, the list's own newest items and the recall block, so
that a wrapper sends its framework's own objects for the part that is unchanged."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..exceptions import ConcurrentWriteError, CorruptRecordError
from ..messages import Message
from ..recall import Query
from ..result import RECALL_KEY, CompressionResult, without_recall
from ..storage.store import MemoryStore, VerbatimStore, session_store
from .session import Session

__all__ = ["Followed", "Follower", "frozen", "store_for"]

T = TypeVar("T")
U = TypeVar("U")
R = TypeVar("R")


def frozen(value: Any) -> Hashable:
    """A snapshot of ``value`` that later changes to it cannot alter, for a key
    function (see :class:`Follower`): a string or ``None`` as it is, anything else as
    canonical JSON (``repr`` for what JSON cannot hold)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)


def store_for(
    session_id: str | None, store: VerbatimStore | str | None
) -> VerbatimStore | str | None:
    """The store a wrapper's session keeps its records in: ``store`` when given, the
    process's shared one (``None``) for a named session, and for one named by neither
    (a new random id, which nothing can reopen) a memory store of its own, freed with
    the wrapper: a wrapper made per request must not leave its session behind. It
    signs and keys with the process's key, as the shared store does, so its output is
    what the shared store's would be."""
    if store is None and session_id is None:
        return MemoryStore(key=session_store().key)
    return store


@dataclass(frozen=True)
class Followed:
    """One render of a followed list, split: ``prefix`` (the messages that stand for
    the list's first ``tail`` items, as the session renders them: a note, condensed and
    kept messages), then the list's items from ``tail`` on unchanged, with the recall
    block ``block`` (``None``: none) at ``block_at`` of the whole view: a message of
    its own, or the newest user message with the block at its head (``replaces``)."""

    result: CompressionResult
    prefix: tuple[Message, ...]
    tail: int
    block: Message | None
    block_at: int
    replaces: bool

    def view(
        self, prefix: Sequence[U], items: Sequence[U], convert: Callable[[Message], U]
    ) -> list[U]:
        """The render in the caller's own objects: ``prefix`` (the caller's form of
        :attr:`prefix`), ``items[tail:]`` as given, and the block converted."""
        out = [*prefix, *items[self.tail :]]
        if self.block is not None:
            shown = convert(self.block)
            if self.replaces:
                out[self.block_at] = shown
            else:
                out.insert(self.block_at, shown)
        return out


def _common(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many first items ``a`` and ``b`` have in common."""
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


class Follower(Generic[T]):
    """Reads ``session``'s history from a list of ``T`` kept elsewhere, converted with
    ``convert``. Each item is known by ``key(item)``: a snapshot of what the model
    would see of it (default: the fingerprint of its converted message; a wrapper
    gives a cheaper one built with :func:`frozen`), so an item edited in place, or
    replaced by another with the same id, reads as changed. The list is taken to grow
    at its end: a read compares the keys of the part read before with the keys it
    now has, adds only what follows, and renders once per change, budget and query.
    A list that shrank or whose known part changed is read again from its first
    changed item: the session is cut back to the items before it
    (:meth:`Session.truncate`, two records) and the rest added again (the dropped
    records stay in its store).

    A session whose store already holds messages (a persistent store reopened) is
    taken up on the first read when the list begins with exactly those messages;
    :meth:`resume` takes up a compaction record kept beside the list.

    Another writer of the same session (a second follower on the same id and store,
    in this process or another) may write first: a read that meets
    :class:`ctxfold.exceptions.ConcurrentWriteError` reads the session again from its
    store, takes up what it holds as on a first read, and tries once more; only a
    second conflict in a row reaches the caller (a ``ConcurrentWriteError`` that says
    what to do). Nothing either writer wrote is lost."""

    def __init__(
        self,
        session: Session,
        convert: Callable[[Sequence[T]], list[Message]],
        *,
        key: Callable[[T], Hashable] | None = None,
    ) -> None:
        self.session = session
        self._convert = convert
        self._key = key
        self._lock = threading.RLock()
        self._keys: list[Any] | None = None  # of the items the session holds (None: unknown)
        # (budget, query) and the render for them
        self._cached: tuple[tuple[int | None, Query], CompressionResult] | None = None

    @classmethod
    def resume(
        cls,
        items: Sequence[T],
        compaction: Mapping[str, Any] | None,
        convert: Callable[[Sequence[T]], list[Message]],
        *,
        key: Callable[[T], Hashable] | None = None,
        **settings: Any,
    ) -> Follower[T]:
        """A follower of ``items`` over a new session that takes up ``compaction`` (a
        record :attr:`Session.compaction` gave for the same items; see
        :meth:`Session.resume`), or compacts afresh when the record no longer belongs
        to them (the list was edited since)."""
        history = convert(items)
        try:
            session = Session.resume(history, compaction, **settings)
        except CorruptRecordError:  # edited since: the list itself is all there
            session = Session.resume(history, None, **settings)
        follower = cls(session, convert, key=key)
        follower._keys = follower._keys_of(items)
        return follower

    def _keys_of(self, items: Sequence[T]) -> list[Any]:
        """The keys of ``items``, as they are now."""
        key = self._key
        if key is None:
            return [m.fingerprint for m in self._convert(items)]
        return [key(i) for i in items]

    def holds_start_of(self, items: Sequence[T]) -> bool:
        """Whether the session holds exactly the first items of ``items``."""
        keys = self._keys
        if keys is None:
            return False
        n = len(keys)
        return n <= len(items) and self._keys_of(items[:n]) == keys

    def render(
        self, items: Sequence[T], budget: int | None = None, *, query: Query = None
    ) -> CompressionResult:
        """The session's render once it holds ``items`` (see the class), for
        ``query`` (see :meth:`Session.render`)."""
        with self._lock:
            return self._retried(lambda: self._render(items, budget, query))

    def search(self, items: Sequence[T], query: str, max_tokens: int = 1000) -> str:
        """What ``query`` finds in the whole history once the session holds ``items``
        (see :meth:`Session.search`)."""
        with self._lock:
            return self._retried(lambda: self._searched(items, query, max_tokens))

    def _searched(self, items: Sequence[T], query: str, max_tokens: int) -> str:
        self._hold(items)
        return self.session.search(query, max_tokens)

    def _render(self, items: Sequence[T], budget: int | None, query: Query) -> CompressionResult:
        self._hold(items)
        if self._cached is None or self._cached[0] != (budget, query):
            self._cached = ((budget, query), self.session.render(budget, query=query))
        return self._cached[1]

    def _hold(self, items: Sequence[T]) -> None:
        """Make the session hold ``items``: cut back to what they share with it, then
        add the rest."""
        if self._keys is None:
            self._take_up(items)
        keys = self._keys if self._keys is not None else []
        if keys:
            self._cut_to(_common(keys, self._keys_of(items[: len(keys)])))
            keys = self._keys if self._keys is not None else []
        if len(items) > len(keys):
            new = items[len(keys) :]
            self.session.add(self._convert(new))
            keys += self._keys_of(new)
            self._keys, self._cached = keys, None

    def follow(
        self, items: Sequence[T], budget: int | None = None, *, query: Query = None
    ) -> Followed:
        """:meth:`render`, split (see :class:`Followed`)."""
        with self._lock:
            result = self.render(items, budget, query=query)
            tail = self.session.folded
            core = without_recall(result.messages)  # the view, any recall block aside
            prefix = tuple(core[: len(core) - (len(items) - tail)])
            for at, m in enumerate(result.messages):
                if RECALL_KEY in m.metadata:
                    return Followed(result, prefix, tail, m, at, bool(without_recall([m])))
            return Followed(result, prefix, tail, None, 0, False)

    def clear(self) -> None:
        """Start the session over (the list was cleared)."""
        with self._lock:
            self._retried(self._start_over)

    def _retried(self, write: Callable[[], R]) -> R:
        """``write()``; when another writer wrote the session first, the session read
        again from its store and ``write()`` once more (see the class)."""
        try:
            return write()
        except ConcurrentWriteError:
            self._reload()
        try:
            return write()
        except ConcurrentWriteError as exc:
            raise ConcurrentWriteError(
                f"session {self.session.session_id!r}: another writer wrote it again while "
                "this one took up its last write; nothing of this write was stored and "
                "the next read tries again. Writers of one session must take turns: "
                "serialize them (one worker per conversation at a time), or give each "
                "its own session_id"
            ) from exc

    def _reload(self) -> None:
        """The session read again from its store, to be taken up as on a first read."""
        self.session.reload()
        self._keys, self._cached = None, None

    def _start_over(self) -> None:
        self.session.clear()
        self._keys, self._cached = [], None

    def _cut_to(self, same: int) -> None:
        """Keep the first ``same`` messages the session holds (the list's items still
        match them), dropping the rest: only what changed is written again."""
        if self._keys is not None and same < len(self._keys):
            self.session.truncate(same)
            self._keys, self._cached = self._keys[:same], None

    def _take_up(self, items: Sequence[T]) -> None:
        held = self.session.history
        self._keys = []
        if not held:
            return
        k = min(len(held), len(items))
        converted = self._convert(items[:k])
        self._keys = self._keys_of(items[:k]) + [None] * (len(held) - k)
        self._cut_to(_common([m.fingerprint for m in converted], [m.fingerprint for m in held]))
