"""A long append-only sequence the garbage collector does not walk.

A full collection visits every item of every list, and at 100,000 messages a session
keeps several lists of one item per message or passage (their texts, digests, stamps):
each item is a cache miss, a few milliseconds per list on every full collection,
inside whichever render it falls on. A :class:`Column` keeps its items in sealed
tuples of :data:`BLOCK`; Python stops tracking a tuple of strings, bytes, numbers or
``None`` the first time the collector sees it, so only the open tail costs a walk.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar, overload

__all__ = ["BLOCK", "Column"]

T = TypeVar("T")

_SHIFT = 10
#: Items in a sealed block.
BLOCK = 1 << _SHIFT
_MASK = BLOCK - 1


class Column(Sequence[T]):
    """Items in order, appended at the end: ``column[i]``, slices, iteration."""

    __slots__ = ("_blocks", "_tail")

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._blocks: list[tuple[T, ...]] = []
        self._tail: list[T] = []
        self.extend(items)

    def append(self, item: T) -> None:
        """Add ``item`` at the end."""
        self._tail.append(item)
        if len(self._tail) == BLOCK:
            self._seal()

    def extend(self, items: Iterable[T]) -> None:
        """Add ``items`` at the end, in order."""
        tail = self._tail
        tail.extend(items)
        while len(tail) >= BLOCK:
            self._seal()

    def _seal(self) -> None:
        self._blocks.append(tuple(self._tail[:BLOCK]))
        del self._tail[:BLOCK]

    def __len__(self) -> int:
        return (len(self._blocks) << _SHIFT) + len(self._tail)

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> list[T]: ...

    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        block = i >> _SHIFT
        if i < 0 or block > len(self._blocks):
            raise IndexError(f"item {i} of a column of {len(self)}")
        if block == len(self._blocks):
            try:
                return self._tail[i & _MASK]
            except IndexError:
                raise IndexError(f"item {i} of a column of {len(self)}") from None
        return self._blocks[block][i & _MASK]

    def __iter__(self) -> Iterator[T]:
        for block in self._blocks:
            yield from block
        yield from self._tail

    def __repr__(self) -> str:
        return f"Column(<{len(self)} items>)"
