"""JSON read from text that anyone may have written (tool results, model arguments,
input files): parsed only up to a sane depth, so that no document can exhaust the
interpreter's recursion (``"[" * 500 + "]" * 500`` in a tool result must not stop an
agent), nor hold a number Python refuses to convert (an integer of more than
``sys.get_int_max_str_digits()`` digits, 4,300 by default). Such documents are not JSON
to ctxfold: they stay text, and an input file holding one is refused as bad input."""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["MAX_DEPTH", "JSONLimitError", "TooDeepError", "TooLongNumberError", "loads"]

#: Documents nested deeper than this are treated as text.
MAX_DEPTH = 100


class JSONLimitError(ValueError):
    """The text is JSON, but past a limit ctxfold reads (its message says which)."""


class TooDeepError(JSONLimitError):
    """The text is JSON nested deeper than :data:`MAX_DEPTH`."""


class TooLongNumberError(JSONLimitError):
    """The text is JSON holding an integer of more digits than Python converts."""


def loads(text: str | bytes) -> Any:
    """``json.loads`` that raises :class:`ValueError` (a :class:`JSONLimitError`) for a
    document nested deeper than :data:`MAX_DEPTH` instead of recursing into it
    (:class:`TooDeepError`), or holding an integer too long for Python
    (:class:`TooLongNumberError`, where ``json.loads`` raises a bare ``ValueError``
    that is no ``JSONDecodeError``)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        # Parsed first: text that is no JSON (a note, prose in brackets) fails at once,
        # before a scan of its every character; the parser stops a runaway nesting
        # with a RecursionError of its own.
        value = json.loads(text)
    except RecursionError:
        raise TooDeepError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # int(): past sys.get_int_max_str_digits()
        raise TooLongNumberError(
            f"JSON with an integer of more than {sys.get_int_max_str_digits()} digits "
            "(Python's limit: write such a number as a string)"
        ) from None
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
