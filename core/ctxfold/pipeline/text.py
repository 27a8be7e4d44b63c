"""A render as text within a token count: what ``condense`` and a session's
:meth:`~ctxfold.Session.text` give a framework that wants a string, not messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..tokens import TokenCounter

__all__ = ["Fitted", "fit_text"]

#: Renders tried: a transcript counts apart from the messages it writes (no message
#: framing, a speaker tag on each line), so the first room may miss by a little.
TRIES = 3


class Fitted(NamedTuple):
    """The last text written, and whether it is within the count asked."""

    text: str
    fits: bool


def fit_text(write: Callable[[int], str], max_tokens: int, counter: TokenCounter) -> Fitted:
    """``write(room)``, a render into ``room`` tokens written as text, at ``max_tokens``
    first, then at a room smaller by what the text it gave measured over, until the
    text counts within ``max_tokens`` (at most :data:`TRIES` renders)."""
    room = max_tokens
    text = ""
    for _ in range(TRIES):
        text = write(room)
        over = counter.count_text(text) - max_tokens
        if over <= 0:
            return Fitted(text, True)
        room -= over
        if room < 1:  # the framing alone passes max_tokens: no room to try
            break
    return Fitted(text, False)
