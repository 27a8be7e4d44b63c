"""Exact-fit shortening of one text: what a message shortened in place shows (the
newest unit cut to its room, a rendered turn's result cut to its limit)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from .._state import LRU, memo
from ..tokens import TokenCounter
from .adapters import Piece, registry_version, split_message_text
from .fitting import fit_text
from .layers import minify_json
from .primitives import KIND_WEIGHT, find_identifiers
from .scoring import (
    ScoreContext,
    combine_all,
    elide,
    found_per_piece,
    looks_like_lines,
    segment_features,
    segments_of,
    standing,
)

__all__ = ["head_of", "shorten"]

_ALSO_IN_FULL = "[also in the full text: "
_TRIES = 6  # selections tried before the text's head, cut, stands
_ID_SHARE = 4  # the identifiers of the cut parts take at most 1/4 of the allowance


_SHORTENED: LRU[str] = memo(4_096)  # shorten() is asked for the same results each turn


def shorten(text: str, max_tokens: int, counter: TokenCounter, *, goal: str = "") -> str:
    """``text`` within ``max_tokens`` tokens (exact, by ``counter``), shortened the way
    the engine shortens a message: JSON minified, the format adapters' preserved parts
    kept (code blocks, a log's error lines, a table's header), the best sentences or
    lines of the rest, each gap marked; the identifiers of what was cut (paths, URLs,
    ids) listed at the end, so they stay findable. Memoized: an agent's turns ask for
    the same results again and again."""
    if counter.count_text(text) <= max_tokens:
        return text
    key = (text, max_tokens, counter.name, goal, registry_version())
    return _SHORTENED.cached(key, _shorten, text, max_tokens, counter, goal)


def _shorten(text: str, max_tokens: int, counter: TokenCounter, goal: str) -> str:
    mini = minify_json(text)
    if mini is not None:
        if counter.count_text(mini) <= max_tokens:
            return mini
        text = mini
    pieces, _ = split_message_text(text)
    if sum(len(p.text) for p in pieces) > len(text):
        pieces = [Piece(text, keep=False)]
    pieces = [  # line-shaped output is cut by lines, whatever adapter split it
        Piece(p.text, keep=False, mode="lines", weight=p.weight)
        if not p.keep and p.mode == "prose" and looks_like_lines(p.text)
        else p
        for p in pieces
    ]
    segments = [segments_of(p) if not p.keep else [p.text] for p in pieces]
    flat = [seg for p, segs in zip(pieces, segments, strict=True) if not p.keep for seg in segs]
    ctx = ScoreContext.build(flat, goal)
    per_piece = found_per_piece(pieces, text)  # identifiers found once, not per sentence
    values: list[list[float]] = []
    stand = standing(segments)
    for segs, ids, st in zip(segments, per_piece, stand, strict=True):
        feats = segment_features(segs, ids, standing=st)
        scored = zip(segs, combine_all(feats, ctx), strict=True)
        values.append([v / max(len(s), 12) for s, v in scored])
    tiled = "".join(p.text for p in pieces) == text  # then the pieces' ids are the text's
    found: dict[str, str] = {}
    whole = itertools.chain.from_iterable(per_piece) if tiled else find_identifiers(text)
    for kind, value, _, _ in whole:
        found.setdefault(value, kind)
    ranked_ids = sorted(found, key=lambda v: -KIND_WEIGHT.get(found[v], 1.0))
    cpt = max(len(text) / max(counter.count_text(text), 1), 1.0)

    def write(allowance: int) -> str:
        body = _select(pieces, segments, values, allowance * cpt * (1 - 1 / _ID_SHARE))
        if body is None:  # no sentence or line fits whole: the best one, cut
            return head_of(_best(segments, values), max_tokens, counter, cpt)
        missing = [v for v in ranked_ids if v not in body]
        return body + _also(missing, max_tokens // _ID_SHARE, counter)

    fitted = fit_text(write, max_tokens, counter, tries=_TRIES)
    return fitted.text if fitted.fits else head_of(text, max_tokens, counter, cpt)


def _best(segments: Sequence[list[str]], values: Sequence[list[float]]) -> str:
    """The segment worth the most per character (the first of equals)."""
    ranked = [(v, pi, si) for pi, row in enumerate(values) for si, v in enumerate(row)]
    if not ranked:
        return ""
    _, pi, si = max(ranked, key=lambda c: (c[0], -c[1], -c[2]))
    return segments[pi][si].strip()


def head_of(text: str, max_tokens: int, counter: TokenCounter, cpt: float | None = None) -> str:
    """The head of ``text`` within ``max_tokens`` tokens, at a word's end, marked
    (``cpt``: its characters per token, if known); "" when no word fits."""
    if cpt is None:
        cpt = max(len(text) / max(counter.count_text(text), 1), 1.0)
    cut = text[: int(max_tokens * cpt)]
    while cut and counter.count_text(cut + " [...]") > max_tokens:
        shorter = cut[: len(cut) * 9 // 10]
        cut = shorter.rsplit(" ", 1)[0] if " " in shorter else shorter
    return cut.rstrip() + " [...]" if cut else ""


def _select(
    pieces: Sequence[Piece],
    segments: Sequence[list[str]],
    values: Sequence[list[float]],
    chars: float,
) -> str | None:
    """The pieces with the segments worth the most per character (``values``) within
    ``chars``; preserved pieces first, unless they alone are too long (then they
    compete too). ``None`` when nothing fits whole."""
    fixed = sum(len(p.text) for p in pieces if p.keep)
    compete = fixed > chars / 2
    cands = [
        (values[pi][si], pi, si)
        for pi, (p, segs) in enumerate(zip(pieces, segments, strict=True))
        if compete or not p.keep
        for si in range(len(segs))
    ]
    cands.sort(key=lambda c: (-c[0], c[1], c[2]))
    used = 0.0 if compete else float(fixed)
    chosen = [
        [not compete and p.keep] * len(segs) for p, segs in zip(pieces, segments, strict=True)
    ]
    for _, pi, si in cands:
        seg = segments[pi][si]
        if used + len(seg) <= chars:
            chosen[pi][si] = True
            used += len(seg)
    if not any(any(ch) for ch in chosen):
        return None
    parts: list[str] = []
    for p, segs, ch in zip(pieces, segments, chosen, strict=True):
        if p.keep and not compete:
            parts.append(p.text)
        elif any(ch):
            part = elide(Piece(p.text, keep=False, mode=p.mode), segs, ch)
            if part.startswith("[") and parts and not parts[-1].endswith("\n"):
                part = "\n" + part
            parts.append(part)
        elif not p.keep and p.text.strip():  # nothing of it chosen: say so
            cut = f"[... {len(segs)} lines omitted]" if p.mode == "lines" else "[...]"
            sep = "" if not parts or parts[-1].endswith("\n") else "\n"
            parts.append(f"{sep}{cut}\n")
    return _merge_gaps("".join(parts)).strip("\n") or "[...]"


_GAPS = re.compile(r"\[\.\.\. (\d+) lines? omitted\]\n\[\.\.\. (\d+) lines? omitted\]")


def _merge_gaps(text: str) -> str:
    """One gap mark where pieces left two in a row."""
    while True:
        merged = _GAPS.sub(lambda m: f"[... {int(m[1]) + int(m[2])} lines omitted]", text)
        if merged == text:
            return text
        text = merged


def _also(missing: Sequence[str], max_tokens: int, counter: TokenCounter) -> str:
    """The line naming identifiers only the full text has, within ``max_tokens``."""
    if not missing:
        return ""
    listed: list[str] = []
    for value in missing:
        line = f"\n{_ALSO_IN_FULL}{', '.join([*listed, value])}]"
        if counter.count_text(line) > max_tokens:
            break
        listed.append(value)
    return f"\n{_ALSO_IN_FULL}{', '.join(listed)}]" if listed else ""
