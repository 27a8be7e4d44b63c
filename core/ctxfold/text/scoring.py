"""Extractive summarization: score sentences and lines, keep the best, in order."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ..contract import WordCounts
from .adapters import Piece
from .layers import SEVERE_WORDS, distinctness
from .primitives import INLINE_CODE, find_identifiers, split_lines, split_sentences
from .wordlists import word_list

__all__ = [
    "ALL_FLAGS",
    "FILLER",
    "ExtractiveSummarizer",
    "Features",
    "Flags",
    "ScoreContext",
    "column_scores",
    "combine",
    "combine_all",
    "content_words",
    "elide",
    "features",
    "found_per_piece",
    "goal_names",
    "has_error",
    "looks_like_lines",
    "mentions_decision",
    "says_little",
    "score",
    "segments_of",
    "severe",
    "standing",
]

_STOP = word_list("stop_words")
# A capitalized word inside a sentence (after a lower-case word, a comma or a
# semicolon): a name. Not after a colon: a note's speaker tag ("Caroline: Taking care
# of ...") starts a sentence, where capitals say nothing. The space comes first, then
# the look back at it and what precedes it: a pattern that starts with a literal is
# searched for it at C speed (four times as fast as the look-behind first; the same
# matches: no match holds a space). ``findall`` gives the word (the group).
_CAPITAL = re.compile(r" (?<=[a-z,;] )([A-Z][a-z]{2,})")
_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")


#: Segments scoring below this carry nothing worth a token ("Thanks, Mel!", "Sure.").
FILLER = 0.3


@dataclass
class ScoreContext:
    """What scoring knows about the conversation: word rarity and the current goal.

    ``idf`` holds content words only (no stop words, three letters or more), capped.
    """

    idf: dict[str, float] = field(default_factory=dict)
    goal: frozenset[str] = frozenset()
    repeated_later: frozenset[str] = frozenset()
    named: re.Pattern[str] | None = None  # the identifiers the goal names, whole

    @classmethod
    def build(cls, documents: Sequence[str], goal: str = "") -> ScoreContext:
        """IDF over ``documents`` (one per message) and the content words of ``goal``."""
        return cls.from_words([content_words(doc) for doc in documents], goal)

    @classmethod
    def from_words(
        cls, documents: Sequence[Collection[str]], goal: str = "", rarity: WordCounts | None = None
    ) -> ScoreContext:
        """Like :meth:`build`, from each document's content words (already found); with
        ``rarity``, a word is as rare as in the whole conversation those counts are of."""
        df: Counter[str] = Counter()
        for words in documents:
            df.update(words)
        n = max(len(documents), 1)
        if rarity is not None:
            n = max(n, rarity.documents)
            whole = rarity.frequency
            for w, c in df.items():
                df[w] = max(c, whole.get(w, 0))
        idf = {w: min(math.log((n + 1) / (c + 0.5)), 4.0) for w, c in df.items()}
        return cls(idf=idf, goal=content_words(goal), named=goal_names(goal))


#: At most this many identifiers of a goal are looked for in every segment (a long
#: goal, a whole issue pasted in, names more; its longest, the most specific, count).
_GOAL_NAMES = 24
#: How much more a segment that names one of them, whole, is worth: a line of a search
#: result or a log is worth keeping when the task names what it shows
#: (``budget_batch``), well above the lines about its neighbours (``budget_ms``,
#: ``max_batch``), however like the others it looks.
GOAL_NAME = 3.0


def goal_names(goal: str) -> re.Pattern[str] | None:
    """A pattern matching, as a whole word, any identifier ``goal`` names (its
    identifiers and what it quotes in backticks); ``None`` when it names none."""
    if not goal:
        return None
    names = {v for _, v, _, _ in find_identifiers(goal)} | set(INLINE_CODE.findall(goal))
    names = {v.strip() for v in names if len(v.strip()) >= 3}
    if not names:
        return None
    chosen = sorted(names, key=lambda v: (-len(v), v))[:_GOAL_NAMES]
    alternatives = "|".join(map(re.escape, chosen))
    return re.compile(rf"(?<![\w.-])(?:{alternatives})(?![\w-])")


_CONTENT = re.compile(r"[a-z][a-z-]+[a-z]")
_RARE = 4.0  # the rarity (idf) of a word the conversation's other messages lack
_ZEROS = itertools.repeat(0.0)


@dataclass(frozen=True, slots=True)
class Flags:
    """Which costly patterns occur at all in a piece, so its segments skip the rest."""

    error: bool = True
    decision: bool = True
    capital: bool = True

    @classmethod
    def of(cls, text: str) -> Flags:
        low = text.lower()
        return cls(
            has_error(low),
            mentions_decision(low),
            bool(_CAPITAL.search(text)),
        )


_ANY_DIGIT = re.compile(r"\d")


def has_error(low: str) -> bool:
    """Whether lower-cased text mentions an error, a failure or a warning (substring
    tests, several times faster than a regex alternation)."""
    return severe(low) or "warning" in low or "deprecat" in low


def severe(low: str) -> bool:
    """Whether lower-cased text mentions an error or a failure, not only a warning
    (one of :data:`.layers.SEVERE_WORDS`)."""
    return any(map(low.__contains__, SEVERE_WORDS))


#: What a segment gains for an error or a failure, and for a warning alone: a build's
#: hundreds of warnings must not bury its one error.
ERROR_GAIN = 1.5
WARNING_GAIN = 0.5


# Decisions, matched on lower-cased text without word boundaries: a little looser than
# exact patterns, and many times faster.
_WILL = tuple(f"will {verb}" for verb in ("now", "use", "try", "fix", "add", "change", "run"))


def mentions_decision(low: str) -> bool:
    """Whether lower-cased text states a decision, a plan or a cause (substring tests,
    as :func:`has_error`: about twice as fast as one regex alternation on long text)."""
    return (
        "decid" in low
        or "chose" in low
        or "choose" in low
        or "plan" in low
        or "let's" in low
        or "we'll" in low
        or "i'll" in low
        or ("will " in low and any(phrase in low for phrase in _WILL))
        or "should" in low
        or "must" in low
        or "root cause" in low
        or "the fix" in low
        or "the issue is" in low
        or "the problem is" in low
        or "the bug is" in low
        or "because" in low
        or "instead" in low
        or "conclusion" in low
        or "solution" in low
        or "agree" in low
    )


#: Every pattern may occur: test them all.
ALL_FLAGS = Flags()


class Features(NamedTuple):
    """What scoring needs to know of a sentence or line, independent of the conversation
    (so it can be cached per message); :func:`combine` adds the conversation's part."""

    content: tuple[str, ...]  # content words (no stop words), each once, in no order
    # (a tuple: the garbage collector stops tracking it, and it is a third of a set)
    base: float  # identifiers, numbers, errors, decisions
    factor: float  # penalties (filler, questions) and the piece's weight
    signal: bool  # holds numbers or identifiers
    line: str  # the stripped text, to spot lines shown again later
    names: tuple[str, ...] = ()  # capitalized words inside the sentence, lower-cased


def says_little(f: Features, known: Collection[str] = ()) -> bool:
    """Whether a sentence says next to nothing: at most one content word, no number or
    identifier, no name but those ``known`` ("Wow!", "Thanks, Mel!" when Mel is
    known, "How have you been?"; not "Been only to Rome once.")."""
    return len(f.content) <= 1 and not f.signal and all(n in known for n in f.names)


def content_words(text: str) -> frozenset[str]:
    """The content words of ``text`` (lower-cased, no stop words), as scoring sees them."""
    return frozenset(_CONTENT.findall(text.lower())) - _STOP


def features(
    text: str, kinds: Sequence[str] | None = None, flags: Flags = ALL_FLAGS, weight: float = 1.0
) -> Features:
    """The conversation-independent part of :func:`score`."""
    # Given kinds all count for this one segment: they start before it.
    found = list(find_identifiers(text)) if kinds is None else [(k, "", -1, -1) for k in kinds]
    return segment_features([text], found, flags, weight)[0]


_PATH_KINDS = frozenset({"path", "url"})
_NO_WORDS: tuple[str, ...] = ()


def segment_features(
    segments: Sequence[str],
    found: Sequence[tuple[str, str, int, int]],
    flags: Flags = ALL_FLAGS,
    weight: float = 1.0,
    standing: Sequence[float] | None = None,
) -> list[Features]:
    """:func:`features` of each segment of one piece, in one pass: ``found`` holds the
    piece's identifiers in order, as ``(kind, value, start, end)`` with offsets into
    the concatenated segments (each counts where it starts); ``standing`` scales each
    segment's worth (see :func:`standing`)."""
    content_of, numbers_of, any_digit = _CONTENT.findall, _NUMBER.finditer, _ANY_DIGIT.search
    capitals = _CAPITAL.findall if flags.capital else None
    decision = mentions_decision if flags.decision else None
    error, stop, n = flags.error, _STOP, len(found)
    out: list[Features] = []
    pos = at = 0
    for seg in segments:
        pos += len(seg)
        base, first = 0.2, at
        while at < n and found[at][2] < pos:
            base += 2.5 if found[at][0] in _PATH_KINDS else 1.5
            at += 1
        ids = at - first
        low = seg.lower()
        words = content_of(low)
        content = tuple(set(words).difference(stop)) if words else _NO_WORDS
        # quantities, dates, versions: up to four count, so the search stops there
        numbers = len(list(itertools.islice(numbers_of(seg), 4))) if any_digit(seg) else 0
        base += numbers
        caps = capitals(seg) if capitals else None
        names = tuple([w for w in map(str.lower, caps) if w not in stop][:8]) if caps else ()
        if error and has_error(low):
            base += ERROR_GAIN if severe(low) else WARNING_GAIN
        if decision and decision(low):
            base += 0.4
        factor = weight
        if len(content) <= 2 and not numbers and not ids:
            factor *= 0.3  # "Thanks, Mel!", "Sounds good." carry little
        stripped = seg.strip()
        if stripped[-1:] == "?":
            factor *= 0.6  # a question asks; the answer holds the fact
        out.append(Features(content, base, factor, bool(numbers or ids), stripped, names))
    if standing is not None:
        out = [f._replace(factor=f.factor * k) for f, k in zip(out, standing, strict=True)]
    return out


#: A message of at least this many segments (a log, a test run, a search result) ranks
#: its lines against each other too (see :func:`standing`).
_MANY_LINES = 20


def standing(segments: Sequence[Sequence[str]]) -> list[Sequence[float] | None]:
    """For each piece's ``segments`` of one message, how much each is worth for being
    unlike the message's other segments (:func:`.layers.distinctness`, over all its
    pieces: an adapter may split a log into a piece per error line); ``None`` each for
    a message of fewer than ``_MANY_LINES`` segments."""
    flat = [seg for segs in segments for seg in segs]
    if len(flat) < _MANY_LINES:
        return [None] * len(segments)
    weights = distinctness(flat)
    out: list[Sequence[float] | None] = []
    at = 0
    for segs in segments:
        out.append(weights[at : at + len(segs)])
        at += len(segs)
    return out


def combine(f: Features, ctx: ScoreContext) -> float:
    """A segment's score from its features and the conversation's rarity and goal."""
    return combine_all([f], ctx)[0]


def combine_all(feats: Sequence[Features], ctx: ScoreContext) -> list[float]:
    """:func:`combine` of each of ``feats``."""
    return column_scores(ctx, *zip(*feats, strict=True)) if feats else []


def column_scores(
    ctx: ScoreContext,
    content: Iterable[tuple[str, ...]],
    base: Iterable[float],
    factor: Iterable[float],
    signal: Iterable[bool],
    line: Iterable[str],
    names: Iterable[tuple[str, ...]],
) -> list[float]:
    """:func:`combine` of many segments' features, given as columns (as a memo keeps
    them: no :class:`Features` made, nor a call, for each)."""
    get, goal, repeated = ctx.idf.get, ctx.goal, ctx.repeated_later
    named_in_goal = ctx.named.search if ctx.named is not None else None
    out: list[float] = []
    rows = zip(content, base, factor, signal, line, names, strict=True)
    for words, s, times, signals, text, named in rows:
        info = math.fsum(map(get, words, _ZEROS))  # exact: no set-order drift
        if not info and not signals:
            out.append(0.05)
            continue
        s += info / 8.0
        if named:  # names of people, places, things; one on every other line says little
            s += min(sum(min(max(get(w, _RARE) - 1.5, 0.0) / 2.0, 1.0) for w in named), 4.0)
        if goal and not goal.isdisjoint(words):
            s += 0.8 * len(goal.intersection(words))
        s *= times
        if named_in_goal is not None and named_in_goal(text):
            s *= GOAL_NAME
        if repeated and text in repeated:
            s *= 0.1  # the same line is shown again later
        out.append(s)
    return out


def score(
    text: str, ctx: ScoreContext, kinds: Sequence[str] | None = None, flags: Flags = ALL_FLAGS
) -> float:
    """How much a sentence or line is worth keeping: identifiers, numbers, names,
    errors, decisions, rare words and words of the current goal count. ``kinds`` are
    the identifier kinds in ``text`` when the caller already found them."""
    return combine(features(text, kinds, flags), ctx)


def segments_of(piece: Piece) -> list[str]:
    """The selectable fragments of a compressible piece (concatenation is its text)."""
    return split_lines(piece.text) if piece.mode == "lines" else split_sentences(piece.text)


def elide(
    piece: Piece, segments: Sequence[str], chosen: Sequence[bool], *, marks: bool = True
) -> str:
    """The piece with unchosen segments elided: ``...`` in prose, a line count in lines.
    Without ``marks``, gaps are left unmarked (the note says text was cut)."""
    out: list[str] = []
    gap = 0
    for seg, keep in zip(segments, chosen, strict=True):
        if keep:
            if gap and marks:
                out.append(_gap(piece, gap, out))
            elif out and not out[-1][-1:].isspace():
                out.append(" ")
            gap = 0
            out.append(seg)
        else:
            gap += 1
    if gap and out and marks:
        out.append(_gap(piece, gap, out))
    return "".join(out)


def _gap(piece: Piece, n: int, before: list[str]) -> str:
    if piece.mode == "lines":
        sep = "" if not before or before[-1].endswith("\n") else "\n"
        return f"{sep}[... {n} line{'s' if n > 1 else ''} omitted]\n"
    prev = before[-1] if before else ""
    return "... " if not prev or prev[-1:].isspace() else " ... "


class ExtractiveSummarizer:
    """The default summarizer: no LLM, deterministic, milliseconds.

    Keeps the sentences (or lines) worth the most per token — identifiers, numbers with
    units, names, errors, decisions, words of the question being worked on — in their
    original order, up to ``max_tokens``; never cuts inside an identifier, path, URL,
    number or quoted string.
    """

    def __init__(self, *, chars_per_token: float = 4.0, goal: str = "") -> None:
        self.chars_per_token = chars_per_token
        self.goal = goal

    def summarize(self, text: str, *, max_tokens: int) -> str:
        """Keep the best sentences of ``text`` within about ``max_tokens`` tokens."""
        budget = max_tokens * self.chars_per_token
        if len(text) <= budget:
            return text
        piece = Piece(text, keep=False, mode="lines" if looks_like_lines(text) else "prose")
        segs = segments_of(piece)
        ctx = ScoreContext.build(segs, self.goal)
        scores = [score(seg, ctx) for seg in segs]
        order = sorted(range(len(segs)), key=lambda k: (-scores[k] / max(len(segs[k]), 12), k))
        chosen = [False] * len(segs)
        used = 0.0
        for k in order:
            if scores[k] < FILLER and used:
                continue  # filler is not worth a token
            if used + len(segs[k]) <= budget:
                chosen[k] = True
                used += len(segs[k])
        return elide(piece, segs, chosen)


def looks_like_lines(text: str) -> bool:
    """Whether ``text`` reads as lines (a log, a listing), not as prose."""
    lines = text.splitlines()
    return len(lines) >= 4 and sum(len(ln) < 100 for ln in lines) * 10 >= len(lines) * 7


Found = tuple[str, str, int, int]


def found_per_piece(pieces: Sequence[Piece], text: str) -> list[list[Found]]:
    """The identifiers of each piece of ``text`` (offsets into the piece); one scan of
    the whole text when the pieces tile it exactly."""
    if "".join(p.text for p in pieces) != text or len(pieces) == 1:
        return [list(find_identifiers(p.text)) for p in pieces]
    whole = list(find_identifiers(text))
    out: list[list[Found]] = []
    offset = next_id = 0
    for p in pieces:
        stop = offset + len(p.text)
        found = []
        while next_id < len(whole) and whole[next_id][2] < stop:
            k, v, a, b = whole[next_id]
            found.append((k, v, a - offset, b - offset))
            next_id += 1
        out.append(found)
        offset = stop
    return out
