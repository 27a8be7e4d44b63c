"""Exceptions raised by ctxfold.

Every error ctxfold raises derives from :class:`CtxfoldError`, and each also derives
from the built-in that callers already catch, so ``except ValueError`` keeps working::

    CtxfoldError (Exception)
    ├── ConfigurationError (ValueError)    a setting or option is invalid
    ├── InvalidMessageError (ValueError)   a message cannot be read or converted
    ├── InvalidTurnError (ValueError)      an agent turn cannot be read
    ├── BudgetError (ValueError)           the content that must be kept cannot fit
    ├── MissingDependencyError (ImportError)  an optional extra is not installed
    ├── CacheError (RuntimeError)          a cache backend cannot be reached or used
    ├── CacheEntryError (TypeError)        a cache key or value has the wrong type
    ├── ExpandError (LookupError)          an id the verbatim store does not hold
    │   └── CorruptRecordError             a stored record does not match its id
    ├── ConcurrentWriteError (RuntimeError)  another writer wrote the session first
    └── SummarizerError (RuntimeError)     the summarizer failed or returned no text

Messages say what went wrong and what to do about it.
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "CacheEntryError",
    "CacheError",
    "ConcurrentWriteError",
    "ConfigurationError",
    "CorruptRecordError",
    "CtxfoldError",
    "ExpandError",
    "InvalidMessageError",
    "InvalidTurnError",
    "MissingDependencyError",
    "SessionNotFoundError",
    "SummarizerError",
]


class CtxfoldError(Exception):
    """Base class of every error ctxfold raises."""


class ConfigurationError(CtxfoldError, ValueError):
    """A strategy, counter or option is invalid; the message names the accepted values."""


class InvalidMessageError(CtxfoldError, ValueError):
    """A message is malformed; ``index`` is its position in the input, when known."""

    def __init__(self, reason: str, *, index: int | None = None) -> None:
        self.reason = reason
        self.index = index
        where = f"message {index}: " if index is not None else ""
        super().__init__(where + reason)


class InvalidTurnError(CtxfoldError, ValueError):
    """A turn (or one of its tool calls) is malformed; ``index`` is the turn's position,
    when known."""

    def __init__(self, reason: str, *, index: int | None = None) -> None:
        self.reason = reason
        self.index = index
        where = f"turn {index}: " if index is not None else ""
        super().__init__(where + reason)


class BudgetError(CtxfoldError, ValueError):
    """The content a strategy must keep needs more tokens than the budget allows.

    ``required`` is the smallest token count the strategy could reach, ``budget`` the
    budget it was given. Nothing is lost: the input is untouched.
    """

    def __init__(self, message: str, *, required: int, budget: int) -> None:
        self.required = required
        self.budget = budget
        super().__init__(message)


class MissingDependencyError(CtxfoldError, ImportError):
    """An optional part needs an extra that is not installed; the message names it."""

    def __init__(self, feature: str, module: str, extra: str) -> None:
        self.feature = feature
        self.extra = extra
        super().__init__(
            f"{feature} needs the '{module}' package, which is not installed; "
            f"run: pip install 'ctxfold[{extra}]'",
            name=module,
        )


class CacheError(CtxfoldError, RuntimeError):
    """A cache backend failed at run time: its server cannot be reached, its file
    cannot be written, or it was used after ``close()``. The message says what to do."""


class CacheEntryError(CtxfoldError, TypeError):
    """A cache key is not ``str`` or a value not ``bytes``; the message says how to
    convert it."""


class ExpandError(CtxfoldError, LookupError):
    """An ``[expand <id>]`` id the verbatim store does not hold (another store, or an
    entry that was never written); the message names the ids."""


class CorruptRecordError(ExpandError):
    """A record in the verbatim store is not what was written under its id (altered,
    truncated, or not JSON): nothing is given back as if it were the original. ``ids``
    names the records."""

    def __init__(self, message: str, *, ids: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.ids = ids


class ConcurrentWriteError(CtxfoldError, RuntimeError):
    """A session's write found its place in the store taken: another writer (a second
    :class:`ctxfold.Session` on the same id, in this process or another) wrote there
    since this one read the session. Nothing of this write was stored and the session
    in memory is unchanged; ``Session.load`` (or a new ``Session`` on the same id)
    reads what is there, then add again."""


class SessionNotFoundError(CtxfoldError, LookupError):
    """``Session.load`` was given an id its store holds nothing under (another store,
    or a session never written); ``Session(session_id, store=...)`` starts one."""


class SummarizerError(CtxfoldError, RuntimeError):
    """The summarizer raised or returned no text. Nothing was summarized: the input is
    unchanged and no error text is ever written as a summary."""
