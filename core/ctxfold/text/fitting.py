"""Text within a token count: the one search every writer that misses its room uses
(a render written as text for ``condense`` and :meth:`ctxfold.Session.text`, a summary
shortened to its allowance, a tool output cut to its share)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..tokens import TokenCounter

__all__ = ["TextFit", "fit_text"]

#: Writes tried by default: a writer's text scales with its room, so the second is
#: nearly always within the count (a render as a transcript misses by its framing).
TRIES = 3


_MARGIN = 0.95  # a room scaled by the ratio measured is made a little smaller still


class TextFit(NamedTuple):
    """The last text written, and whether it is within the count asked."""

    text: str
    fits: bool


def fit_text(
    write: Callable[[int], str], max_tokens: int, counter: TokenCounter, *, tries: int = TRIES
) -> TextFit:
    """``write(room)``, a text written for ``room`` tokens, at ``max_tokens`` first,
    then at a room scaled down by how far the last text measured over (a text's length
    follows its room) and a little more, at least a token smaller, until the text
    counts within ``max_tokens`` (at most ``tries`` writes)."""
    room = max_tokens
    text = ""
    for _ in range(tries):
        text = write(room)
        n = counter.count_text(text)
        if n <= max_tokens:
            return TextFit(text, True)
        room = min(room - 1, int(room * max_tokens / n * _MARGIN))
        if room < 1:  # the framing alone passes max_tokens: no room to try
            break
    return TextFit(text, False)
