"""Issue 47, item 15 (stores): entries can be deleted, a store knows when each
namespace was last written, ``prune`` keeps sessions by age or count, and a capped
memory store never drops a session's entries (item 13, defence in depth)."""

from __future__ import annotations

import sqlite3
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ctxfold import ConfigurationError
from ctxfold.storage import (
    SESSION_PREFIX,
    MemoryStore,
    NamespacedStore,
    Pruned,
    RedisStore,
    SQLiteStore,
    delete,
    delete_prefix,
    prune,
)

S1, S2 = f"{SESSION_PREFIX}2:s1:", f"{SESSION_PREFIX}4:s[*]:"  # glob characters too


def _stores(tmp_path: Path, redis_url: str | None, redis_prefix: str | None) -> list[Any]:
    stores: list[Any] = [
        MemoryStore(),
        MemoryStore(max_bytes=10_000),
        SQLiteStore(tmp_path / "d.db"),
    ]
    if redis_url:
        stores.append(RedisStore(redis_url, prefix=redis_prefix or "t:"))
    return stores


@pytest.fixture(params=["memory", "capped", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "redis":
        url, prefix = request.getfixturevalue("redis_url"), request.getfixturevalue("redis_prefix")
        made: Any = RedisStore(url, prefix=prefix)
    else:
        made = {
            "memory": MemoryStore,
            "capped": lambda: MemoryStore(max_bytes=10_000),
            "sqlite": lambda: SQLiteStore(tmp_path / "d.db"),
        }[request.param]()
    yield made
    if hasattr(made, "close"):
        made.close()


def test_entries_are_deleted_by_id_and_by_prefix(store: Any) -> None:
    store.put_many({"a": b"1", "b": b"2", S1 + "0:m:0": b"x", S1 + "k": b"y", S2 + "0": b"z"})
    assert delete(store, ["a", "missing"]) == 1
    assert store.get_many(["a", "b"]) == [None, b"2"]
    assert sorted(store.ids_with_prefix(S1)) == [S1 + "0:m:0", S1 + "k"]
    assert store.ids_with_prefix(S2) == [S2 + "0"]  # '[', '*' taken as they are
    assert delete_prefix(store, S1) == 2
    assert store.get_many([S1 + "0:m:0", S1 + "k", S2 + "0", "b"]) == [None, None, b"z", b"2"]


def test_a_namespace_knows_when_it_was_last_written(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a namespace, in the write's own transaction; a write of no namespace
    records none; deleting the namespace forgets it."""
    monkeypatch.setattr("ctxfold.storage._stamps._STAMP_EVERY", 0.0)  # every write
    one, two = NamespacedStore(store, S1), NamespacedStore(store, S2)
    store.put_many({"plain": b"1"})
    assert store.namespaces() == {}
    one.put_many({"0:m:0": b"a"})
    assert two.put_new({"0:m:0": b"b"}) == []
    first = store.namespaces(SESSION_PREFIX)
    assert set(first) == {S1, S2} and first[S1] <= first[S2]
    assert two.put_new({"0:m:0": b"again"}) == ["0:m:0"]  # taken: nothing written
    one.put_new({"0:m:1": b"c"})
    assert store.namespaces()[S1] >= first[S2]
    assert one.delete_prefix("") == 2
    assert set(store.namespaces()) == {S2}
    assert store.get_many(["plain", S2 + "0:m:0"]) == [b"1", b"b"]
    assert two.ids_with_prefix("0:") == ["0:m:0"] and two.delete_many(["0:m:0"]) == 1


def test_a_namespace_write_time_is_recorded_once_a_second(store: Any) -> None:
    """A session's turns write several times a second: its write time is recorded
    with the first write of each second (no statement more per write), and again at
    once after a delete."""
    one, throttled = NamespacedStore(store, S1), not isinstance(store, MemoryStore)
    one.put_new({"0:m:0": b"a"})
    first = store.namespaces()[S1]
    time.sleep(0.01)
    one.put_new({"0:m:1": b"b"})
    assert (store.namespaces()[S1] == first) is throttled  # memory: every write, for free
    one.delete_prefix("")
    one.put_new({"0:m:0": b"c"})
    assert store.namespaces()[S1] > first
    if throttled:
        time.sleep(1.01)
        one.put_new({"0:m:1": b"d"})
        assert store.namespaces()[S1] >= first + 1


def test_prune_keeps_the_newest_sessions_and_the_recent_ones(store: Any) -> None:
    spaces = [f"{SESSION_PREFIX}2:s{k}:" for k in range(4)]
    for ns in spaces:  # written in this order: s3 newest
        NamespacedStore(store, ns).put_many({"0:m:0": ns.encode(), "123456789012": b"o"})
        time.sleep(0.01)
    store.put_many({"123456789012": b"compress's original"})
    when = {ns[-3:-1]: at for ns, at in store.namespaces().items()}
    assert prune(store, max_sessions=3) == Pruned(("s0",), 2)
    now = when["s3"] + 100.0  # s1 and s2 are idle for more than 100 s + half s2's lead
    assert prune(store, max_age=100.0 + (when["s3"] - when["s2"]) / 2, now=now).sessions == (
        "s2",
        "s1",
    )
    assert prune(store, max_age=timedelta(seconds=1)).sessions == ()  # s3 was just written
    assert prune(store, max_age=0, now=now).sessions == ("s3",)
    assert store.namespaces() == {}
    assert store.get_many(["123456789012"]) == [b"compress's original"]
    assert all(not i.startswith(SESSION_PREFIX) for i in store.ids_with_prefix(""))


def test_prune_says_what_it_needs(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="max_age"):
        prune(MemoryStore())
    for bad in ({"max_age": -1}, {"max_sessions": -1}, {"max_sessions": True}, {"max_age": "1d"}):
        with pytest.raises(ConfigurationError):
            prune(MemoryStore(), **bad)

    class Plain:  # the two methods of the protocol, no more
        def put_many(self, entries: Any) -> None: ...

        def get_many(self, ids: Any) -> list[bytes | None]:
            return [None for _ in ids]

    with pytest.raises(ConfigurationError, match="namespaces"):
        prune(Plain(), max_sessions=1)
    with pytest.raises(ConfigurationError, match="delete_many"):
        delete(Plain(), ["a"])
    with pytest.raises(ConfigurationError, match="delete_many"):
        NamespacedStore(Plain(), S1).delete_prefix("")


def test_a_capped_memory_store_never_drops_a_sessions_entries() -> None:
    """Past its cap the oldest entries go, never one under a session's namespace, and
    those do not count against the cap."""
    store = MemoryStore(max_bytes=2_000)
    session = NamespacedStore(store, S1)
    session.put_many({f"0:m:{k}": b"m" * 100 for k in range(30)})  # 3 KB: past the cap
    for k in range(100):
        store.put_many({f"{k:012d}": b"o" * 100})
    assert store.evicted > 0
    assert None not in session.get_many([f"0:m:{k}" for k in range(30)])
    assert store.get_many([f"{99:012d}"]) != [None]
    assert store.nbytes <= 2_000 + 30 * (len(S1) + 6 + 100)


def test_an_existing_sqlite_file_gets_the_table_of_write_times_at_its_first_write(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # as an older ctxfold made it
        conn.execute("CREATE TABLE ctxfold_store (id TEXT PRIMARY KEY, value BLOB NOT NULL)")
        conn.execute("INSERT INTO ctxfold_store VALUES (?, ?)", (S1 + "0:m:0", b"old"))
    with SQLiteStore(path) as store:
        assert store.namespaces() == {}
        assert prune(store, max_sessions=0).sessions == ()  # unknown until written
        NamespacedStore(store, S1).put_new({"0:m:1": b"new"})
        assert list(store.namespaces()) == [S1]
        assert prune(store, max_sessions=0).sessions == ("s1",)
        assert store.ids_with_prefix("") == []
