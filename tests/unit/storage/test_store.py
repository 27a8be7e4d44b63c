"""The verbatim store: what is read back is what was written, or an error says it is
not; an existing SQLite store opens without writing (read-only files, busy writers)."""

from __future__ import annotations

import sqlite3

import pytest

import ctxfold
from ctxfold import MemoryStore, SQLiteStore
from ctxfold.exceptions import CacheError, CorruptRecordError

TASK = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the failing parser test in pkg/server/handler.go " * 6},
    {"role": "assistant", "content": "I will read pkg/server/handler.go first. " * 5},
    {"role": "user", "content": "Also check the retry logic in src/app/client.py"},
]


def compressed(store):
    result = ctxfold.compress(TASK, budget=60, reversible=True, store=store)
    assert result.round_id and ctxfold.expand(result, store=store).complete
    return result


def test_an_altered_record_is_reported_corrupt_never_given_back_as_the_original():
    store = MemoryStore()
    result = compressed(store)
    record = ctxfold.expand(result.round_id, store=store)  # the round's hidden text
    assert "handler.go" in record
    # alter one stored message: same id, other bytes
    victim = next(k for k, v in store._data.items() if b"handler.go" in v and b'"msg"' in v)
    store._data[victim] = store._data[victim].replace(b"handler.go", b"handler.py")
    back = ctxfold.expand(result, store=store)
    assert not back.complete and back.corrupt == (victim,)
    with pytest.raises(CorruptRecordError, match=victim) as caught:
        ctxfold.expand(f"[expand {victim}]", store=store)
    assert caught.value.ids == (victim,)


def test_a_record_that_is_not_json_is_corrupt_too():
    store = MemoryStore()
    result = compressed(store)
    store._data[result.round_id] = b"\xff\xfe not json"
    back = ctxfold.expand(result, store=store)
    assert back.corrupt == (result.round_id,) and not back.complete
    with pytest.raises(CorruptRecordError):
        ctxfold.expand(result.round_id, store=store)


def test_a_read_only_sqlite_store_can_be_expanded(tmp_path, monkeypatch):
    path = tmp_path / "originals.db"
    with SQLiteStore(path) as store:
        result = compressed(store)
    # as a user without write permission sees it (root ignores file modes, so the
    # check itself is what the test controls)
    monkeypatch.setattr("ctxfold.storage.store.os.access", lambda p, mode: False)
    with SQLiteStore(path) as store:
        assert store.read_only
        back = ctxfold.expand(result, store=store)
        assert back.complete and back.to_openai() == TASK
        with pytest.raises(CacheError, match="read-only"):
            store.put_many({"123": b"x"})


def test_opening_an_existing_store_waits_for_no_writer(tmp_path):
    path = tmp_path / "originals.db"
    with SQLiteStore(path) as store:
        result = compressed(store)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
    try:
        with SQLiteStore(path) as store:
            assert ctxfold.expand(result, store=store).complete
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_locked_store_says_so(tmp_path):
    path = tmp_path / "originals.db"
    SQLiteStore(path).close()
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    store = SQLiteStore(path)
    store._conn.execute("PRAGMA busy_timeout = 50")  # do not wait 30 s in a test
    try:
        with pytest.raises(CacheError, match="another process holds the file's write lock"):
            store.put_many({"123": b"x"})
        # the wait is this connection's own: what it was configured to wait stays
        assert store._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 50
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        store.close()


def test_a_busy_write_lock_is_tried_again_in_short_pauses(tmp_path, monkeypatch):
    """SQLite's own waits grow to 100 ms, so a writer slept long after a short
    transaction ended (the tail under load); the store tries again every few ms."""
    from ctxfold.storage import _sqlite

    path = tmp_path / "originals.db"
    SQLiteStore(path).close()
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 12:
            writer.execute("COMMIT")  # the other writer is done

    monkeypatch.setattr(_sqlite, "sleep", pause)
    with SQLiteStore(path) as store:
        store._conn.execute("PRAGMA busy_timeout = 5000")  # fail in 5 s, not 30, if not
        store.put_many({"123": b"x"})
        assert store.get_many(["123"]) == [b"x"]
        assert store._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    writer.close()
    assert len(pauses) == 12
    assert max(pauses) <= 1.5 * _sqlite._LAST_PAUSE
    assert pauses[0] <= 1.5 * _sqlite._FIRST_PAUSE < pauses[-1]


@pytest.mark.parametrize("durable", [False, True])
def test_every_connection_commits_as_configured_also_to_an_existing_file(tmp_path, durable):
    """``synchronous`` is not kept in the file: a store that opened an existing file
    used to flush every commit (FULL) while the one that created it did not."""
    from ctxfold.storage import SQLiteBackend

    path = tmp_path / "originals.db"
    expected = 2 if durable else 1  # FULL, NORMAL
    for _ in range(2):  # creating the file, then opening it
        with SQLiteStore(path, durable=durable) as store:
            assert store.durable is durable
            assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == expected
    for _ in range(2):
        with SQLiteBackend(tmp_path / "cache.db") as cache:
            assert cache._conn.execute("PRAGMA synchronous").fetchone()[0] == 1


def test_store_specs_follow_the_sqlalchemy_convention(tmp_path, monkeypatch):
    from ctxfold.storage import get_store, sqlite_path

    monkeypatch.chdir(tmp_path)
    relative = get_store("sqlite:///originals.db")  # three slashes: relative
    assert isinstance(relative, SQLiteStore) and relative.path == "originals.db"
    relative.close()
    assert (tmp_path / "originals.db").exists()
    absolute = tmp_path / "abs" / "originals.db"
    absolute.parent.mkdir()
    store = get_store(f"sqlite:///{absolute}")  # four slashes: absolute
    assert isinstance(store, SQLiteStore) and store.path == str(absolute)
    store.close()
    assert sqlite_path("sqlite:////var/x.db") == "/var/x.db"
    assert sqlite_path("sqlite:///x.db") == "x.db" and sqlite_path("sqlite:x.db") == "x.db"
    assert sqlite_path("sqlite://") == "" and sqlite_path("redis://h:1/0") is None
    assert not (tmp_path / ":memory:").exists()


def test_memory_specs_name_the_one_store_that_can_expand_later():
    from ctxfold.storage import get_store

    shared = get_store(None)
    assert get_store("memory") is shared and get_store("sqlite:///:memory:") is shared
    history = [*TASK, {"role": "assistant", "content": "Checked. " * 30}]
    result = ctxfold.compress(history, budget=60, store="memory")
    assert ctxfold.expand(result, store="memory").to_openai() == history
    assert ctxfold.expand(result).complete  # the default store is the same one


def _stores(tmp_path, redis_url=None, redis_prefix=None):
    from ctxfold.storage import NamespacedStore, RedisStore, SQLiteStore

    stores = [MemoryStore(), SQLiteStore(tmp_path / "n.db"), NamespacedStore(MemoryStore(), "ns:")]
    if redis_url:
        stores.append(RedisStore(redis_url, prefix=redis_prefix))
    return stores


def test_put_new_writes_a_batch_only_where_every_id_is_free(tmp_path, redis_url, redis_prefix):
    """The write a session's records go through: all of the batch or, when another
    writer took one of its ids first, none of it, and the ids taken."""
    from ctxfold.storage import put_new

    for store in _stores(tmp_path, redis_url, redis_prefix):
        assert put_new(store, {"a": b"1", "b": b"2"}) == []
        assert put_new(store, {"c": b"3", "b": b"other"}) == ["b"], store
        assert store.get_many(["a", "b", "c"]) == [b"1", b"2", None], store


def test_put_new_on_a_store_of_ones_own_checks_then_writes():
    from ctxfold.storage import put_new

    class Plain:  # only the two methods of the protocol
        def __init__(self):
            self.data = {}

        def put_many(self, entries):
            for k, v in entries.items():
                self.data.setdefault(k, v)

        def get_many(self, ids):
            return [self.data.get(i) for i in ids]

    store = Plain()
    assert put_new(store, {"a": b"1"}) == []
    assert put_new(store, {"a": b"2", "z": b"3"}) == ["a"]
    assert store.data == {"a": b"1"}


def test_content_ids_are_keyed_per_persistent_store(tmp_path):
    """An id made for one store says nothing in another: a guessed message's plain
    content id finds nothing, and the same history gets other ids in another file.
    Memory stores, private to a process, keep plain ids (the same output anywhere)."""
    import hashlib

    from ctxfold.reversible.records import KEY_ID, encode, entry_id, message_record

    a, b = SQLiteStore(tmp_path / "a.db"), SQLiteStore(tmp_path / "b.db")
    ra, rb = compressed(a), compressed(b)
    assert ra.round_id != rb.round_id
    assert ctxfold.expand(ra, store=a).complete and ctxfold.expand(rb, store=b).complete
    guess = ctxfold.from_openai([TASK[1]])[0]  # the attacker's guess, exactly right
    plain = entry_id(hashlib.sha256(encode(message_record(guess))).digest(), 12)
    with pytest.raises(ctxfold.ExpandError, match="nothing is stored"):
        ctxfold.expand(plain, store=a)
    with pytest.raises(CorruptRecordError):  # the key itself is not content
        ctxfold.expand(KEY_ID, store=a)
    m1, m2 = MemoryStore(), MemoryStore()
    assert compressed(m1).round_id == compressed(m2).round_id


def test_a_store_written_before_ids_were_keyed_keeps_reading(tmp_path):
    """Originals stored under plain content ids (an older ctxfold) expand, also after
    the store gained a key for new ids."""
    import hashlib

    from ctxfold.reversible.records import encode, entry_id, message_record

    store = SQLiteStore(tmp_path / "old.db")
    m = ctxfold.from_openai([TASK[2]])[0]
    data = encode(message_record(m))
    old_id = entry_id(hashlib.sha256(data).digest(), 12)
    store.put_many({old_id: data})
    assert "I will read pkg/server/handler.go" in ctxfold.expand(old_id, store=store)
    compressed(store)  # the store gets its key
    assert "I will read pkg/server/handler.go" in ctxfold.expand(
        old_id, store=SQLiteStore(tmp_path / "old.db")
    )
