"""The time context of a message: when it was said, as the conversation shows it (a
date or session header at the head of a message, ``[1:56 pm on 8 May, 2023]``) or as
its metadata records it (``timestamp``, ``created_at``, ``date``). A message without
one is dated by the newest one before it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from ..messages import Message

__all__ = ["metadata_stamp", "split_stamp", "stamp_of"]

# A bracketed head of 4 to 48 characters that holds a date or a time of day.
# Starts only where a run of whitespace starts (``match`` at 0 is unchanged): linear.
_HEAD = re.compile(r"(?<!\s)\s*+\[([^\[\]\n]{4,48})\]")
_MONTH = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|"
    r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}|\d{1,2}/\d{1,2}/\d{2,4}",
    re.IGNORECASE,
)
_KEYS = ("timestamp", "created_at", "date", "time")


def stamp_of(m: Message) -> str | None:
    """When ``m`` was said, if it says: its leading date header, else a time in its
    metadata (a string as written, a number as seconds since the epoch, in UTC)."""
    return split_stamp(m.text)[0] or metadata_stamp(m.metadata)


def split_stamp(text: str) -> tuple[str | None, str]:
    """The date header ``text`` opens with (``1:56 pm on 8 May, 2023``), if any, and
    the text after it."""
    head = _HEAD.match(text)
    if head and _MONTH.search(head.group(1)) and any(c.isdigit() for c in head.group(1)):
        return head.group(1).strip(), text[head.end() :].lstrip()
    return None, text


def metadata_stamp(meta: Mapping[str, Any]) -> str | None:
    """The time a message's metadata records (``timestamp``, ``created_at``, ``date``,
    ``time``), as :func:`stamp_of` gives it."""
    if not meta:
        return None  # most messages: nothing to look up
    for key in _KEYS:
        value = meta.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, str) and value.strip():
            return value.strip()[:48]
        if isinstance(value, (int, float)):
            try:
                when = datetime.fromtimestamp(float(value), tz=timezone.utc)
            except (OverflowError, OSError, ValueError):
                continue
            return when.strftime("%Y-%m-%d %H:%M UTC")
        if isinstance(value, datetime):
            return value.isoformat(sep=" ", timespec="minutes")
    return None
