"""A column reads like the list of its items, and the garbage collector walks only its
open tail."""

from __future__ import annotations

import gc

import pytest

from ctxfold._column import BLOCK, Column


def test_a_column_reads_as_the_list_of_its_items() -> None:
    items = [f"item {k}" for k in range(2 * BLOCK + 7)]
    column: Column[str] = Column(items[:5])
    column.append(items[5])
    column.extend(items[6 : BLOCK + 1])  # seals a block, keeps a tail of two
    for item in items[BLOCK + 1 :]:
        column.append(item)
    assert len(column) == len(items)
    assert list(column) == items
    picks = [0, 5, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK, len(items) - 1]
    assert [column[k] for k in picks] == [items[k] for k in picks]
    assert [column[-k] for k in range(1, 12)] == [items[-k] for k in range(1, 12)]
    assert column[BLOCK - 3 : BLOCK + 3] == items[BLOCK - 3 : BLOCK + 3]
    assert column[::BLOCK] == items[::BLOCK]
    assert column.index(items[BLOCK + 2]) == BLOCK + 2
    for bad in (len(items), -len(items) - 1, 5 * BLOCK):
        with pytest.raises(IndexError):
            column[bad]


def test_the_collector_walks_only_the_open_tail() -> None:
    column: Column[str | bytes | int | None] = Column()
    kinds = (lambda k: f"text {k}", lambda k: b"row %d" % k, lambda k: k * 10**12, lambda k: None)
    column.extend(kinds[k % 4](k) for k in range(3 * BLOCK + 10))
    gc.collect()
    lists = [r for r in gc.get_referents(column) if isinstance(r, list)]  # blocks, tail
    walked = [inner for outer in lists for inner in gc.get_referents(outer)]
    assert len(walked) == 3 + 10  # what a full collection visits: 3 blocks, a tail of 10
    assert not any(gc.is_tracked(r) for r in walked)  # and not the blocks' items
    held = object()
    column.append(held)  # an object the collector tracks is walked, wherever it is
    assert column[-1] is held
