"""Fenced code blocks, found in time linear in the text.

A pattern that finds an opening fence and lazily scans for its closing line scans to
the text's end for every opening that has none: quadratic in the number of unclosed
fences (20 s for 100 KB of ``"```1\\n"``). Here a line-anchored pattern finds each
fence line once, and one pass pairs each opening with its closing line, looked up in
an index of the closing lines. The blocks are the ones the lazy patterns found (the
format adapters' and the reference extractors'; see :class:`FenceSyntax`): an opening
with no closing line is not a block, and the next fence line is tried.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

__all__ = ["Fence", "FenceSyntax", "fences"]


class FenceSyntax(Enum):
    """Which lines open and close a block.

    ``COLUMN_ZERO`` (the format adapters'): a line starting with three backticks or
    tildes at column 0 opens; the first later line that is those three characters alone
    (spaces and tabs after them allowed) closes.

    ``INDENTED`` (the reference extractors'): a line of spaces and tabs, a run of three
    or more backticks or tildes and an info string opens; the first later line that is
    the same run alone (spaces and tabs around it) closes. With no such line, the run
    one shorter is tried, down to three (the info string is then empty).
    """

    COLUMN_ZERO = "column_zero"
    INDENTED = "indented"


@dataclass(frozen=True, slots=True)
class Fence:
    """A fenced block: ``text[start:end]`` is the block with its fence lines (and the
    closing line's newline, if it has one), ``text[body_start:body_end]`` its body.
    ``info`` is the word after the opening run (a language), empty when the block is
    closed by a shorter run than the opening's."""

    start: int
    body_start: int
    body_end: int
    end: int
    info: str


#: A fence line: indent, run, spaces, info word, the rest of the line. Possessive
#: throughout: nothing is tried twice, and only line starts are tried.
_FENCE_LINE = re.compile(r"^([ \t]*+)(`{3,}+|~{3,}+)[ \t]*+([\w+#.-]*+)[^\n]*+", re.M)


class _Line(NamedTuple):
    start: int
    end: int  # the end of the line's content: its newline or the text's end
    char: str
    run: int  # the fence characters at its start
    info: str
    opens: int  # the longest run it may open with (0: it opens nothing)
    closes: int  # the run it closes (0: it closes nothing)


def _lines(text: str, syntax: FenceSyntax) -> list[_Line]:
    """The text's fence lines, in order, read under ``syntax``."""
    out = []
    for m in _FENCE_LINE.finditer(text):
        indent, run, info = m.groups()
        alone = m.group().strip(" \t") == run
        if syntax is FenceSyntax.INDENTED:
            opens, closes = len(run), len(run) if alone else 0
        elif indent:  # COLUMN_ZERO: an indented line neither opens nor closes
            continue
        else:
            opens, closes = 3, 3 if alone and len(run) == 3 else 0
        if m.end() == len(text):  # an opening line needs a line after it
            opens = 0
        if opens or closes:
            out.append(_Line(m.start(), m.end(), run[0], len(run), info, opens, closes))
    return out


class _Closers:
    """The closing lines by character and run, asked for openings in line order: for
    each, the longest run it may use that still has a closing line after it. A run
    whose last closing line is passed is dropped for good, so no opening looks for a
    closing line that is not there (that search is what made the patterns quadratic).
    """

    def __init__(self, lines: Sequence[_Line]) -> None:
        self._at: dict[tuple[str, int], list[int]] = {}
        for i, line in enumerate(lines):
            if line.closes:
                self._at.setdefault((line.char, line.closes), []).append(i)
        self._runs = {c: sorted(r for d, r in self._at if d == c) for c in "`~"}
        self._last = sorted((at[-1], key) for key, at in self._at.items())
        self._passed = 0

    def after(self, i: int, line: _Line) -> tuple[int, int] | None:
        """``(closing line, run)`` for the opening ``line`` at index ``i``, or None.
        Calls must come with ``i`` never decreasing."""
        while self._passed < len(self._last) and self._last[self._passed][0] <= i:
            char, run = self._last[self._passed][1]
            self._runs[char].remove(run)
            self._passed += 1
        runs = self._runs[line.char]
        k = bisect_right(runs, line.opens)
        if not k:
            return None
        at = self._at[(line.char, runs[k - 1])]
        return at[bisect_right(at, i)], runs[k - 1]


def fences(text: str, syntax: FenceSyntax) -> list[Fence]:
    """The fenced blocks of ``text`` under ``syntax``, in order, in linear time."""
    if "```" not in text and "~~~" not in text:
        return []
    lines = _lines(text, syntax)
    closers = _Closers(lines)
    out: list[Fence] = []
    i = 0
    while i < len(lines):
        opening = lines[i]
        found = closers.after(i, opening) if opening.opens else None
        if found is None:
            i += 1
            continue
        j, run = found
        closing = lines[j]
        end = closing.end + 1 if closing.end < len(text) else closing.end
        info = opening.info if run == opening.run else ""
        out.append(Fence(opening.start, opening.end + 1, closing.start, end, info))
        i = j + 1
    return out
