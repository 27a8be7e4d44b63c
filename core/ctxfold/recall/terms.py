"""The words retrieval matches on: the engine's own tokenization of a text into terms
(lower-cased words and numbers, identifiers whole and in parts, stop words out, a light
stemming), the same for a question and for the history, so that they meet."""

from __future__ import annotations

import re
from itertools import filterfalse
from string import ascii_lowercase

from .._state import LRU, memo
from ..text.primitives import find_identifiers
from ..text.wordlists import word_list

__all__ = ["stem", "terms"]

_STOP = word_list("stop_words")
_WORD = re.compile(r"[a-z]+|\d+(?:[.,:]\d+)*")
# Identifier kinds whose value is worth matching whole (a path, a function name): its
# parts are matched as words too.
_WHOLE = frozenset({"path", "url", "dotted", "id", "snake", "camel", "code"})
_TERMS: LRU[tuple[str, ...]] = memo(20_000)
# What a text's terms leave out: stop words and single letters (a single digit stays).
_DROPPED = _STOP.union(ascii_lowercase)


_STEMS: LRU[str] = memo(65_536)  # a history says the same words again and again


def stem(word: str) -> str:
    """A light English stemmer: enough that "paints", "painted" and "painting" meet,
    never so much that two different words do often."""
    return _STEMS.cached(word, _stem, word)


def _stem(word: str) -> str:
    n = len(word)
    if n > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if n > 5 and word.endswith("ing"):
        return word[:-3]
    if n > 4 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    if n > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _stems(words: list[str]) -> list[str]:
    return list(map(_stem, words))


def terms(text: str) -> tuple[str, ...]:
    """The terms of ``text``, in order, repeats kept (memoized by text): each word
    and number (lower-cased, stop words out, stemmed), and each identifier whole
    (``auth/middleware.ts``, ``HAT039``) besides its parts."""
    return _TERMS.cached(text, _terms, text)


def _terms(text: str) -> tuple[str, ...]:
    words = list(filterfalse(_DROPPED.__contains__, _WORD.findall(text.lower())))
    out = _STEMS.map(words, _stems)  # looked up at once: most were stemmed before
    out += [value.lower() for kind, value, _, _ in find_identifiers(text) if kind in _WHOLE]
    return tuple(out)
