"""JSON read from text that anyone may have written (tool results, model arguments,
input files): parsed only up to a sane depth, so that no document can exhaust the
interpreter's recursion (``"[" * 500 + "]" * 500`` in a tool result must not stop an
agent). Deeper documents are not JSON to ctxfold: they stay text."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_DEPTH", "TooDeepError", "loads"]

#: Documents nested deeper than this are treated as text.
MAX_DEPTH = 100


class TooDeepError(ValueError):
    """The text is JSON nested deeper than :data:`MAX_DEPTH`."""


def loads(text: str | bytes) -> Any:
    """``json.loads`` that raises :class:`ValueError` (a :class:`TooDeepError`) for a
    document nested deeper than :data:`MAX_DEPTH` instead of recursing into it."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        # Parsed first: text that is no JSON (a note, prose in brackets) fails at once,
        # before a scan of its every character; the parser stops a runaway nesting
        # with a RecursionError of its own.
        value = json.loads(text)
    except RecursionError:
        raise TooDeepError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    if text.count("[") + text.count("{") > MAX_DEPTH:  # only then can it be too deep
        _check_depth(text)
    return value


def _check_depth(text: str) -> None:
    """Raise :class:`TooDeepError` if brackets outside strings nest too deep."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise TooDeepError(f"JSON nested deeper than {MAX_DEPTH} levels")
        elif ch in "]}":
            depth -= 1
