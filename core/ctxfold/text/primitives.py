"""Text primitives shared by the engine: identifiers, protected spans, sentence splitting.

Everything here is pure, deterministic and regex-based (standard library only).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from itertools import accumulate, chain, compress
from operator import itemgetter
from typing import Any

from .._json import loads as json_loads
from .._state import LRU, memo
from .secrets import marked, overlaps, secret_spans
from .wordlists import word_list

__all__ = [
    "INLINE_CODE",
    "KIND_WEIGHT",
    "TokenSet",
    "clipped",
    "find_identifiers",
    "protected_spans",
    "split_lines",
    "split_sentences",
    "words",
]

_EXT = word_list("file_extensions")
_TOKEN_CHARS = r"[^\s\"'`<>()\[\]{},;|*=]"
# What an identifier has and a word lacks: one of / \ _ or a digit, a dot or colon
# followed by more of the token (one at its end is trimmed away: "end." is a word, ":"
# alone nothing), or an inner capital.
_MARK = rf"[/\\_0-9]|[.:]{_TOKEN_CHARS}|[a-z][A-Z]"
# The tokens that hold a mark. The look-behind anchors at token starts, so scanning
# stays linear.
_CANDIDATE = re.compile(rf"(?<!{_TOKEN_CHARS}){_TOKEN_CHARS}*?(?:{_MARK}){_TOKEN_CHARS}*")
# Prose mostly has no mark: one quick search spares the token scan.
_MAYBE_IDENTIFIER = re.compile(_MARK)
_GREP_CONTEXT = re.compile(r"\.([A-Za-z0-9]{1,8})(?:-|:(?![\d:]))")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?")
_INNER_CAP = re.compile(r"[a-z0-9][A-Z]")
_CLOCK = re.compile(r"[\d:.+-]+[APap]?[Mm]?")
_ID = re.compile(r"[A-Za-z0-9][\w-]*[A-Za-z0-9]")
_LETTER = re.compile(r"[^\W\d_]")
_TWO_LETTERS = re.compile(r"[^\W\d_].*[^\W\d_]")
_DIGIT = re.compile(r"\d")
_SLASHES = re.compile(r"[/\\]")
_LEAD = "#=+@!?:.,-~^$%&\\"
_TRAIL = ".,:;!?-=~^$%&\\"


_KINDS: LRU[str | None] = memo(32_768)  # the same tokens recur: numbers, paths, ids


def _classify(tok: str) -> str | None:
    """The identifier kind of a whitespace-free token, or None for a plain word."""
    return _KINDS.cached(tok, _kind, tok)


def _kind(tok: str) -> str | None:
    if "://" in tok:
        return "url" if tok.split("://", 1)[0].isalpha() and len(tok) > 10 else None
    if "/" in tok or "\\" in tok:
        if not _LETTER.search(tok):
            return None
        parts = [p for p in _SLASHES.split(tok) if p]
        last = parts[-1].split(":")[0]
        has_ext = "." in last and last.rsplit(".", 1)[1].lower() in _EXT
        rooted = tok[0] in "/\\~." or tok[:2] == "_/" or (len(tok) > 2 and tok[1] == ":")
        if has_ext or rooted or len(parts) >= 3:
            return "path"
        return None
    if _DATE.fullmatch(tok):
        return "date"
    if not _LETTER.search(tok):
        return None
    if "." in tok:
        base = tok.split(":")[0]
        if base.rsplit(".", 1)[-1].lower() in _EXT and base[0] != ".":
            return "path"
        parts = base.split(".")
        if (
            len(parts) >= 2
            and all(parts)
            and max(len(x) for x in parts) >= 3
            and all((x[0].isalpha() or x[0] == "_") for x in parts)
        ):
            return "dotted"
        return None
    if _DIGIT.search(tok):
        # letters and digits: an id (HAT039, sha 3f2a9c1), not a number with a unit (60s)
        if _ID.fullmatch(tok) and _TWO_LETTERS.search(tok):
            return "id"
        return None
    if "_" in tok.strip("_"):
        return "snake"
    if tok.startswith("__") and tok.endswith("__") and len(tok) > 4:
        return "snake"
    if _INNER_CAP.search(tok) and not tok.isupper():
        return "camel"
    return None


_DELIMITERS = re.compile(r"[\s\"'`<>()\[\]{},;|*=]+")
_EDGES = ".,:;!?-~^$%&#+@"


class TokenSet:
    """Which values a text shows, as whole tokens: a set lookup instead of a substring
    scan per value (for lists of many identifiers against long text).

    ``value in ts`` is true when ``value`` is a token of the text (split at whitespace,
    quotes and brackets), with or without leading and trailing punctuation or a
    ``:line`` suffix; a value that holds a delimiter itself is looked up as a substring
    (the empty value is in no text). Each line's tokens are found once per process: a
    compaction asks again of the messages kept verbatim and the note's lines the last
    one asked of.
    """

    __slots__ = ("_text", "_tokens")

    def __init__(self, text: str) -> None:
        self._text = text
        lines = text.split("\n")  # a line break is a delimiter: no token spans two lines
        tokens: set[str] = set()
        if max(map(len, lines)) > _LONG_LINE:  # a long line's tokens: found, not kept
            tokens.update(*(_tokens_of(line) for line in lines if len(line) > _LONG_LINE))
            lines = [line for line in lines if len(line) <= _LONG_LINE]
        self._tokens = tokens.union(*_LINE_TOKENS.map(lines, _tokens_of_lines))

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        if value in self._tokens:
            return True
        return _DELIMITERS.search(value) is not None and value in self._text


#: The tokens of a line of a :class:`TokenSet`'s text, each once (a tuple of strings:
#: the collector stops tracking it), for lines of at most ``_LONG_LINE`` characters
#: (so the memo keeps at most 16 MB of lines alive, whatever the texts).
_LINE_TOKENS: LRU[tuple[str, ...]] = memo(16_384)
_LONG_LINE = 1_000


def _tokens_of_lines(lines: list[str]) -> list[tuple[str, ...]]:
    return [_tokens_of(line) for line in lines]


def _tokens_of(line: str) -> tuple[str, ...]:
    tokens = set(_DELIMITERS.split(line))
    tokens |= {t.strip(_EDGES) for t in tokens}
    tokens |= {t.split(":", 1)[0] for t in tokens if ":" in t and "://" not in t}
    tokens.discard("")
    return tuple(tokens)


#: How much an identifier of each kind is worth keeping findable (a path or URL most).
KIND_WEIGHT: dict[str, float] = {
    "path": 3.0,
    "url": 3.0,
    "id": 2.5,
    "value": 2.0,
    "code": 2.0,
    "date": 2.0,
    "dotted": 1.5,
    "snake": 1.2,
    "camel": 1.2,
}

INLINE_CODE = re.compile(r"`([^`\n]{2,80})`")
# A command line: a word, then arguments (starting only where a word starts: linear).
_COMMAND = re.compile(r"(?<![\w.-])[A-Za-z][\w.-]*+ \S")
_MATHS = re.compile(r"[≈≤≥]| [=<>*+/-]=? ")  # maths, not a command


def find_identifiers(text: str) -> Iterator[tuple[str, str, int, int]]:
    """Yield ``(kind, value, start, end)`` for each identifier-like token in ``text``.

    Kinds: ``url``, ``path`` (Unix, Windows, relative, bare file names, with
    ``:line``), ``date``, ``dotted`` (``module.func``), ``id`` (letters and digits, such
    as ``HAT039`` or ``credit_card_4421486``), ``snake`` and ``camel`` names. Tokens
    never hold whitespace; surrounding punctuation is trimmed. Inline code in
    backticks (a command such as `pip install -e .`) is kind ``code``. A token that
    overlaps a credential-shaped value (:func:`.secrets.secret_spans`) is none.
    """
    code, maybe = "`" in text, _MAYBE_IDENTIFIER.search(text)
    if not code and not maybe:
        return  # prose: no token could classify, and no code is quoted
    words = text.split()
    facts = _WORDS.map(words, _scan_words)
    # credentials are never identifiers; a text none of whose words holds a marker
    # holds none (see ``_Word``)
    secrets = secret_spans(text) if any(map(_MARKED, facts)) else ()
    if code:
        for m in INLINE_CODE.finditer(text):
            inline = m.group(1).strip()
            hides = bool(secrets) and overlaps(secrets, m.start(1), m.end(1))
            if _COMMAND.match(inline) and not _MATHS.search(inline) and not hides:
                yield "code", inline, m.start(1), m.end(1)
    if maybe:
        tokens = _placed(text, words, facts)
        if not secrets:
            yield from tokens
            return
        for found in tokens:
            if not overlaps(secrets, found[2], found[3]):
                yield found


def _placed(text: str, words: list[str], facts: list[_Word]) -> Iterator[tuple[str, str, int, int]]:
    """The identifiers of ``text``, whose ``words`` (``text.split()``) hold ``facts``.

    No token holds whitespace, so each whitespace-separated word's identifiers are its
    own, found once per process (the words of a history recur: paths, names, ids) and
    placed at each of the word's places: a text's words are looked up in bulk, and only
    those holding identifiers are walked."""
    ids = list(map(_IDENTIFIERS, facts))
    at = 0
    for word, found in compress(zip(words, ids, strict=True), ids):
        at = _place(text, word, at)
        if len(found) == 4:  # most words hold one
            kind, value, start, end = found
            yield kind, value, at + start, at + end
        else:
            flat = iter(found)
            for kind, value, start, end in zip(flat, flat, flat, flat, strict=True):
                yield kind, value, at + start, at + end
        at += len(word)


#: What one whitespace-separated word holds, found once per process: its identifiers
#: (``kind, value, start, end`` one after another, offsets within the word; most words
#: hold none), and whether it holds part of a credential's marker
#: (:func:`.secrets.marked`: a text none of whose words does holds no credential). A
#: plain tuple two deep, read by ``_IDENTIFIERS`` and ``_MARKED``: the collections of
#: the young generations stop tracking it, so a memo of them is not walked in every
#: full collection.
_Word = tuple[tuple[str | int, ...], bool]
_PLAIN: _Word = ((), False)  # most words: one shared record
_IDENTIFIERS, _MARKED = itemgetter(0), itemgetter(1)
_WORDS: LRU[_Word] = memo(1 << 16)


def _place(text: str, word: str, at: int) -> int:
    """Where ``word`` stands in ``text`` as a whole whitespace-separated word, at or
    after ``at`` (the first such place: the words before it were placed already)."""
    end = len(text)
    while True:
        start = text.index(word, at)
        stop = start + len(word)
        if (start == 0 or text[start - 1].isspace()) and (stop == end or text[stop].isspace()):
            return start
        at = start + 1


def _scan_words(words: list[str]) -> list[_Word]:
    """What each word holds, in one scan of the words joined by newlines."""
    starts = [0, *accumulate(len(w) + 1 for w in words)]
    out: list[list[tuple[str, str, int, int]]] = [[] for _ in words]
    for kind, value, start, end in _scan("\n".join(words)):
        k = bisect_right(starts, start) - 1
        out[k].append((kind, value, start - starts[k], end - starts[k]))
    return [
        (tuple(chain.from_iterable(ids)), mark) if ids or mark else _PLAIN
        for ids, mark in zip(out, marked(words), strict=True)
    ]


def _scan(text: str) -> Iterator[tuple[str, str, int, int]]:
    """Every token of ``text`` that classifies, found by the candidate pattern."""
    for m in _CANDIDATE.finditer(text):
        tok = m.group()
        if tok.isdigit():
            continue  # a number
        if "/" not in tok and "\\" not in tok:  # the common case, decided fast:
            word = tok.lstrip(_LEAD).rstrip(_TRAIL)  # a word with its punctuation
            if word.isalpha() and (
                len(word) < 3 or word.islower() or word[1:].islower() or word.isupper()
            ):
                continue
        start, end = m.start(), m.end()
        if start and text[start - 1] == "<":
            continue  # a closing tag such as </output>
        while tok and tok[0] in _LEAD and not tok.startswith(("./", "../", "~/", "\\\\")):
            if tok[0] in "~." and len(tok) > 1 and tok[1] in "/\\":
                break
            tok = tok[1:]
            start += 1
        while tok and tok[-1] in _TRAIL:
            tok = tok[:-1]
            end -= 1
        if len(tok) < 3 or (tok.isalpha() and (tok.islower() or tok[1:].islower())):
            continue  # too short, or a word at the end of a sentence
        if ("-" in tok or ":" in tok) and "://" not in tok:  # grep: src/a.py-12-x, a.py:class
            ctx = _GREP_CONTEXT.search(tok)
            if ctx is not None and ctx.group(1).lower() in _EXT:
                end -= len(tok) - ctx.end(1)
                tok = tok[: ctx.end(1)]
        kind = _classify(tok)
        if kind is not None:
            yield kind, tok, start, end


def _strings(text: str) -> list[tuple[str, str]] | None:
    """The string values of a JSON document in document order, each with the key it
    sits under (a list's items under the list's key; ``""`` at the top), or None if
    ``text`` is not JSON."""
    try:
        data = json_loads(text)
    except ValueError:
        return None
    out: list[tuple[str, str]] = []
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        key, item = stack.pop()
        if isinstance(item, dict):
            stack.extend(reversed([(str(k), v) for k, v in item.items()]))
        elif isinstance(item, list):
            stack.extend(reversed([(key, v) for v in item]))
        elif isinstance(item, str):
            out.append((key, item))
    return out


def json_strings(text: str) -> str:
    """The string values of a JSON document joined by newlines (escapes decoded), or
    ``text`` itself when it is not JSON: what tool arguments say, for scanning."""
    values = _strings(text)
    return text if values is None else "\n".join(v for _, v in values)


def json_values(text: str, *, names: bool = False) -> list[tuple[str, str]]:
    """Short code-like string values of a JSON document (``"PUNERT"``, ``"one_way"``):
    in tool arguments and results these are ids even without digits. A single word
    counts when its key says it is a name (``"first_name": "Omar"``), or everywhere
    with ``names`` (tool-call arguments: what the agent acted on: ``"Kevin"``,
    ``"economy"``). ``(kind, value)`` pairs of kind ``value``; empty if ``text`` is not
    JSON."""
    return [
        ("value", item)
        for key, item in _strings(text) or ()
        if 3 <= len(item) <= 40
        and item.split() == [item]
        and (names or not (item.isalpha() and not item.isupper()) or _NAME_KEY.search(key))
        and _LETTER.search(item)
        and not _CLOCK.fullmatch(item)
    ]


_NAME_KEY = re.compile(r"(?i)names?\Z")  # name, first_name, lastName, usernames, ...
_QUOTED = re.compile(r"\"[^\"\n]{1,200}\"|`[^`\n]{1,200}`|'[^'\n]{2,200}'(?!\w)")


def protected_spans(text: str) -> list[tuple[int, int]]:
    """Sorted, merged ``(start, end)`` spans of short quoted strings.

    Identifiers, paths, URLs and numbers hold no whitespace, so no sentence boundary
    (end punctuation followed by whitespace) can fall inside them; quoted strings can
    hold sentences and are protected here.
    """
    spans = [m.span() for m in _QUOTED.finditer(text)]
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        if merged and s < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    return merged


_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences whose concatenation is exactly ``text``.

    A boundary is end punctuation followed by whitespace, or a line break; a boundary
    inside a protected span (a path such as ``src/auth/middleware.ts``, a URL, a number,
    a quoted string) is ignored, so no identifier is ever cut.
    """
    spans = protected_spans(text)
    starts = [s for s, _ in spans]
    out: list[str] = []
    last = 0
    for m in _BOUNDARY.finditer(text):
        pos = m.start()
        k = bisect_right(starts, pos) - 1
        if k >= 0 and spans[k][0] < pos < spans[k][1]:
            continue
        if m.end() > last:
            out.append(text[last : m.end()])
            last = m.end()
    if last < len(text):
        out.append(text[last:])
    return out


def split_lines(text: str) -> list[str]:
    """Split into lines that keep their line breaks (concatenation gives ``text``)."""
    return text.splitlines(keepends=True)


_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|\d+")


def words(text: str) -> list[str]:
    """Lower-cased words and numbers, for scoring."""
    return [w.lower() for w in _WORD.findall(text)]


def clipped(text: str, limit: int) -> str:
    """``text`` when it has at most ``limit`` characters, else its first ones and
    ``...``, ``limit`` in all: a command, a step or an error line as a note shows it."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
