"""Encoding layers: small text transforms, each on or off, each reporting its savings.

- ``dedup``: an older copy of content that appears again later becomes a pointer.
- ``whitespace``: trailing spaces, runs of blank lines and (in prose) runs of spaces;
  indentation and anything inside JSON strings are never touched.
- ``json``: JSON documents and tool-call arguments are minified (same value).
- ``truncate``: a very long tool result keeps its head, its tail and, between them, the
  lines that stand out (errors, lines unlike the rest), with a marker saying how many
  lines like the others were cut.
- ``codebook`` / ``path_aliases``: frequent phrases and path prefixes replaced by short
  codes (``§`` plus two characters), with a header listing the codes used;
  :func:`decode` gives back exactly the input.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from .._json import loads as json_loads
from ..exceptions import ConfigurationError, CtxfoldError
from .adapters import ERROR_LINE, EXCEPTION, LOCATION
from .primitives import find_identifiers

__all__ = [
    "STATIC_CODEBOOK",
    "Codebook",
    "Layers",
    "decode",
    "distinctness",
    "minify_json",
    "normalize_whitespace",
    "truncate_observation",
]


@dataclass(frozen=True)
class Layers:
    """Which encoding layers run on older messages (the recent window stays verbatim)."""

    dedup: bool = True
    whitespace: bool = True
    json: bool = True
    truncate: bool = True
    truncate_lines: int = 150
    truncate_head: int = 40
    truncate_tail: int = 25
    codebook: bool = False
    static_codebook: bool = False
    path_aliases: bool = False

    def cut(self, text: str, named: re.Pattern[str] | None = None) -> str | None:
        """What the ``truncate`` layer leaves of a tool result's ``text`` (see
        :func:`truncate_observation`); ``None`` when the layer is off or leaves it be."""
        if not self.truncate:
            return None
        return truncate_observation(
            text,
            max_lines=self.truncate_lines,
            head=self.truncate_head,
            tail=self.truncate_tail,
            named=named,
        )

    def __post_init__(self) -> None:
        for name in ("truncate_lines", "truncate_head", "truncate_tail"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"Layers.{name} must be an integer >= 1")
        if self.truncate_head + self.truncate_tail >= self.truncate_lines:
            raise ConfigurationError(
                "Layers.truncate_head + truncate_tail must be less than truncate_lines"
            )


# ----------------------------------------------------------------------- whitespace

_TRAILING = re.compile(r"(?<![ \t])[ \t]+$", re.M)  # starts only where a run starts: linear
_BLANKS = re.compile(r"\n{3,}")
_INNER = re.compile(r"(?<=\S)[ \t]{2,}(?=\S)")


def normalize_whitespace(text: str, *, prose: bool) -> str:
    """Strip trailing spaces and collapse 3+ newlines to 2; in prose (not code, not
    YAML, not JSON) also collapse runs of inner spaces. Indentation is never changed."""
    if not maybe_whitespace(text):
        return text
    out = _BLANKS.sub("\n\n", _TRAILING.sub("", text))
    if prose:
        out = _INNER.sub(" ", out)
    return out


def maybe_whitespace(text: str) -> bool:
    return (
        "  " in text
        or "\t" in text
        or " \n" in text
        or "\n\n\n" in text
        or (text[-1:] in (" ", "\t"))
    )


_CODE_LINE = re.compile(r"^[ \t]*(?:def |class |import |from \S+ import |if .*:$|for .*:$)", re.M)
_YAML_LINE = re.compile(r"^[ \t]*[\w.-]+:[ \t]*$|^[ \t]*- \w", re.M)


def looks_indentation_sensitive(text: str) -> bool:
    """Heuristic: Python, YAML, Makefiles and other text where spacing carries meaning."""
    return bool(_CODE_LINE.search(text) or _YAML_LINE.search(text) or "\t" in text or "```" in text)


# ------------------------------------------------------------------------- json


def minify_json(text: str, *, spaced: bool = False) -> str | None:
    """The same JSON value with no insignificant whitespace (``spaced``: in the form
    chat clients write tool-call arguments, ``json.dumps``'s default, a space after
    each ``,`` and ``:``), or ``None`` if ``text`` is not a JSON object or array or
    that form is no shorter."""
    s = text.strip()
    if len(s) < 2 or s[0] not in "[{":
        return None
    try:
        value = json_loads(s)
    except ValueError:
        return None
    out = json.dumps(value, ensure_ascii=False, separators=(", ", ": ") if spaced else (",", ":"))
    return out if len(out) < len(text) else None


# --------------------------------------------------------------------- truncation


#: A plain word: three letters or more, standing alone (not part of ``abc123``, ``a_b``).
_PLAIN = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z]{3,}(?![A-Za-z0-9_])")
_NUMBERS = re.compile(r"\d+")
#: A line with this many words few other lines have is distinctive.
_DISTINCT_WORDS = 2
#: A word at most one line in this many has (and at most two lines) is rare.
_RARE_IN = 50
#: What a line like most others is worth, against a distinctive one.
REPEATED_LINE = 0.3


def distinctness(segments: Sequence[str]) -> list[float]:
    """How much each of many ``segments`` (the lines of one message) is worth for being
    unlike the rest: 1 for a line with at least two plain words (letters only: no
    number, id or name with digits or underscores, which every line of a log varies)
    that at most one line in fifty has, ``REPEATED_LINE`` for a line all of whose plain
    words many others have (the thousand INFO lines around one ERROR), in between for
    one such word. A line with no plain word (``  |  ^~~~``) is repeated when many
    others read the same but for their numbers. The error, the failing test and the
    odd event stand out, and where an error happened (:func:`error_places`)."""
    plain = [set(_PLAIN.findall(seg)) for seg in segments]
    df: Counter[str] = Counter()
    for words in plain:
        df.update(words)
    rare = max(2, len(segments) // _RARE_IN)
    bare = Counter(
        _NUMBERS.sub("#", seg.strip())
        for seg, words in zip(segments, plain, strict=True)
        if not words
    )
    out: list[float] = []
    for seg, words in zip(segments, plain, strict=True):
        if not words:
            alike = bare[_NUMBERS.sub("#", seg.strip())] > rare
            out.append(REPEATED_LINE if alike else 1.0)
            continue
        distinct = sum(df[w] <= rare for w in words)
        share = min(distinct, _DISTINCT_WORDS) / _DISTINCT_WORDS
        out.append(REPEATED_LINE + (1.0 - REPEATED_LINE) * share)
    for k in error_places(segments):
        out[k] = 1.0
    return out


#: What lower-cased text that mentions an error or a failure holds, one of them
#: (:func:`.scoring.severe` asks the same of a segment).
SEVERE_WORDS = (
    "error",
    "fail",
    "exception",
    "traceback",
    "fatal",
    "panic",
    "assert",
    "denied",
    "refused",
    "not found",
    "no such",
    "cannot",
    "can't",
    "undefined",
    "segmentation fault",
    "timed out",
    "timeout",
    "exit code",
    "exit status",
)
#: And the spellings of a time-out :data:`.adapters.ERROR_LINE` finds besides: every
#: line it reports holds one of these, so a line with none is no error.
_ERROR_WORDS = (*SEVERE_WORDS, "time out", "timedout")
#: How far before an error its place may be (a traceback's last frame, then its code).
_PLACE_BEFORE = 3


def error_places(lines: Sequence[str]) -> list[int]:
    """The lines that say where an error of ``lines`` happened, though they read like
    many others (a compiler's ``--> src/a.rs:510:59`` after its ``error[E0382]``, a
    traceback's last ``File "x.py", line 12`` before its exception): the line right
    after an error line when it names a place, else the nearest such line up to three
    before it (before first for an exception's line: a Python traceback ends on it).
    They belong to the error, and are worth what an odd line is."""
    found = _mentions(lines, _ERROR_WORDS)  # "error" is in "KeyError" too
    raised = {k for k in found if EXCEPTION.match(lines[k].lstrip())}
    severe = raised | {k for k in found if _severe(lines[k])}
    out: list[int] = []
    for k in sorted(severe):
        after = [k + 1] if k + 1 < len(lines) and k + 1 not in severe else []
        before = list(range(k - 1, max(k - 1 - _PLACE_BEFORE, -1), -1))
        near = before + after if k in raised else after + before  # Python's: frames first
        place = next((j for j in near if LOCATION.match(lines[j])), None)
        if place is not None:
            out.append(place)
    return out


#: What only warns: a warning or a deprecation, not an error.
_WARNS = ("warning", "deprecat")


def _mentions(lines: Sequence[str], words: Iterable[str]) -> set[int]:
    """The indexes of ``lines`` that hold one of ``words`` (lower case), the lines
    lower-cased and joined once and each word found with ``str.find``."""
    lows = [line.rstrip("\n").lower() for line in lines]  # lower() may change a length
    low = "\n".join(lows)
    starts = list(accumulate((len(line) + 1 for line in lows), initial=0))
    out: set[int] = set()
    for word in words:
        at = low.find(word)
        while at >= 0:
            k = bisect_right(starts, at) - 1
            out.add(k)
            at = low.find(word, starts[k + 1])  # the next line: this one is found
    return out


def _severe(line: str) -> bool:
    """Whether ``line`` reports an error, not only a warning."""
    return any(not m.group(0).lower().startswith(_WARNS) for m in ERROR_LINE.finditer(line))


def _never(_: str) -> None:
    """No match (for a line when no identifiers are named)."""
    return None


def truncate_observation(
    text: str, *, max_lines: int, head: int, tail: int, named: re.Pattern[str] | None = None
) -> str | None:
    """Keep ``head`` and ``tail`` lines and, between them, the lines that stand out:
    errors and lines ``named`` matches (the identifiers the task names) first, then
    lines unlike the rest (:func:`distinctness`), then warnings, at most ``max_lines``
    in all, each group's first ones; the lines like the others are cut, with a marker
    saying how many. ``None`` if the text has ``max_lines`` lines or fewer."""
    lines = text.splitlines(keepends=True)
    if len(lines) <= max_lines:
        return None
    middle = lines[head : len(lines) - tail]
    search = named.search if named is not None else _never
    weights = distinctness(middle)
    errors = _mentions(middle, (*_ERROR_WORDS, *_WARNS))  # the lines ERROR_LINE can find

    def rank(k: int, ln: str, w: float) -> int:
        """0: an error or what the task names; 1: unlike the rest; 2: a warning; 3: cut."""
        if search(ln) or (k in errors and _severe(ln)):
            return 0
        if w >= 1.0:
            return 1
        return 2 if k in errors and ERROR_LINE.search(ln) else 3

    ranks = [rank(k, ln, w) for k, (ln, w) in enumerate(zip(middle, weights, strict=True))]
    kept = sorted(
        sorted((k for k, r in enumerate(ranks) if r < 3), key=ranks.__getitem__)[:max_lines]
    )
    cut = len(middle) - len(kept)
    cut_chars = sum(len(ln) for ln in middle) - sum(len(middle[k]) for k in kept)
    marker = f"[... {cut} lines like the others cut ({cut_chars} chars); the rest kept ...]\n"
    body = lines[:head]
    if body and not body[-1].endswith("\n"):
        body[-1] += "\n"
    shown = [middle[k] if middle[k].endswith("\n") else middle[k] + "\n" for k in kept]
    return "".join([*body, marker, *shown, *lines[len(lines) - tail :]])


# ------------------------------------------------------------------------ codebook

ESCAPE = "§"
_CODE_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LONG_WORD = re.compile(r"[A-Za-z_][\w.-]{9,}[\w]")  # a dynamic codebook's candidates
_DECODE = re.compile(f"{ESCAPE}({ESCAPE}|[0-9A-Z]{{2}})")

#: Phrases common in agent traces and chat, for the static codebook.
STATIC_CODEBOOK: tuple[str, ...] = (
    "Traceback (most recent call last):",
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
    "site-packages",
    "node_modules",
    "AssertionError",
    "ModuleNotFoundError",
    "AttributeError",
    "FileNotFoundError",
    "<returncode>",
    "</returncode>",
    "<output>",
    "</output>",
    "def __init__(self",
    "self.assertEqual(",
    "return_value",
    "__init__.py",
    'if __name__ == "__main__":',
)


class CodebookError(CtxfoldError, ValueError):
    """A text holds a code that is not in the codebook it is decoded with."""


@dataclass(frozen=True)
class Codebook:
    """Codes (two characters after ``§``) and the text each stands for."""

    entries: Mapping[str, str]

    def header(self, used: Iterable[str] | None = None) -> str:
        """A note for the model listing the codes (only ``used`` ones, if given)."""
        keys = sorted(self.entries if used is None else set(used))
        if not keys:
            return ""
        lines = [f"{ESCAPE}{k} = {self.entries[k]}" for k in keys]
        return (
            f"[Codebook: each {ESCAPE}XY code below stands for its text; "
            f"{ESCAPE}{ESCAPE} is a literal {ESCAPE}]\n" + "\n".join(lines)
        )

    def encode(self, text: str) -> tuple[str, set[str]]:
        """Escape ``§`` and replace each entry (at word boundaries); return the codes used.
        An empty codebook leaves the text as it is (as :func:`decode` does)."""
        if not self.entries:
            return text, set()
        out = text.replace(ESCAPE, ESCAPE * 2)
        used: set[str] = set()
        for code, phrase in sorted(self.entries.items(), key=lambda kv: -len(kv[1])):
            pattern = _boundary_pattern(phrase)
            out, n = pattern.subn(ESCAPE + code, out)
            if n:
                used.add(code)
        return out, used

    def decode(self, text: str) -> str:
        """The inverse of :meth:`encode`."""
        return decode(text, self.entries)


def _boundary_pattern(phrase: str) -> re.Pattern[str]:
    left = r"(?<![\w" + ESCAPE + "])" if phrase[0].isalnum() or phrase[0] == "_" else ""
    left = left or f"(?<!{ESCAPE})"
    right = r"(?!\w)" if phrase[-1].isalnum() or phrase[-1] == "_" else ""
    return re.compile(left + re.escape(phrase) + right)


def decode(text: str, entries: Mapping[str, str]) -> str:
    """Expand ``§XY`` codes and ``§§`` escapes; raises :class:`CodebookError` on an
    unknown code. With no entries the text is returned as it is."""
    if not entries:
        return text

    def expand(m: re.Match[str]) -> str:
        key = m.group(1)
        if key == ESCAPE:
            return ESCAPE
        try:
            return entries[key]
        except KeyError:
            raise CodebookError(f"unknown code {ESCAPE}{key}; decode with its codebook") from None

    return _DECODE.sub(expand, text)


def _codes(prefix: str) -> Iterable[str]:
    for c in _CODE_CHARS:
        yield prefix + c


def build_codebook(
    texts: Sequence[str],
    count: Callable[[str], int],
    *,
    static: bool = False,
    dynamic: bool = False,
    paths: bool = False,
    max_entries: int = 30,
) -> Codebook:
    """Choose entries that save tokens on ``texts`` (after the header's cost)."""
    joined = "\n".join(texts)
    entries: dict[str, str] = {}
    if static:
        for code, phrase in zip(_codes("S"), STATIC_CODEBOOK, strict=False):
            if joined.count(phrase) >= 2:
                entries[code] = phrase
    candidates: list[tuple[int, str, str]] = []
    if paths:
        prefixes: Counter[str] = Counter()
        for kind, value, _, _ in find_identifiers(joined):
            if kind == "path" and "/" in value:
                parts = value.split("/")
                for k in range(2, len(parts)):
                    prefixes["/".join(parts[:k]) + "/"] += 1
        for prefix, n in prefixes.items():
            if len(prefix) >= 12 and n >= 3 and ESCAPE not in prefix:
                candidates.append((n * (count(prefix) - 2) - count(prefix) - 4, "P", prefix))
    if dynamic:
        words = Counter(w for w in _LONG_WORD.findall(joined) if ESCAPE not in w)
        for word, n in words.items():
            if n >= 3:
                candidates.append((n * (count(word) - 2) - count(word) - 4, "D", word))
    candidates.sort(key=lambda c: (-c[0], c[2]))
    pools = {"P": iter(_codes("P")), "D": iter([*_codes("D"), *_codes("E"), *_codes("F")])}
    taken = set(entries.values())
    for gain, kind, phrase in candidates:
        if gain <= 0 or len(entries) >= max_entries:
            break
        if phrase in taken or any(phrase in t or t in phrase for t in taken):
            continue
        free: str | None = next(pools[kind], None)
        if free is None:
            continue
        entries[free] = phrase
        taken.add(phrase)
    return Codebook(entries)
