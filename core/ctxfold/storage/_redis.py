"""The one Redis helper of the cache and the store: the client import with its install
hint, and messages that never show a URL's password (:func:`.spec.mask_credentials`,
also in the client's own error text: :func:`.spec.scrub`)."""

from __future__ import annotations

from typing import Any

from ..exceptions import ConfigurationError, MissingDependencyError
from .spec import mask_credentials, scrub

__all__ = ["client_url", "import_redis", "invalid_url"]


def import_redis(what: str = "cache backend") -> Any:
    try:
        import redis
    except ImportError:
        raise MissingDependencyError(f"The Redis {what}", "redis", "redis") from None
    return redis


def invalid_url(url: str, exc: ValueError) -> ConfigurationError:
    """The error for a URL the Redis client cannot read, its credentials masked (in the
    client's message too: a password holding ``/`` or ``#`` is read as a port)."""
    return ConfigurationError(
        f"invalid Redis URL {mask_credentials(url)!r}: {scrub(str(exc), url)}; use a form "
        "such as redis://127.0.0.1:6379/0, rediss://user:password@host:6380/0 or "
        "unix:///path/to/redis.sock (percent-encode a password's '/', '#', '?', '@' and "
        "'%': urllib.parse.quote(password, safe=''))"
    )


def client_url(client: Any) -> str:
    """A description of a user-supplied client's server, for messages (no password)."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if isinstance(kwargs, dict):
        if "path" in kwargs:
            return f"unix://{kwargs['path']}"
        host, port, db = kwargs.get("host"), kwargs.get("port"), kwargs.get("db", 0)
        if host is not None:
            return f"redis://{host}:{port}/{db}"
    return f"<{type(client).__name__} client>"
