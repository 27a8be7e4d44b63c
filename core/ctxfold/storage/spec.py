"""The one reading of a storage spec, shared by caches and verbatim stores.

- ``"memory"``;
- SQLite as SQLAlchemy writes it: ``"sqlite:///relative/path.db"`` (three slashes: a
  path relative to the working directory), ``"sqlite:////abs/path.db"`` (four: an
  absolute path), ``"sqlite:///:memory:"`` (in memory); also ``"sqlite:relative.db"``
  and any path ending in ``.db``, ``.sqlite`` or ``.sqlite3``;
- a Redis URL (``redis://``, ``rediss://``, ``unix://``).

A spec that looks like one of these with its scheme misspelt (``sqlite//x.db``,
``sqlit:///x.db``, ``redis//host``, ``memory:``) is no spec: :func:`require_spec`
refuses it naming the one intended, rather than taking it for a relative path.

:func:`mask_credentials` is the one way a spec is shown (a ``repr``, an error, a log
line): its password and credential query values masked, also in a URL no parser
reads; :func:`scrub` masks them in a driver's message about the spec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from urllib.parse import unquote

from .._registry import nearest
from ..exceptions import ConfigurationError

__all__ = [
    "MASK",
    "Kind",
    "Spec",
    "intended",
    "mask_credentials",
    "parse_spec",
    "require_spec",
    "scrub",
    "sqlite_path",
]

#: What a credential is shown as.
MASK = "***"

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")

#: How each scheme's spec begins, written right (a path or address follows).
_PREFIXES = {
    "sqlite": "sqlite:///",
    "redis": "redis://",
    "rediss": "rediss://",
    "unix": "unix:///",
    "memory": "memory",
}

#: A word, then what a scheme's separator may have been mistyped as (``:``, ``:/``,
#: ``//``, ``:////``), then the rest.
_SCHEME_LIKE = re.compile(r"\A([A-Za-z][A-Za-z0-9+.-]*)(:/*|//+)(.*)", re.DOTALL)


class Kind(Enum):
    """Where a spec says entries live."""

    MEMORY = "memory"
    SQLITE = "sqlite"
    REDIS = "redis"


@dataclass(frozen=True)
class Spec:
    """A parsed spec: its kind and its target (the SQLite file, empty when the spec
    names none; the Redis URL; nothing for memory). Its ``repr`` masks credentials."""

    kind: Kind
    target: str = ""

    def __repr__(self) -> str:
        return f"Spec({self.kind}, {mask_credentials(self.target)!r})"


def parse_spec(spec: str) -> Spec | None:
    """What ``spec`` names, or ``None`` for a string of no known form, a misspelt
    scheme included (``sqlite:///x.db`` is ``x.db`` in the working directory,
    ``sqlite:////x.db`` is ``/x.db``, ``sqlite:///:memory:`` is memory)."""
    text = spec.strip()
    if intended(text) is not None:
        return None
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
    if low.endswith(_SQLITE_SUFFIXES) and "://" not in text and not _url_like(text):
        return Spec(Kind.SQLITE, text)
    return None


def intended(spec: str) -> str | None:
    """The spec ``spec`` was meant to be when its scheme looks misspelt (a scheme
    close to a known one, or a known one with a wrong separator: ``sqlite//x.db`` is
    ``sqlite:///x.db``, ``rediss:/h`` is ``rediss://h``, ``memroy`` is ``memory``);
    ``None`` for a spec of a known form or a plain path (``data/x.db``)."""
    text = spec.strip()
    if text.isalpha():  # a bare word: only "memory" is one
        word = text.lower()
        return None if word == "memory" else _PREFIXES.get(nearest(word, ["memory"]) or "")
    match = _SCHEME_LIKE.fullmatch(text)
    if match is None:
        return None
    word, sep, rest = match.group(1).lower(), match.group(2), match.group(3)
    scheme = word if word in _PREFIXES else nearest(word, _PREFIXES)
    if scheme is None or _written_right(scheme, word, sep):
        return None
    if scheme == "memory":
        return "memory"
    if scheme == "unix":  # a socket's path is absolute: unix:///run/redis.sock
        return _PREFIXES[scheme] + rest.lstrip("/")
    absolute = "/" if scheme == "sqlite" and sep.count("/") >= 4 else ""  # sqlite:////x
    return _PREFIXES[scheme] + absolute + rest


def _written_right(scheme: str, word: str, sep: str) -> bool:
    """Whether ``word`` + ``sep`` begins a spec of ``scheme`` as it is written."""
    if word != scheme:
        return False
    if scheme == "sqlite":
        return sep.startswith(":")  # sqlite:x.db, sqlite:///x.db, sqlite:////x.db
    return scheme != "memory" and sep.startswith("://")


def require_spec(spec: str, what: str, forms: str) -> Spec:
    """What ``spec`` names; a :class:`ConfigurationError` for a ``what`` spec
    (``"store"``, ``"cache"``) of no known form, naming the intended spec when the
    scheme looks misspelt, and the valid ``forms``. Credentials are masked."""
    parsed = parse_spec(spec)
    if parsed is not None:
        return parsed
    meant = intended(spec)
    hint = f" (did you mean {mask_credentials(meant)!r}?)" if meant is not None else ""
    raise ConfigurationError(f"unknown {what} spec {mask_credentials(spec)!r}{hint}; use {forms}")


def sqlite_path(spec: str) -> str | None:
    """The file a SQLite spec names (``sqlite:///x.db`` or a ``.db`` path), ``""`` for
    ``sqlite://`` with no file, ``None`` for a spec of another kind."""
    parsed = parse_spec(spec)
    return parsed.target if parsed is not None and parsed.kind is Kind.SQLITE else None


# A credential passed as a query parameter (``unix:///run/redis.sock?password=...``):
# its value runs to the next parameter, a '#' included.
_SECRET_PARAM = re.compile(
    r"(?i)(?<=[?&;])(?:password|passwd|pwd|pass|secret|token|auth|api_?key|access_?key)"
    r"=([^&;]*)"
)


def _readable_path(spec: str) -> bool:
    """Whether ``spec`` is a SQLite path (no authority, so no password): shown as is."""
    parsed = parse_spec(spec)
    if parsed is None or parsed.kind is Kind.REDIS:
        return False
    return "//" not in spec or spec.lower().startswith("sqlite:///")


def _url_like(path: str) -> bool:
    """Whether a path ending in ``.db`` is rather a misspelt URL with a password
    (``redis//u:pw@host/0.db``): no SQLite file, an unknown spec."""
    return "//" in path and _userinfo_password(path) is not None


def _password_span(spec: str) -> tuple[int, int] | None:
    """Where the password of ``spec``'s userinfo is (see :func:`_userinfo_password`);
    ``None`` for a SQLite path."""
    return None if _readable_path(spec) else _userinfo_password(spec)


def _userinfo_password(spec: str) -> tuple[int, int] | None:
    """Where a password is, read conservatively, not as a URL parser would: from after
    the first ``//`` (or the start, when no ``//`` comes before an ``@``; so a
    misspelt scheme such as ``rediss//`` is no way around) to the last ``@``, after
    the first ``:``. A password holding ``/``, ``#``, ``?``, ``@`` or ``%``, encoded
    or not, is masked whole."""
    end = spec.rfind("@")
    if end < 0:
        return None
    slashes = spec.find("//")
    start = slashes + 2 if 0 <= slashes < end else 0
    colon = spec.find(":", start, end)
    if colon < 0 or colon + 1 == end:
        return None
    return colon + 1, end


def _secret_spans(spec: str) -> list[tuple[int, int]]:
    """The spans of ``spec`` that hold a credential, in order, overlapping ones
    merged."""
    spans = sorted([m.span(1) for m in _SECRET_PARAM.finditer(spec) if m.group(1)])
    password = _password_span(spec)
    merged: list[tuple[int, int]] = []
    for a, b in sorted([*spans, password] if password else spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


def mask_credentials(spec: str) -> str:
    """``spec`` (a store or cache spec, a URL, even a malformed one) as it may be
    shown: a userinfo password and credential query values (``password=``,
    ``token=``, ...) become ``***``; SQLite paths and specs without credentials are
    unchanged. ``mask_credentials("rediss//u:p/w#x@h:6380")`` is
    ``"rediss//u:***@h:6380"``."""
    out: list[str] = []
    at = 0
    for a, b in _secret_spans(spec):
        out += [spec[at:a], MASK]
        at = b
    return "".join(out) + spec[at:]


def scrub(text: str, spec: str) -> str:
    """``text`` (a message about ``spec``, such as a driver's error) with every
    credential of ``spec`` masked: the spec itself, each credential whole (also
    percent-decoded) and each piece a parser may have cut one into at ``/#?@:``
    (short pieces only where they stand alone, not inside a word)."""
    text = text.replace(spec, mask_credentials(spec)) if spec else text
    pieces: set[str] = set()
    for a, b in _secret_spans(spec):
        for whole in {spec[a:b], unquote(spec[a:b])}:
            pieces.add(whole)
            pieces.update(p for p in re.split(r"[/#?@:&;]", whole) if p)
    for piece in sorted(pieces, key=len, reverse=True):
        alone = re.escape(piece)
        if len(piece) < 8:
            alone = rf"(?<![A-Za-z0-9]){alone}(?![A-Za-z0-9])"
        text = re.sub(alone, MASK, text)
    return text
