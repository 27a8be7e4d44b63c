"""The one reading of a storage spec, shared by caches and verbatim stores:
``"memory"``, ``"sqlite:///abs/path.db"`` / ``"sqlite:relative.db"`` / a path ending in
``.db``, ``.sqlite`` or ``.sqlite3``, or a Redis URL (``redis://``, ``rediss://``,
``unix://``)."""

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
    """What ``spec`` names, or ``None`` for a string of no known form."""
    text = spec.strip()
    low = text.lower()
    if low == "memory":
        return Spec(Kind.MEMORY)
    if low.startswith(_REDIS_SCHEMES):
        return Spec(Kind.REDIS, text)
    if low.startswith("sqlite:"):
        return Spec(
            Kind.SQLITE, text[len("sqlite://") :] if low.startswith("sqlite://") else text[7:]
        )
    if low.endswith(_SQLITE_SUFFIXES) and "://" not in text:
        return Spec(Kind.SQLITE, text)
    return None


def sqlite_path(spec: str) -> str | None:
    """The file a SQLite spec names (``sqlite:///x.db`` or a ``.db`` path), ``""`` for
    ``sqlite://`` with no file, ``None`` for a spec of another kind."""
    parsed = parse_spec(spec)
    return parsed.target if parsed is not None and parsed.kind is Kind.SQLITE else None
