"""Stage 1, analysis: what can be known of one message alone (its layers, adapter
pieces, segments and their features, tool calls, identifiers), memoized by content so
that the next turn re-analyses only new messages."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..._state import LRU, interned, memo
from ...messages import Message, ToolCall, speaker_tag
from ...result import is_note
from ...text.adapters import FormatAdapter, Piece, adapters, registry_version, split_message_text
from ...text.layers import (
    Layers,
    looks_indentation_sensitive,
    maybe_whitespace,
    minify_json,
    normalize_whitespace,
    truncate_observation,
)
from ...text.primitives import find_identifiers, json_strings, json_values
from ...text.scoring import (
    ALL_FLAGS,
    Features,
    Flags,
    features,
    found_per_piece,
    segment_features,
    segments_of,
)
from .policy import POLICY

__all__ = ["Analysis", "Analyzer", "PieceRow", "Row", "call_identifiers", "echo_of"]

#: A segment's :class:`Features` as a plain tuple (``Features._make`` reads it back):
#: the garbage collector stops tracking a plain tuple of strings and numbers, never a
#: NamedTuple or a dataclass, and the memo holds thousands of messages of dozens of
#: segments each. A :class:`Piece` is kept as ``PieceRow`` for the same reason.
Row = tuple[tuple[str, ...], float, float, bool, str, tuple[str, ...]]
PieceRow = tuple[str, bool, Literal["prose", "lines"], float]


@dataclass(frozen=True)
class Analysis:
    """The part of a plan that depends on the message alone (cached across calls)."""

    tag: str
    pieces: tuple[PieceRow, ...]  # Piece(*row)
    segments: tuple[tuple[str, ...], ...]
    features: tuple[tuple[Row, ...], ...]  # each segment's, piece by piece
    calls: tuple[ToolCall, ...]
    call_features: tuple[Features, ...]
    reasons: tuple[str, ...]
    cpt: float
    identifiers: tuple[tuple[str, str], ...]
    echo: float
    savings: Mapping[str, int]
    words: tuple[str, ...]  # content words (each once), for the conversation's word rarity


#: An :class:`Analysis` as a memo keeps it: its fields, its calls and their features
#: as rows, its savings as items. Keyed by strings and numbers only (the layers and
#: adapters as :func:`interned` numbers), a memo's thousands of entries are nothing
#: the garbage collector walks once it has seen them (a long session's full
#: collections spent half their time in them): it stops tracking a plain tuple of
#: untracked items, one level of nesting per full collection. (Marshalled bytes would
#: be untracked at once, but reading one back costs ten times as much.)
Stored = tuple[Any, ...]

_ANALYSES: LRU[Stored] = memo(5_000)
#: A note's lines, analysed one by one (see :meth:`Analyzer._note`): two notes' worth.
_LINES: LRU[Stored] = memo(8_000)


def _stored(a: Analysis) -> Stored:
    calls = tuple((c.id, c.name, c.arguments, c.type) for c in a.calls)
    call_rows = tuple(map(_row, a.call_features))
    savings = tuple(a.savings.items())
    return (
        a.tag,
        a.pieces,
        a.segments,
        a.features,
        calls,
        call_rows,
        a.reasons,
        a.cpt,
        a.identifiers,
        a.echo,
        savings,
        a.words,
    )


#: Where a stored analysis keeps the fields a note's lines are read for.
_PIECES, _SEGMENTS, _FEATURES, _REASONS, _IDENTIFIERS, _SAVED, _WORDS = 1, 2, 3, 6, 8, 10, 11


def _restored(row: Stored) -> Analysis:
    tag, pieces, segments, feats, calls, call_rows, reasons, cpt, ids, echo, saved, words = row
    return Analysis(
        tag,
        pieces,
        segments,
        feats,
        tuple(ToolCall(*c) for c in calls),
        tuple(map(Features._make, call_rows)),
        reasons,
        cpt,
        ids,
        echo,
        dict(saved),
        words,
    )


class Analyzer:
    """Analyses messages with one set of layers and adapters."""

    def __init__(self, layers: Layers, adapters: Sequence[FormatAdapter] | None) -> None:
        self.layers = layers
        self.adapters = adapters
        self._key = (-1, -1)  # (registry version, config number), made on first use

    def __call__(self, m: Message, tok: int) -> Analysis:
        """What does not depend on the rest of the conversation, cached by content."""
        key = (m.fingerprint, tok, self._config())
        stored = _ANALYSES.get(key)
        if stored is not None:
            return _restored(stored)
        lines = tok >= POLICY.note_lines_from and isinstance(m.content, str) and is_note(m)
        made = self._note(m, tok) if lines else self._analyse(m, tok)
        _ANALYSES.put(key, _stored(made))
        return made

    def _config(self) -> int:
        """The layers and adapters, as a memo key's number (made again only when the
        adapter registry changes: a note's every line asks)."""
        version = registry_version() if self.adapters is None else 0
        if self._key[0] != version:
            if self.adapters is not None:
                config = interned((self.layers, tuple(self.adapters)))
            else:
                config = interned((self.layers, "registry", version))
            self._key = (version, config)
        return self._key[1]

    def _analyse(self, m: Message, tok: int) -> Analysis:
        calls, call_texts, identifiers = _calls(m, self.layers)
        text = m.content if isinstance(m.content, str) else m.text
        cpt = max(len(text) + sum(len(t) for t in call_texts), 1) / max(tok - 3, 1)
        draft = _Draft(text, max(cpt, 1.0), identifiers)
        draft.apply_layers(self.layers, m.role)
        pieces = self._pieces(draft)
        segments, feats = _segments(pieces, draft)
        echo = echo_of(m.role)
        words = tuple(set().union(*(f.content for fs in feats for f in fs)))
        return Analysis(
            speaker_tag(m),
            tuple((p.text, p.keep, p.mode, p.weight) for p in pieces),
            tuple(segments),
            tuple(tuple(_row(f) for f in fs) for fs in feats),
            calls,
            tuple(features(t[: POLICY.call_scan_chars]) for t in call_texts),
            tuple(draft.reasons),
            draft.cpt,
            tuple(draft.identifiers),
            echo,
            dict(draft.savings),
            words,
        )

    def _note(self, m: Message, tok: int) -> Analysis:
        """A long earlier note (``POLICY.note_lines_from`` tokens), line by line: each
        line analysed alone (memoized by its text) and the lines joined. The next note
        keeps most lines of the last, so a compaction that folds its note again analyses
        only the lines new to it, not the whole note (tens of thousands of tokens at a
        large budget)."""
        # Its lines went through the layers in their own messages: no second pass.
        plain = Analyzer(replace(self.layers, whitespace=False, json=False), self.adapters)
        rows = [plain._line(line, m.role) for line in m.text.splitlines(keepends=True)]
        cpt = max(max(len(m.text), 1) / max(tok - 3, 1), 1.0)
        saved: Counter[str] = Counter()
        for row in rows:
            for kind, chars in row[_SAVED]:  # in characters: see _line
                saved[kind] += chars
        pieces, segments, features = _joined(rows)
        return Analysis(
            speaker_tag(m),
            pieces,
            segments,
            features,
            (),
            (),
            tuple(dict.fromkeys(r for row in rows for r in row[_REASONS])),
            cpt,
            tuple(x for row in rows for x in row[_IDENTIFIERS]),
            echo_of(m.role),
            {k: round(v / cpt) for k, v in saved.items()},
            tuple(set().union(*(row[_WORDS] for row in rows))),
        )

    def _line(self, line: str, role: str) -> Stored:
        """One line of a note as the memo keeps it (read in place: a note has
        thousands), analysed alone with its savings in characters (one token per
        character), its line break kept at the end of its last piece and segment (the
        plan reads where a note's lines begin)."""
        key = (line, role, self._config())
        stored = _LINES.get(key)
        if stored is None:
            stored = _stored(self._line_alone(line, role))
            _LINES.put(key, stored)
        return stored

    def _line_alone(self, line: str, role: str) -> Analysis:
        body = line.rstrip("\n")
        a = self._analyse(Message(role, body), len(body) + 3)
        end = line[len(body) :]
        if end and a.segments and a.segments[-1]:
            *rows, last = a.pieces
            *segs, tail = a.segments
            a = replace(
                a,
                pieces=(*rows, (last[0] + end, *last[1:])),
                segments=(*segs, (*tail[:-1], tail[-1] + end)),
            )
        elif end:  # no segment to end the line (a blank one): the break alone is one
            a = replace(
                a,
                pieces=(*a.pieces, (end, False, "prose", 1.0)),
                segments=(*a.segments, (end,)),
                features=(*a.features, (_row(segment_features([end], [])[0]),)),
            )
        return a

    def _pieces(self, draft: _Draft) -> list[Piece]:
        """The format adapters' pieces of the text (one piece when no adapter helps)."""
        text = draft.text
        builtin_only = self.adapters is None and registry_version() == 0
        if builtin_only and "\n" not in text and text[:1] not in "[{<":
            return [Piece(text, keep=False)]  # one line: no format
        pieces, used = split_message_text(text, self.adapters or adapters())
        rebuilt = "".join(p.text for p in pieces)
        if len(rebuilt) > len(text):  # an adapter must never make things bigger
            draft.reasons.append(f"adapter_reverted:{'+'.join(used)}")
            return [Piece(text, keep=False)]
        draft.reasons.extend(f"adapter:{a}" for a in used if a != "prose")
        if rebuilt != text:
            draft.savings["adapters"] += round((len(text) - len(rebuilt)) / draft.cpt)
        return pieces


def _joined(
    lines: Sequence[Stored],
) -> tuple[tuple[PieceRow, ...], tuple[tuple[str, ...], ...], tuple[tuple[Row, ...], ...]]:
    """The pieces, segments and features of lines analysed one by one (as the memo
    keeps them), as one text's: a run of pieces alike (kept or not, mode, weight) is
    one piece, so a note of a thousand lines is a few pieces, as when it was analysed
    whole."""
    texts: list[list[str]] = []
    kinds: list[tuple[bool, Literal["prose", "lines"], float]] = []
    segments: list[list[str]] = []
    features: list[list[Row]] = []
    for line in lines:
        for (text, keep, mode, weight), segs, rows in zip(
            line[_PIECES], line[_SEGMENTS], line[_FEATURES], strict=True
        ):
            if not kinds or kinds[-1] != (keep, mode, weight):
                texts.append([])
                kinds.append((keep, mode, weight))
                segments.append([])
                features.append([])
            texts[-1].append(text)
            segments[-1] += segs
            features[-1] += rows
    pieces = tuple(("".join(t), *kind) for t, kind in zip(texts, kinds, strict=True))
    return pieces, tuple(map(tuple, segments)), tuple(map(tuple, features))


def echo_of(role: str) -> float:
    """How much a mention of an identifier in a message of ``role`` counts: ids people
    (and the agent) repeat matter more than ids in tool output."""
    return 1.0 if role == "tool" else POLICY.people_echo


def _row(f: Features) -> Row:
    return (f.content, f.base, f.factor, f.signal, f.line, f.names)


def _calls(
    m: Message, layers: Layers
) -> tuple[tuple[ToolCall, ...], list[str], list[tuple[str, str]]]:
    """The message's tool calls (arguments minified), their texts, and the identifiers
    they act on (counted twice: what the assistant acted on matters)."""
    calls = m.tool_calls
    if layers.json and calls:
        calls = tuple(
            ToolCall(c.id, c.name, minify_json(c.arguments) or c.arguments, c.type) for c in calls
        )
    texts = [f"{c.name}({c.arguments})" for c in calls]
    return calls, texts, call_identifiers(calls)


def call_identifiers(calls: Sequence[ToolCall]) -> list[tuple[str, str]]:
    """The identifiers tool calls act on, each twice (what the assistant acted on
    matters)."""
    identifiers: list[tuple[str, str]] = []
    for c in calls:
        acted = [(k, v) for k, v, _, _ in find_identifiers(json_strings(c.arguments))]
        acted += json_values(c.arguments, names=True)
        identifiers += acted + acted
    return identifiers


@dataclass
class _Draft:
    """A message's text on its way through the encoding layers, with what they did."""

    text: str
    cpt: float  # characters per token
    identifiers: list[tuple[str, str]]
    reasons: list[str] = field(default_factory=list)
    savings: Counter[str] = field(default_factory=Counter)
    truncated: bool = False  # identifiers were taken from the whole text already
    is_json: bool = False

    def replace_text(self, new: str, layer: str) -> None:
        self.savings[layer] += round((len(self.text) - len(new)) / self.cpt)
        self.text = new
        self.reasons.append(f"layer:{layer}")

    def apply_layers(self, layers: Layers, role: str) -> None:
        """JSON minified, tool output truncated, whitespace normalized, as configured."""
        text = self.text
        strings = json_strings(text) if text[:1] in "[{" else text
        self.is_json = strings is not text
        if self.is_json:  # ids live in the values; the keys are schema
            self.identifiers += json_values(text)
            self.identifiers += [(k, v) for k, v, _, _ in find_identifiers(strings)]
        if layers.json:
            mini = minify_json(self.text)
            if mini is not None:
                self.replace_text(mini, "json")
        if layers.truncate and role == "tool":
            cut = truncate_observation(
                self.text,
                max_lines=layers.truncate_lines,
                head=layers.truncate_head,
                tail=layers.truncate_tail,
            )
            if cut is not None:
                self.identifiers += [(k, v) for k, v, _, _ in find_identifiers(self.text)]
                self.truncated = True
                self.replace_text(cut, "truncate")
        if layers.whitespace and maybe_whitespace(self.text):
            sensitive = looks_indentation_sensitive(self.text)
            norm = normalize_whitespace(self.text, prose=not sensitive)
            if norm != self.text:
                self.replace_text(norm, "whitespace")


def _segments(
    pieces: list[Piece], draft: _Draft
) -> tuple[list[tuple[str, ...]], list[tuple[Features, ...]]]:
    """Each piece's segments (sentences or lines; a preserved piece by line) and their
    features; the pieces' identifiers join the draft's."""
    segments: list[tuple[str, ...]] = []
    feats: list[tuple[Features, ...]] = []
    for p, found in zip(pieces, found_per_piece(pieces, draft.text), strict=True):
        if not p.keep:
            segs = segments_of(p)
        elif "\n" in p.text.rstrip("\n"):
            segs = p.text.splitlines(keepends=True)
        else:
            segs = [p.text]
        if not draft.truncated and not draft.is_json:
            draft.identifiers += [(kind, value) for kind, value, _, _ in found]
        flags = Flags.of(p.text) if len(segs) > 4 else ALL_FLAGS
        weight = p.weight * (POLICY.preserved_weight if p.keep else 1.0)
        segments.append(tuple(segs))
        feats.append(tuple(segment_features(segs, found, flags, weight)))
    return segments, feats
