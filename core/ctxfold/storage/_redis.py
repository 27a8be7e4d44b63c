"""The one Redis helper of the cache and the store: the client import with its install
hint, and URLs that never show a password."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..exceptions import MissingDependencyError

__all__ = ["client_url", "import_redis", "redact"]


def import_redis(what: str = "cache backend") -> Any:
    try:
        import redis
    except ImportError:
        raise MissingDependencyError(f"The Redis {what}", "redis", "redis") from None
    return redis


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***``, for error messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.netloc.rpartition("@")[2]
        user = parts.username or ""
        return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    except ValueError:
        return "<unparseable URL>"


def client_url(client: Any) -> str:
    """A description of a user-supplied client's server, for messages."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if isinstance(kwargs, dict):
        if "path" in kwargs:
            return f"unix://{kwargs['path']}"
        host, port, db = kwargs.get("host"), kwargs.get("port"), kwargs.get("db", 0)
        if host is not None:
            return f"redis://{host}:{port}/{db}"
    return repr(client)
