"""A store on a Redis server: shared by many machines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..exceptions import CacheError, ConfigurationError
from ._closing import Closing
from ._redis import import_redis, invalid_url
from ._stamps import Stamps
from .base import check_entries
from .spec import mask_credentials, scrub

__all__ = ["RedisStore"]


_WRITTEN = "~namespaces"  # after a Redis store's prefix: its namespaces' write times
_REDIS_CHUNK = 500


def _glob_escape(text: str) -> str:
    """``text`` matched literally in a Redis ``SCAN MATCH`` pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class RedisStore(Closing):
    """Keys ``prefix + id`` in a Redis server, shared by every process and machine that
    reaches it. A batch is one ``MULTI``/``EXEC`` of ``SET NX`` (all or none, never an
    overwrite). Entries do not expire: configure the server without eviction
    (``maxmemory-policy noeviction``) so nothing is lost.

    When each namespace was last written (see :meth:`namespaces`) is kept in the sorted
    set ``prefix + "~namespaces"`` (no id ctxfold makes), updated in the transaction
    of the write."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        client: Any = None,
        prefix: str = "ctxfold:store:",
    ) -> None:
        if not isinstance(prefix, str) or not prefix:
            raise ConfigurationError(f"prefix must be a non-empty string, got {prefix!r}")
        if not isinstance(url, str):
            raise ConfigurationError(f"url must be a string, got {type(url).__name__}")
        redis = import_redis("store")
        self._errors: tuple[type[BaseException], ...] = (redis.exceptions.RedisError,)
        self.prefix = prefix
        self._written = prefix + _WRITTEN  # the sorted set of namespaces' write times
        self._stamps = Stamps()
        self._owns_client = client is None
        if client is None:
            try:
                client = redis.Redis.from_url(url, socket_connect_timeout=5.0, socket_timeout=30.0)
            except ValueError as exc:
                raise invalid_url(url, exc) from None
        self.url = url
        self._client = client
        self._call(client.ping)

    def _call(self, func: Any, *args: Any) -> Any:
        try:
            return func(*args)
        except self._errors as exc:
            raise CacheError(
                f"the Redis store at {mask_credentials(self.url)} failed: "
                f"{scrub(str(exc), self.url)}; check that the "
                "server runs (redis-server --port 6379 --bind 127.0.0.1) and the URL"
            ) from None

    def put_many(self, entries: Mapping[str, bytes], *, namespace: str | None = None) -> None:
        """Store every entry in one transaction; existing ids keep their value.
        ``namespace``: the entries are that namespace's, written now (see
        :meth:`namespaces`; in the same transaction)."""
        check_entries(entries)
        if not entries:
            return
        pipe = self._client.pipeline(transaction=True)
        for key, value in entries.items():
            pipe.set(self.prefix + key, value, nx=True)
        at = self._stamps.due(namespace)
        if namespace is not None and at is not None:
            pipe.zadd(self._written, {namespace: at})
        self._call(pipe.execute)
        self._stamps.recorded(namespace, at)

    def put_new(self, entries: Mapping[str, bytes], *, namespace: str | None = None) -> list[str]:
        """Store every entry if none of the ids exists, else nothing (one ``MSETNX``,
        atomic on the server): the ids taken (``namespace`` as for :meth:`put_many`,
        in the same transaction)."""
        check_entries(entries)
        if not entries:
            return []
        keyed = {self.prefix + key: value for key, value in entries.items()}
        at = self._stamps.due(namespace)
        if namespace is None or at is None:
            stored = self._call(self._client.msetnx, keyed)
        else:
            pipe = self._client.pipeline(transaction=True)
            pipe.msetnx(keyed)
            pipe.zadd(self._written, {namespace: at})
            stored = self._call(pipe.execute)[0]
        if stored:
            self._stamps.recorded(namespace, at)
            return []
        values = self.get_many(list(entries))
        return [key for key, v in zip(entries, values, strict=True) if v is not None]

    def delete_many(self, ids: Sequence[str]) -> int:
        """Delete the entries under ``ids`` (``UNLINK``, 500 a call): how many there were."""
        ids = list(dict.fromkeys(ids))
        n = 0
        for start in range(0, len(ids), _REDIS_CHUNK):
            chunk = [self.prefix + i for i in ids[start : start + _REDIS_CHUNK]]
            n += int(self._call(self._client.unlink, *chunk))
        return n

    def ids_with_prefix(self, prefix: str) -> list[str]:
        """Every id that begins with ``prefix`` (a ``SCAN`` of the server's keys)."""
        pattern = _glob_escape(self.prefix + prefix) + "*"
        keys = self._call(lambda: list(self._client.scan_iter(match=pattern, count=1000)))
        n = len(self.prefix)
        ids = [(k.decode() if isinstance(k, bytes) else str(k))[n:] for k in keys]
        return [i for i in ids if i != _WRITTEN]

    def delete_prefix(self, prefix: str) -> int:
        """Delete every entry whose id begins with ``prefix``, then the write times of
        the namespaces that do: how many entries there were (not atomic: a ``SCAN``,
        then ``UNLINK`` in batches)."""
        self._stamps.forget()
        n = self.delete_many(self.ids_with_prefix(prefix))
        gone = list(self.namespaces(prefix))
        if gone:
            self._call(self._client.zrem, self._written, *gone)
        return n

    def namespaces(self, prefix: str = "") -> dict[str, float]:
        """When each namespace beginning with ``prefix`` was last written (seconds since
        the epoch), as :class:`NamespacedStore` writes report it."""
        pairs = self._call(self._client.zrange, self._written, 0, -1, False, True)
        out = {}
        for ns, at in pairs:
            name = ns.decode() if isinstance(ns, bytes) else str(ns)
            if name.startswith(prefix):
                out[name] = float(at)
        return out

    def get_many(self, ids: Sequence[str]) -> list[bytes | None]:
        """The values under ``ids``, in order (``None`` where unknown)."""
        ids = list(ids)
        if not ids:
            return []
        values = self._call(self._client.mget, [self.prefix + i for i in ids])
        return [None if v is None else bytes(v) for v in values]

    def close(self) -> None:
        """Release the connection pool this store created (not a client passed in)."""
        if self._owns_client:
            self._client.close()

    def __repr__(self) -> str:
        return f"RedisStore({mask_credentials(self.url)!r}, prefix={self.prefix!r})"
