"""A session's history in memory: the newest messages as objects, the folded ones packed.

A session of 100,000 messages holds 100,000 :class:`ctxfold.Message` objects, each one
a container Python's garbage collector walks on every full collection (about a second
at that size, inside whichever render it falls on). What a compaction folded is read
again only on demand (recall's partial passages, :attr:`Session.history`), so
:meth:`History.pack` keeps it as pickled bytes, which the collector never walks, and
reads a message back only when asked for it.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from ..messages import Message

__all__ = ["History"]


def _packed(m: Message) -> bytes | Message:
    """``m`` as bytes that read back equal to it, or ``m`` itself when it carries
    metadata (a user's objects keep their identity)."""
    return m if m.metadata else pickle.dumps(m, pickle.HIGHEST_PROTOCOL)


def _unpacked(row: bytes | Message) -> Message:
    if isinstance(row, Message):
        return row
    message: Message = pickle.loads(row)  # bytes this process packed, never stored
    return message


class History(Sequence[Message]):
    """The messages of a session in order: ``history[i]`` is message ``i``, whether
    it is packed or not; :meth:`pack` packs the first ones."""

    __slots__ = ("_live", "_packed")

    def __init__(self) -> None:
        self._packed: list[bytes | Message] = []  # messages 0 .. len(_packed) - 1
        self._live: list[Message] = []  # the rest

    def __len__(self) -> int:
        return len(self._packed) + len(self._live)

    @overload
    def __getitem__(self, i: int) -> Message: ...

    @overload
    def __getitem__(self, i: slice) -> list[Message]: ...

    def __getitem__(self, i: int | slice) -> Message | list[Message]:
        packed = len(self._packed)
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step == 1 and start >= packed:
                return self._live[start - packed : stop - packed]
            return [self[k] for k in range(start, stop, step)]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"message {i} of a history of {len(self)}")
        return self._live[i - packed] if i >= packed else _unpacked(self._packed[i])

    def __iter__(self) -> Iterator[Message]:
        for row in self._packed:
            yield _unpacked(row)
        yield from self._live

    def extend(self, messages: Iterable[Message]) -> None:
        """Append ``messages`` (unpacked)."""
        self._live.extend(messages)

    def pack(self, upto: int) -> None:
        """Pack the first ``upto`` messages (those packed already stay so)."""
        n = upto - len(self._packed)
        if n > 0:
            self._packed += [_packed(m) for m in self._live[:n]]
            del self._live[:n]
