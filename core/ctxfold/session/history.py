"""A session's history in memory: the newest messages as objects, the folded ones packed.

A session of 100,000 messages would hold 100,000 :class:`ctxfold.Message` objects, each
a container Python's garbage collector walks on every full collection (about a second
at that size, inside whichever render it falls on). What a compaction folded is read
again only on demand (recall's partial passages, :attr:`Session.history`), so
:meth:`History.pack` keeps it as the bytes of its stored record (the very bytes object
the session's log wrote, so a memory store holds it once), in a
:class:`~ctxfold._column.Column` the collector does not walk, and reads a message back
only when asked for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import overload

from .._column import Column
from ..messages import Message
from ..reversible.records import encode, message_from_record, message_record
from .chain import record_bytes

__all__ = ["History", "Records"]


def _packed(m: Message, row: bytes | None) -> bytes | Message:
    """``m`` as the bytes its log stored (``row``), else as its bare record, or ``m``
    itself when it carries metadata (which a record may not hold, and whose objects
    keep their identity)."""
    if m.metadata:
        return m
    return row if row is not None else encode(message_record(m))


def _unpacked(row: bytes | Message) -> Message:
    if isinstance(row, Message):
        return row
    stored = json.loads(row)
    return message_from_record(stored.get("r", stored))  # in its log's envelope, or bare


class Records(Sequence[bytes | None]):
    """Messages' records (``encode(message_record(m))``), each read out of the row its
    log stored as it is asked for (a compaction of 100,000 messages copies none before
    its round stores them), or None where there is no such row: the record is then
    encoded again."""

    __slots__ = ("_rows",)

    def __init__(self, rows: list[bytes | Message | None]) -> None:
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, i: int) -> bytes | None: ...

    @overload
    def __getitem__(self, i: slice) -> list[bytes | None]: ...

    def __getitem__(self, i: int | slice) -> bytes | list[bytes | None] | None:
        if isinstance(i, slice):
            return list(map(_record, self._rows[i]))
        return _record(self._rows[i])

    def __iter__(self) -> Iterator[bytes | None]:
        return map(_record, self._rows)

    def after(self, n: int) -> Records:
        """These records after ``n`` messages that have none (a compaction's prefix)."""
        return Records([None] * n + self._rows)


def _record(row: bytes | Message | None) -> bytes | None:
    return record_bytes(row) if isinstance(row, bytes) else None


class History(Sequence[Message]):
    """The messages of a session in order: ``history[i]`` is message ``i``, whether
    it is packed or not; :meth:`pack` packs the first ones."""

    __slots__ = ("_live", "_packed", "_rows")

    def __init__(self) -> None:
        self._packed: Column[bytes | Message] = Column()  # messages 0 .. len(_packed) - 1
        self._live: list[Message] = []  # the rest
        self._rows: list[bytes | None] = []  # each live message's stored record

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

    def extend(self, messages: Sequence[Message], rows: Sequence[bytes] | None = None) -> None:
        """Append ``messages``; ``rows``: the stored record of each, as the session's
        log wrote it (default: made when packed)."""
        self._live.extend(messages)
        self._rows.extend(rows if rows is not None else [None] * len(messages))

    def rows(self, start: int, stop: int) -> Records:
        """The records of messages ``start`` to ``stop - 1`` as the reversible layer
        encodes them, read out of the rows the session's log stored (see
        :class:`Records`)."""
        packed = len(self._packed)
        rows: list[bytes | Message | None] = [*self._packed[start : min(stop, packed)]]
        rows += self._rows[max(start - packed, 0) : max(stop - packed, 0)]
        return Records(rows)

    def pack(self, upto: int) -> None:
        """Pack the first ``upto`` messages (those packed already stay so)."""
        n = upto - len(self._packed)
        if n > 0:
            self._packed.extend(map(_packed, self._live[:n], self._rows[:n]))
            del self._live[:n], self._rows[:n]
