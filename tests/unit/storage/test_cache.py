"""The cache: keys, the LRU contract every backend keeps, and each backend's own promises.

The contract runs over the real memory, SQLite and Redis backends; the Redis cases need
a live server (see the ``redis_url`` fixture in conftest.py).
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxfold.exceptions import (
    CacheEntryError,
    CacheError,
    ConfigurationError,
    CtxfoldError,
    MissingDependencyError,
)
from ctxfold.storage import (
    Cache,
    CacheBackend,
    CacheStats,
    MemoryBackend,
    RedisBackend,
    SQLiteBackend,
    cache_key,
    get_cache,
)

Factory = Callable[..., Any]


@pytest.fixture(params=["memory", "sqlite", "redis"])
def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    """Builds fresh backends of one kind; ``make(max_entries)``."""
    made: list[Any] = []

    def make(max_entries: int = 1000) -> Any:
        n = len(made)
        if request.param == "memory":
            backend: Any = MemoryBackend(max_entries)
        elif request.param == "sqlite":
            backend = SQLiteBackend(tmp_path / f"cache{n}.db", max_entries=max_entries)
        else:
            url = request.getfixturevalue("redis_url")
            prefix = request.getfixturevalue("redis_prefix")
            backend = RedisBackend(url, prefix=f"{prefix}{n}:", max_entries=max_entries)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        close = getattr(backend, "close", None)
        if close is not None:
            close()


# ------------------------------------------------------------------ the shared contract


def test_backend_is_a_cache_backend(make_backend: Factory) -> None:
    assert isinstance(make_backend(), CacheBackend)


def test_roundtrip_and_miss(make_backend: Factory) -> None:
    backend = make_backend()
    assert backend.get("absent") is None
    assert backend.set("k", b"\x00value\xff") == 0
    assert backend.get("k") == b"\x00value\xff"
    assert backend.set("empty", b"") == 0
    assert backend.get("empty") == b""  # an empty value is a hit, not a miss
    assert len(backend) == 2


def test_overwrite_replaces_without_evicting(make_backend: Factory) -> None:
    backend = make_backend(2)
    backend.set("a", b"1")
    backend.set("b", b"2")
    assert backend.set("a", b"3") == 0
    assert backend.get("a") == b"3"
    assert len(backend) == 2


def test_read_refreshes_recency(make_backend: Factory) -> None:
    backend = make_backend(3)
    for key in ("a", "b", "c"):
        backend.set(key, key.encode())
    assert backend.get("a") == b"a"  # a is now the most recently used; b the least
    assert backend.set("d", b"d") == 1
    assert backend.get("b") is None
    assert [backend.get(k) for k in ("a", "c", "d")] == [b"a", b"c", b"d"]


def test_get_many_refreshes_recency(make_backend: Factory) -> None:
    backend = make_backend(3)
    for key in ("a", "b", "c"):
        backend.set(key, key.encode())
    backend.get_many(["b", "a"])  # c is now the least recently used
    assert backend.set("d", b"d") == 1
    assert backend.get_many(["a", "b", "c", "d"]) == [b"a", b"b", None, b"d"]


def test_write_refreshes_recency(make_backend: Factory) -> None:
    backend = make_backend(2)
    backend.set("a", b"1")
    backend.set("b", b"2")
    backend.set("a", b"1")  # rewriting a makes b the least recently used
    assert backend.set("c", b"3") == 1
    assert backend.get_many(["a", "b", "c"]) == [b"1", None, b"3"]


def test_eviction_order_is_least_recently_used(make_backend: Factory) -> None:
    backend = make_backend(4)
    for key in "abcd":
        backend.set(key, key.encode())
    backend.get("a")
    backend.get("c")
    # recency now: b, d, a, c (oldest first)
    assert backend.set("e", b"e") == 1
    assert backend.set("f", b"f") == 1
    assert backend.get_many(list("abcdef")) == [b"a", None, b"c", None, b"e", b"f"]


def test_get_many_order_missing_duplicates_and_empty(make_backend: Factory) -> None:
    backend = make_backend()
    backend.set("x", b"1")
    backend.set("y", b"2")
    assert backend.get_many([]) == []
    assert backend.get_many(["y", "nope", "x", "y"]) == [b"2", None, b"1", b"2"]


def test_get_many_beyond_one_batch(make_backend: Factory) -> None:
    backend = make_backend(5000)
    keys = [f"k{i}" for i in range(1200)]
    for key in keys[::2]:
        backend.set(key, key.encode())
    got = backend.get_many(keys)
    assert got == [k.encode() if i % 2 == 0 else None for i, k in enumerate(keys)]


def test_clear(make_backend: Factory) -> None:
    backend = make_backend()
    for i in range(10):
        backend.set(f"k{i}", b"v")
    backend.clear()
    assert len(backend) == 0
    assert backend.get("k1") is None
    backend.set("again", b"v")  # still usable after a clear
    assert backend.get("again") == b"v"


def test_capacity_is_never_exceeded(make_backend: Factory) -> None:
    backend = make_backend(5)
    evicted = sum(backend.set(f"k{i}", b"v") for i in range(12))
    assert evicted == 7
    assert len(backend) == 5
    assert backend.get_many([f"k{i}" for i in range(12)])[-5:] == [b"v"] * 5


def test_backend_rejects_non_bytes(make_backend: Factory) -> None:
    backend = make_backend()
    with pytest.raises(TypeError, match="bytes"):
        backend.set("k", "text")


def test_stats_count_hits_misses_evictions(make_backend: Factory) -> None:
    cache = Cache(make_backend(2))
    cache.set("a", b"1")
    cache.set("b", b"2")
    assert cache.get("a") == b"1"
    cache.set("c", b"3")  # evicts b
    assert cache.get("b") is None
    assert cache.get_many(["a", "c", "zz"]) == [b"1", b"3", None]
    stats = cache.stats
    assert stats == CacheStats(hits=3, misses=2, evictions=1, entries=2)
    assert stats.hit_rate == pytest.approx(0.6)
    cache.reset_stats()
    assert cache.stats == CacheStats(hits=0, misses=0, evictions=0, entries=2)
    cache.clear()
    assert cache.stats.entries == 0


def test_threads(make_backend: Factory) -> None:
    capacity = 300
    cache = Cache(make_backend(capacity))
    threads, per_thread = 8, 200  # half writes of unique keys, half reads
    errors: list[BaseException] = []
    bad_reads: list[tuple[str, bytes]] = []
    barrier = threading.Barrier(threads)

    def work(t: int) -> None:
        rng = random.Random(t)
        try:
            barrier.wait()
            for i in range(per_thread // 2):
                key = f"t{t}-{i}"
                cache.set(key, key.encode())
                probe = f"t{rng.randrange(threads)}-{rng.randrange(i + 1)}"
                value = cache.get(probe)
                if value is not None and value != probe.encode():
                    bad_reads.append((probe, value))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert errors == []
    assert bad_reads == []
    stats = cache.stats
    writes = threads * per_thread // 2
    assert stats.hits + stats.misses == writes
    assert stats.entries == capacity
    assert stats.evictions + stats.entries == writes  # every unique write is kept or evicted


def test_asyncio(make_backend: Factory) -> None:
    cache = Cache(make_backend(1000))

    async def main() -> list[bytes | None]:
        await asyncio.gather(*(cache.aset(f"k{i}", str(i).encode()) for i in range(200)))
        return await asyncio.gather(*(cache.aget(f"k{i}") for i in range(250)))

    got = asyncio.run(main())
    assert got[:200] == [str(i).encode() for i in range(200)]
    assert got[200:] == [None] * 50
    assert cache.stats == CacheStats(hits=200, misses=50, evictions=0, entries=200)


# --------------------------------------------------------------------------- cache_key


def test_cache_key_is_sha256_hex_and_deterministic() -> None:
    key = cache_key("summarize", "extractive", "some text")
    assert len(key) == 64
    assert int(key, 16) >= 0
    assert key == cache_key("summarize", "extractive", "some text")


def test_cache_key_parts_are_length_prefixed() -> None:
    assert cache_key("ab", "c") != cache_key("a", "bc")
    assert cache_key("abc") != cache_key("ab", "c")
    assert cache_key("a", "") != cache_key("a")
    assert cache_key() != cache_key("")
    assert cache_key("a", "b") != cache_key("b", "a")


def test_cache_key_str_is_utf8() -> None:
    assert cache_key("héllo", "x") == cache_key("héllo".encode(), b"x")


def test_cache_key_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="str or bytes"):
        cache_key("a", 3)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------- Cache


def test_cache_defaults_to_memory() -> None:
    cache = Cache()
    assert isinstance(cache.backend, MemoryBackend)
    assert cache.get("k") is None
    assert cache.stats.hit_rate == 0.0


def test_cache_set_checks_value_type() -> None:
    cache = Cache()
    with pytest.raises(CacheEntryError, match=r"encode it first") as info:
        cache.set("k", "a str")  # type: ignore[arg-type]
    assert isinstance(info.value, TypeError) and isinstance(info.value, CtxfoldError)
    with pytest.raises(TypeError, match=r"encode it first"):
        cache.set("k", "a str")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="keys must be str"):
        cache.set(b"k", b"v")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sequence of keys"):
        cache.get_many("abc")


def test_cache_rejects_bad_settings() -> None:
    with pytest.raises(ConfigurationError, match="CacheBackend"):
        Cache(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="namespace"):
        Cache(namespace="a:b")
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ConfigurationError, match="max_entries"):
            MemoryBackend(bad)  # type: ignore[arg-type]


def test_namespaces_share_a_backend_without_colliding() -> None:
    backend = MemoryBackend()
    summaries = Cache(backend, namespace="summary")
    embeddings = Cache(backend, namespace="embedding")
    summaries.set("k", b"s")
    embeddings.set("k", b"e")
    assert (summaries.get("k"), embeddings.get("k"), len(backend)) == (b"s", b"e", 2)


def test_get_or_compute_computes_once() -> None:
    cache = Cache()
    calls: list[int] = []

    def compute() -> bytes:
        calls.append(1)
        return b"result"

    assert cache.get_or_compute("k", compute) == b"result"
    assert cache.get_or_compute("k", compute) == b"result"
    assert len(calls) == 1
    assert (cache.stats.hits, cache.stats.misses) == (1, 1)
    with pytest.raises(TypeError, match="bytes"):
        cache.get_or_compute("other", lambda: "not bytes")  # type: ignore[arg-type, return-value]


def test_async_get_or_compute_and_get_many() -> None:
    cache = Cache()
    calls: list[int] = []

    async def compute() -> bytes:
        calls.append(1)
        await asyncio.sleep(0)
        return b"async"

    async def main() -> tuple[bytes, bytes, list[bytes | None]]:
        first = await cache.aget_or_compute("k", compute)
        second = await cache.aget_or_compute("k", compute)
        return first, second, await cache.aget_many(["k", "missing"])

    assert asyncio.run(main()) == (b"async", b"async", [b"async", None])
    assert len(calls) == 1


# ------------------------------------------------------------------------------ SQLite


def test_sqlite_persists_entries_and_recency_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    with SQLiteBackend(path, max_entries=3) as backend:
        for key in ("a", "b", "c"):
            backend.set(key, key.encode())
        backend.get("a")
    with SQLiteBackend(path, max_entries=3) as backend:
        assert len(backend) == 3
        assert backend.set("d", b"d") == 1  # b was least recently used before the reopen
        assert backend.get_many(["a", "b", "c", "d"]) == [b"a", None, b"c", b"d"]


def test_sqlite_two_connections_share_one_lru(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with SQLiteBackend(path, max_entries=2) as one, SQLiteBackend(path, max_entries=2) as two:
        one.set("a", b"1")
        two.set("b", b"2")
        assert one.get("a") == b"1"  # read through one refreshes a for both
        assert two.set("c", b"3") == 1
        assert two.get_many(["a", "b", "c"]) == [b"1", None, b"3"]
        assert len(one) == len(two) == 2


def test_sqlite_recency_is_a_counter_not_a_clock(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SQLiteBackend(path) as backend:
        backend.set("a", b"1")
        backend.set("b", b"2")
        backend.get("a")
    with sqlite3.connect(path) as conn:
        rows = dict(conn.execute("SELECT key, used FROM ctxfold_cache").fetchall())
    assert rows == {"a": 3, "b": 2}


def test_sqlite_uses_wal_and_its_own_table(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE other (x)")
        conn.execute("INSERT INTO other VALUES (1)")
    with SQLiteBackend(path, table="summaries") as backend:
        backend.set("k", b"v")
        backend.clear()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT x FROM other").fetchall() == [(1,)]


def test_sqlite_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "cache.db"
    with pytest.raises(ConfigurationError, match="does not exist; create it first"):
        SQLiteBackend(missing)
    assert not missing.parent.exists()


def test_sqlite_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="is a directory"):
        SQLiteBackend(tmp_path)
    with pytest.raises(ConfigurationError, match="identifier"):
        SQLiteBackend(tmp_path / "c.db", table="x; DROP TABLE y")
    with pytest.raises(ConfigurationError, match="max_entries"):
        SQLiteBackend(tmp_path / "c.db", max_entries=0)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigurationError, match="cannot use"):
        SQLiteBackend(junk)


def test_sqlite_closed_backend_raises_cache_error(tmp_path: Path) -> None:
    backend = SQLiteBackend(tmp_path / "c.db")
    backend.close()
    backend.close()  # twice is harmless
    with pytest.raises(CacheError, match="closed"):
        backend.get("k")


def test_closing_a_cache_closes_its_backend(tmp_path: Path) -> None:
    with Cache(SQLiteBackend(tmp_path / "c.db")) as cache:
        cache.set("k", b"v")
    with pytest.raises(CacheError, match="closed"):
        cache.get("k")
    with Cache(SQLiteBackend(tmp_path / "c.db")) as reopened:
        assert reopened.get("k") == b"v"  # persisted
    memory = Cache()
    memory.close()  # nothing to close: harmless
    memory.set("k", b"v")


def test_sqlite_threads_share_one_connection(tmp_path: Path) -> None:
    backend = SQLiteBackend(tmp_path / "c.db", max_entries=50)
    cache = Cache(backend)

    def work(t: int) -> None:
        for i in range(50):
            cache.set(f"{t}-{i}", b"v")
            cache.get(f"{t}-{i // 2}")

    pool = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert len(backend) == 50
    assert cache.stats.evictions == 150
    backend.close()


# ------------------------------------------------------------------------------- Redis


def test_redis_layout_and_clear_touch_only_its_prefix(redis_url: str, redis_prefix: str) -> None:
    import redis

    raw = redis.Redis.from_url(redis_url)
    try:
        raw.set(f"{redis_prefix}other:keep", b"x")  # another prefix under ours
        raw.set(f"{redis_prefix}outside", b"y")
        with RedisBackend(redis_url, prefix=f"{redis_prefix}mine:", max_entries=10) as backend:
            backend.set("k1", b"v1")
            backend.set("k2", b"v2")
            backend.get("k1")
            assert raw.get(f"{redis_prefix}mine:v:k1") == b"v1"
            lru = raw.zrange(f"{redis_prefix}mine:lru", 0, -1)
            assert lru == [b"k2", b"k1"]  # k1 was read last
            assert int(raw.get(f"{redis_prefix}mine:clock") or 0) == 3
            backend.clear()
            assert len(backend) == 0
        assert list(raw.scan_iter(match=f"{redis_prefix}mine:*")) == []
        assert raw.get(f"{redis_prefix}other:keep") == b"x"
        assert raw.get(f"{redis_prefix}outside") == b"y"
    finally:
        raw.close()


def test_redis_eviction_deletes_values(redis_url: str, redis_prefix: str) -> None:
    import redis

    raw = redis.Redis.from_url(redis_url)
    try:
        with RedisBackend(redis_url, prefix=redis_prefix, max_entries=2) as backend:
            for key in ("a", "b", "c", "d"):
                backend.set(key, b"v")
        values = sorted(raw.scan_iter(match=f"{redis_prefix}v:*"))
        assert values == [f"{redis_prefix}v:c".encode(), f"{redis_prefix}v:d".encode()]
    finally:
        raw.close()


def test_redis_two_clients_share_one_lru(redis_url: str, redis_prefix: str) -> None:
    with (
        RedisBackend(redis_url, prefix=redis_prefix, max_entries=2) as one,
        RedisBackend(redis_url, prefix=redis_prefix, max_entries=2) as two,
    ):
        one.set("a", b"1")
        two.set("b", b"2")
        assert two.get("a") == b"1"
        assert one.set("c", b"3") == 1
        assert one.get_many(["a", "b", "c"]) == [b"1", None, b"3"]


def test_redis_accepts_an_existing_client(redis_url: str, redis_prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    backend = RedisBackend(client=client, prefix=redis_prefix)
    backend.set("k", b"v")
    backend.close()  # not ours: the client stays usable
    assert client.get(f"{redis_prefix}v:k") == b"v"
    with pytest.raises(ConfigurationError, match="decode_responses=False"):
        RedisBackend(client=redis.Redis.from_url(redis_url, decode_responses=True))
    client.close()


def test_redis_unreachable_server_is_a_clear_error() -> None:
    pytest.importorskip("redis")
    with pytest.raises(CacheError) as info:
        RedisBackend("redis://127.0.0.1:1/0")
    message = str(info.value)
    assert "cannot reach the Redis server at redis://127.0.0.1:1/0" in message
    assert "redis-server" in message
    assert "fix the URL" in message
    assert isinstance(info.value, CtxfoldError)
    assert isinstance(info.value, RuntimeError)


def test_redis_error_hides_the_password() -> None:
    pytest.importorskip("redis")
    with pytest.raises(CacheError) as info:
        RedisBackend("redis://user:s3cret@127.0.0.1:1/0")
    assert "s3cret" not in str(info.value)
    assert "user:***@127.0.0.1:1" in str(info.value)


def test_redis_bad_settings() -> None:
    pytest.importorskip("redis")
    with pytest.raises(ConfigurationError, match="invalid Redis URL"):
        RedisBackend("http://127.0.0.1:6379")
    with pytest.raises(ConfigurationError, match="prefix"):
        RedisBackend(prefix="")
    with pytest.raises(ConfigurationError, match="max_entries"):
        RedisBackend(max_entries=0)


def test_redis_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # makes `import redis` fail
    with pytest.raises(MissingDependencyError, match=r"pip install 'ctxfold\[redis\]'"):
        RedisBackend()


# --------------------------------------------------------------------------- get_cache


def test_get_cache_default_is_shared() -> None:
    first = get_cache()
    assert first is get_cache(None)
    assert isinstance(first.backend, MemoryBackend)


def test_get_cache_memory_is_new_each_time() -> None:
    one, two = get_cache("memory"), get_cache("memory")
    assert one is not two
    assert one is not get_cache()
    assert isinstance(one.backend, MemoryBackend)


def test_get_cache_passes_caches_and_wraps_backends() -> None:
    cache = Cache()
    assert get_cache(cache) is cache
    backend = MemoryBackend(5)
    wrapped = get_cache(backend)
    assert isinstance(wrapped, Cache)
    assert wrapped.backend is backend


def test_get_cache_sqlite_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absolute = tmp_path / "abs.db"
    cache = get_cache(f"sqlite:///{absolute}")  # sqlite:////abs/path.db
    assert isinstance(cache.backend, SQLiteBackend)
    assert cache.backend.path == str(absolute)
    cache.set("k", b"v")
    cache.backend.close()
    assert absolute.exists()

    monkeypatch.chdir(tmp_path)
    relative = get_cache("sqlite:rel.db")
    assert isinstance(relative.backend, SQLiteBackend)
    relative.backend.close()
    assert (tmp_path / "rel.db").exists()

    for name in ("plain.db", "plain.sqlite", "plain.sqlite3"):
        by_suffix = get_cache(os.path.join(str(tmp_path), name))
        assert isinstance(by_suffix.backend, SQLiteBackend)
        by_suffix.backend.close()
    by_path = get_cache(tmp_path / "pathlib.db")
    assert isinstance(by_path.backend, SQLiteBackend)
    by_path.backend.close()


def test_get_cache_redis(redis_url: str) -> None:
    cache = get_cache(redis_url)
    assert isinstance(cache.backend, RedisBackend)
    assert cache.backend.prefix == "ctxfold:"
    cache.backend.close()


def test_get_cache_rejects_other_specs() -> None:
    for bad in ("mongodb://x", "nonsense", "cache.txt", "sqlite:", 42, object()):
        with pytest.raises(ConfigurationError, match=r"sqlite:////abs/path\.db") as info:
            get_cache(bad)  # type: ignore[arg-type]
        assert isinstance(info.value, ValueError)


def test_get_cache_unreachable_redis() -> None:
    pytest.importorskip("redis")
    with pytest.raises(CacheError, match="redis-server"):
        get_cache("redis://127.0.0.1:1/0")
