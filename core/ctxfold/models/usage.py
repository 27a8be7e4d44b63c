"""What a compression cost beyond tokens: summarizer and embedder calls, cache hits.

Each :meth:`BaseCompressor.compress` opens a run; the summarizer and embedder wrappers
record into the innermost open run (a context variable, so threads and asyncio tasks
each see their own), and a nested run (a step of a chain) adds its counts to its parent
when it closes. The counts end up in ``CompressionStats.usage``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["record", "run_usage"]

_current: ContextVar[Counter[str] | None] = ContextVar("ctxfold_usage", default=None)


def record(key: str, amount: int = 1) -> None:
    """Add ``amount`` to ``key`` in the current run (a no-op outside a run)."""
    usage = _current.get()
    if usage is not None and amount:
        usage[key] += amount


@contextmanager
def run_usage() -> Iterator[Counter[str]]:
    """Open a run; yields its counter, which is added to the enclosing run on exit."""
    parent = _current.get()
    usage: Counter[str] = Counter()
    token = _current.set(usage)
    try:
        yield usage
    finally:
        _current.reset(token)
        if parent is not None:
            parent.update(usage)
