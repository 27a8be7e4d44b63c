"""What a tool result reports: the error it met (an exit status, a line reporting an
error, a count of failures), or none for a success. Memoized by the result's length
and hash: a session's every compaction reads its results again.
"""

from __future__ import annotations

import re
from collections import deque

from ..._state import LRU, memo
from ...text.primitives import clipped
from ...text.scoring import severe

__all__ = ["failure"]


_EXIT = re.compile(
    r"<returncode>\s*(-?\d+)\s*</returncode>"
    r"|\bexit(?:ed)?(?: with)?(?: code| status)?[:= ]+(-?\d+)",
    re.IGNORECASE,
)
_TAGS = re.compile(r"</?(?:returncode|output)>")  # mini-SWE-agent's result frame
#: A line that reports an error, not prose or code that names one: an exception at the
#: line's start (``KeyError: 'rule'``, pytest's ``E   AssertionError``), a line opening
#: with error or fatal (``Error: reservation not found``), a compiler's ``x.c:3:5:
#: error:``, an upper-case ERROR, FAILED or FATAL that is no attribute (not
#: ``logging.ERROR``); else a count of failures (``1 failed, 3 passed``). Not
#: ``except KeyError as error:`` in a file's listing.
_REPORT = re.compile(
    r"^[ \t]*(?:E[ \t]+)?[A-Z]\w*(?:Error|Exception)\b(?::|$)"
    r"|^[ \t]*(?:[Ee]rror|[Ff]atal|panic)\b"
    r"|:\d+(?::\d+)?:[ \t]?(?:fatal )?error\b"
    r"|(?<![.\w])(?:ERROR|FAILED|FATAL)\b(?!\.)",
    re.MULTILINE,
)
_FAILURES = re.compile(r"\b[1-9]\d* (?:failed|errors?)\b")  # a summary's count of them
#: What each result read reported, by its length and hash (not the text itself: the
#: memo must not keep a thousand long results alive after their messages are gone).
_FAILURES_SEEN: LRU[str | None] = memo(8_192)
_ERROR_CHARS = 160  # an error line is shown up to this many characters
_TAIL_CHARS = 4_096  # a result's end, where its error most often is, read first


def failure(result: str) -> str | None:
    """The error a tool result reports, or ``None`` for a success: with an exit
    status, a non-zero one (its last line reporting an error, else naming one, else
    its last line); without, its last line reporting an error (a traceback ends on
    the exception). Memoized: a session's every compaction reads its results again."""
    return _FAILURES_SEEN.cached((len(result), hash(result)), _failure, result)


def _failure(result: str) -> str | None:
    found = _EXIT.search(result[:200]) or _EXIT.search(result[-200:])
    status = int(found.group(1) or found.group(2)) if found else None
    if status == 0:
        return None
    low = result.lower()  # every line either pattern finds holds one of these words
    reports = any(w in low for w in ("error", "exception", "fatal", "panic", "failed"))
    line = (_last_line(_REPORT, result) or _last_line(_FAILURES, result)) if reports else None
    if status is not None:
        if line is None:  # nothing reports it: a line naming one, else the last line
            lines = [x for x in map(_clean, result.splitlines()) if x]
            named = [x for x in lines if severe(x.lower())] or lines
            line = named[-1] if named else None
        line = f"exit {status}: {line}" if line else f"exit {status}"
    if line is None:
        return None
    return clipped(line, _ERROR_CHARS)


def _last_line(pattern: re.Pattern[str], text: str) -> str | None:
    """The last line of ``text`` that ``pattern`` finds something on (one scan of
    the text's last lines, then of the rest if they hold none: a match never spans
    lines), without the result's frame."""
    split = text.rfind("\n", 0, max(len(text) - _TAIL_CHARS, 0)) + 1  # a line's start
    found = deque(pattern.finditer(text, split), maxlen=1)
    if not found and split:
        found = deque(pattern.finditer(text, 0, split), maxlen=1)
    if not found:
        return None
    last = found[0]
    start = text.rfind("\n", 0, last.start()) + 1
    end = text.find("\n", last.end())
    return _clean(text[start : end if end >= 0 else len(text)]) or None


def _clean(line: str) -> str:
    """A result's line without mini-SWE-agent's frame (``<returncode>``, ``<output>``)."""
    return _TAGS.sub("", _EXIT.sub("", line)).strip()
