"""The one reading of a storage spec, shared by caches and verbatim stores.

- ``"memory"``;
- SQLite as SQLAlchemy writes it: ``"sqlite:///relative/path.db"`` (three slashes: a
  path relative to the working directory), ``"sqlite:////abs/path.db"`` (four: an
  absolute path), ``"sqlite:///:memory:"`` (in memory); also ``"sqlite:relative.db"``
  and any path ending in ``.db``, ``.sqlite`` or ``.sqlite3``;
- a Redis URL (``redis://``, ``rediss://``, ``unix://``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["Kind", "Spec", "parse_spec", "sqlite_path"]

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


class Kind(Enum):
    """Where a spec says entries live."""

    MEMORY = "memory"
    SQLITE = "sqlite"
    REDIS = "redis"


@dataclass(frozen=True)
class Spec:
    """A parsed spec: its kind and its target (the SQLite file, empty when the spec
    names none; the Redis URL; nothing for memory)."""

    kind: Kind
    target: str = ""


def parse_spec(spec: str) -> Spec | None:
    """What ``spec`` names, or ``None`` for a string of no known form
    (``sqlite:///x.db`` is ``x.db`` in the working directory, ``sqlite:////x.db`` is
    ``/x.db``, ``sqlite:///:memory:`` is memory)."""
    text = spec.strip()
    low = text.lower()
    if low == "memory":
        return Spec(Kind.MEMORY)
    if low.startswith(_REDIS_SCHEMES):
        return Spec(Kind.REDIS, text)
    if low.startswith("sqlite:"):
        path = text[len("sqlite:") :]
        if path.startswith("//"):  # sqlite://<host>/<path>: no host, then the path
            path = path[2:]
            path = path[1:] if path.startswith("/") else path
        if path == ":memory:":
            return Spec(Kind.MEMORY)
        return Spec(Kind.SQLITE, path)
    if low.endswith(_SQLITE_SUFFIXES) and "://" not in text:
        return Spec(Kind.SQLITE, text)
    return None


def sqlite_path(spec: str) -> str | None:
    """The file a SQLite spec names (``sqlite:///x.db`` or a ``.db`` path), ``""`` for
    ``sqlite://`` with no file, ``None`` for a spec of another kind."""
    parsed = parse_spec(spec)
    return parsed.target if parsed is not None and parsed.kind is Kind.SQLITE else None
