"""Stage 1, analysis: what can be known of one message alone (its layers, adapter
pieces, segments and their features, tool calls, identifiers), memoized by content so
that the next turn re-analyses only new messages."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import accumulate, chain, groupby
from operator import itemgetter
from typing import Any, Literal, NamedTuple, TypeVar, cast

from ..._state import LRU, interned, memo, own_memo
from ...messages import Message, ToolCall, speaker_tag
from ...result import is_note
from ...text.adapters import FormatAdapter, Piece, adapters, registry_version, split_message_text
from ...text.layers import (
    Layers,
    looks_indentation_sensitive,
    maybe_whitespace,
    minify_json,
    normalize_whitespace,
)
from ...text.primitives import find_identifiers, json_strings, json_values
from ...text.scoring import (
    ALL_FLAGS,
    Features,
    Flags,
    ScoreContext,
    column_scores,
    features,
    found_per_piece,
    segment_features,
    segments_of,
    standing,
)
from .policy import POLICY

__all__ = ["Analysis", "Analyzer", "Columns", "PieceRow", "call_identifiers", "echo_of"]

V = TypeVar("V")

#: A :class:`Piece` as a plain tuple (``Piece(*row)`` reads it back).
PieceRow = tuple[str, bool, Literal["prose", "lines"], float]


class Columns(NamedTuple):
    """Segments' :class:`Features`, as columns of strings and numbers: a memo keeps
    the columns themselves, flat tuples, which the garbage collector stops tracking
    in the first collections that see them (see ``Stored``)."""

    content: tuple[str, ...]  # every segment's content words, one segment after another
    sizes: tuple[int, ...]  # how many each segment has
    base: tuple[float, ...]
    factor: tuple[float, ...]
    signal: tuple[bool, ...]
    line: tuple[str, ...]
    names: tuple[str, ...]  # every segment's names, one segment after another
    named: tuple[int, ...]  # how many each segment has

    @classmethod
    def of(cls, feats: Sequence[Features]) -> Columns:
        """The columns of ``feats``, in order."""
        if not feats:
            return _NO_COLUMNS
        content, base, factor, signal, line, names = zip(*feats, strict=True)
        return cls(
            tuple(chain.from_iterable(content)),
            tuple(map(len, content)),
            base,
            factor,
            signal,
            line,
            tuple(chain.from_iterable(names)),
            tuple(map(len, names)),
        )

    @classmethod
    def joined(cls, parts: Sequence[Sequence[Any]], at: int = 0) -> Columns:
        """The columns of ``parts`` (each holding them in order from index ``at``),
        one part after another."""
        columns = range(at, at + len(cls._fields))
        return cls._make(tuple(chain.from_iterable(map(itemgetter(k), parts))) for k in columns)

    def features(self) -> list[Features]:
        """Each segment's :class:`Features`, in order."""
        cols = (self.base, self.factor, self.signal, self.line, self.named_in())
        return list(map(_features, zip(self.words(), *cols, strict=True)))

    def words(self) -> list[tuple[str, ...]]:
        """Each segment's content words, in order."""
        return _cut(self.content, self.sizes)

    def named_in(self) -> list[tuple[str, ...]]:
        """Each segment's names, in order."""
        return _cut(self.names, self.named) if self.names else [()] * len(self.named)

    def scores(self, ctx: ScoreContext, words: Iterable[tuple[str, ...]]) -> list[float]:
        """Each segment's :func:`combine` score in ``ctx`` (``words``: :meth:`words`)."""
        return column_scores(
            ctx, words, self.base, self.factor, self.signal, self.line, self.named_in()
        )


_NO_COLUMNS = Columns((), (), (), (), (), (), (), ())
#: A row of a :class:`Features`' fields as one (``Features._make`` without its Python
#: call: a compaction reads thousands).
_features = cast("Callable[[tuple[Any, ...]], Features]", partial(tuple.__new__, Features))
#: Columns read back from a stored analysis (``Columns._make`` without its Python call).
_columns = cast("Callable[[tuple[Any, ...]], Columns]", partial(tuple.__new__, Columns))


def _cut(flat: Sequence[V], sizes: Sequence[int]) -> list[Any]:
    """``flat`` cut in runs of ``sizes`` (slices of it: tuples of a tuple)."""
    ends = list(accumulate(sizes))
    return list(map(flat.__getitem__, map(slice, [0, *ends], ends)))


@dataclass(frozen=True)
class Analysis:
    """The part of a plan that depends on the message alone (cached across calls)."""

    tag: str
    pieces: tuple[PieceRow, ...]  # Piece(*row)
    counts: tuple[int, ...]  # how many segments each piece has
    segments: tuple[str, ...]  # every piece's, one piece after another
    features: Columns  # the segments'
    calls: tuple[ToolCall, ...]
    call_features: Columns
    reasons: tuple[str, ...]
    cpt: float
    identifiers: tuple[tuple[str, str], ...]
    echo: float
    savings: Mapping[str, int]
    words: tuple[str, ...]  # content words (each once), for the conversation's word rarity
    alike: tuple[str, ...] = ()  # identifiers shown only on lines like most others of a
    # long output (an INFO line's request id), or on lines the layers cut as alike

    def per_piece(self, flat: Sequence[V]) -> list[Sequence[V]]:
        """``flat``, one item per segment, cut piece by piece."""
        return _cut(flat, self.counts)


#: An :class:`Analysis` as a memo keeps it: a tuple of strings, numbers and flat
#: tuples of them, nothing nested deeper (its pieces, calls, identifiers and savings
#: flattened, its features spliced in as columns), keyed by strings and numbers
#: only (the layers and adapters as :func:`interned` numbers). The garbage collector
#: stops tracking a plain tuple of untracked items, one level of nesting per
#: collection that sees it, inner tuples first: two levels are untracked by the
#: collections of the young generations, so a memo's thousands of entries never
#: reach the oldest one, whose full collections (the pauses a long session feels)
#: they would otherwise lengthen and make more frequent. (Marshalled bytes would be
#: untracked at once, but reading one back costs twenty times as much.)
Stored = tuple[Any, ...]

_ANALYSES: LRU[Stored] = memo(5_000)
#: A note's lines, analysed one by one (see :meth:`Analyzer._note`): two notes' worth,
#: shared by the process's sessions; a session also keeps the lines its own turns read
#: (an :class:`OwnMemo`), so that sessions compacting by turns do not evict each other's.
_LINES: LRU[Stored] = memo(8_000)
#: Long notes, joined from their lines: a note is read by the work ahead after the
#: compaction that wrote it and by the next compaction, never again (the next note
#: replaces it), so a few are kept apart, not thousands of messages' worth of them.
_NOTES: LRU[Stored] = memo(16)
#: Every character ``str.splitlines`` breaks at (one of them counted per line: no
#: message the layers cut is taken for one they leave be).
_LINE_BREAKS = ("\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
#: What the layers leave of long tool results (see :meth:`Analyzer.cut`).
_CUTS: LRU[str | None] = memo(512)

_COLUMNS = len(Columns._fields)
#: Where a stored analysis keeps each field (its features' and its calls' features'
#: columns spliced in at ``_FEATURES`` and ``_CALL_FEATURES``).
_TAG, _PIECES, _COUNTS, _SEGMENTS, _FEATURES = range(5)
_CALLS = _FEATURES + _COLUMNS
_CALL_FEATURES = _CALLS + 1
_REASONS = _CALL_FEATURES + _COLUMNS
_CPT, _IDENTIFIERS, _ECHO, _SAVED, _WORDS, _ALIKE = range(_REASONS + 1, _REASONS + 7)


def _stored(a: Analysis) -> Stored:
    return (
        a.tag,
        tuple(chain.from_iterable(a.pieces)),
        a.counts,
        a.segments,
        *a.features,
        tuple(x for c in a.calls for x in (c.id, c.name, c.arguments, c.type)),
        *a.call_features,
        a.reasons,
        a.cpt,
        tuple(chain.from_iterable(a.identifiers)),
        a.echo,
        tuple(chain.from_iterable(a.savings.items())),
        a.words,
        a.alike,
    )


def _restored(row: Stored) -> Analysis:
    return Analysis(
        row[_TAG],
        _rows(row[_PIECES], 4),
        row[_COUNTS],
        row[_SEGMENTS],
        _columns(row[_FEATURES:_CALLS]),
        tuple(ToolCall(*c) for c in _rows(row[_CALLS], 4)),
        _columns(row[_CALL_FEATURES:_REASONS]),
        row[_REASONS],
        row[_CPT],
        _rows(row[_IDENTIFIERS], 2),
        row[_ECHO],
        dict(_rows(row[_SAVED], 2)),
        row[_WORDS],
        row[_ALIKE] if len(row) > _ALIKE else (),
    )


def _rows(flat: Iterable[Any], width: int) -> tuple[Any, ...]:
    """``flat``'s items in rows of ``width``: a flattened part of a stored analysis
    (pieces, calls, pairs) back."""
    items = iter(flat)
    return tuple(zip(*[items] * width, strict=True))


class Analyzer:
    """Analyses messages with one set of layers and adapters."""

    def __init__(
        self,
        layers: Layers,
        adapters: Sequence[FormatAdapter] | None,
        named: re.Pattern[str] | None = None,
    ) -> None:
        self.layers = layers
        self.adapters = adapters
        self.named = named  # the identifiers the task names: a long tool output keeps
        # the lines that name them (see ``truncate_observation``)
        self._key = (-1, -1)  # (registry version, config number), made on first use

    def truncates(self, m: Message) -> bool:
        """Whether the layers cut ``m`` (a tool result of many lines): what is left of
        it depends on the identifiers the task names."""
        layers = self.layers
        return (
            layers.truncate
            and m.role == "tool"
            and isinstance(m.content, str)
            and sum(map(m.content.count, _LINE_BREAKS)) >= layers.truncate_lines
        )

    def cut(self, m: Message) -> str | None:
        """What the layers leave of a long tool result's text (its lines that stand
        out, see ``truncate_observation``); ``None`` for a message they do not cut.
        Memoized: a compaction's horizon glances at it every time."""
        if not self.truncates(m):
            return None
        named = self.named
        key = (m.fingerprint, self._config(), named.pattern if named is not None else "")
        return _CUTS.cached(key, self.layers.cut, m.text, named)

    def __call__(self, m: Message, tok: int) -> Analysis:
        """What does not depend on the rest of the conversation, cached by content (and,
        for a tool result the layers cut, by what the task names)."""
        named = self.named.pattern if self.named is not None and self.truncates(m) else ""
        key = (m.fingerprint, tok, self._config(), named)
        lines = tok >= POLICY.note_lines_from and isinstance(m.content, str) and is_note(m)
        table = _NOTES if lines else _ANALYSES
        stored = table.get(key)
        if stored is not None:
            return _restored(stored)
        made = self._note(m, tok) if lines else self._analyse(m, tok)
        table.put(key, _stored(made))
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
        draft.apply_layers(self.layers, m.role, self.named)
        pieces = self._pieces(draft)
        # A note's lines were chosen already: comparing them says nothing of worth.
        segments, feats, distinct, compared = _segments(pieces, draft, not is_note(m))
        every = list(chain.from_iterable(feats))
        alike: tuple[str, ...] = ()
        if compared or draft.truncated:  # a long output: its lines told apart
            alike = tuple(sorted({v for _, v in draft.identifiers} - distinct))
        return Analysis(
            speaker_tag(m),
            tuple((p.text, p.keep, p.mode, p.weight) for p in pieces),
            tuple(map(len, segments)),
            tuple(chain.from_iterable(segments)),
            Columns.of(every),
            calls,
            Columns.of([features(t[: POLICY.call_scan_chars]) for t in call_texts]),
            tuple(draft.reasons),
            draft.cpt,
            tuple(draft.identifiers),
            echo_of(m.role),
            dict(draft.savings),
            tuple(set().union(*(f.content for f in every))),
            alike,
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
        for flat in filter(None, map(itemgetter(_SAVED), rows)):  # most lines save none
            items = iter(flat)
            for kind, chars in zip(items, items, strict=True):  # in characters: see _line
                saved[kind] += chars
        pieces, counts = _joined_pieces(rows)
        return Analysis(
            speaker_tag(m),
            pieces,
            counts,
            tuple(chain.from_iterable(row[_SEGMENTS] for row in rows)),
            Columns.joined(rows, _FEATURES),
            (),
            Columns.of(()),
            tuple(dict.fromkeys(r for row in rows for r in row[_REASONS])),
            cpt,
            _rows(chain.from_iterable(map(itemgetter(_IDENTIFIERS), rows)), 2),
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
        own = own_memo()
        stored = None if own is None else own.get(key)
        if stored is None:
            stored = _LINES.get(key)
            if stored is None:
                stored = _stored(self._line_alone(line, role))
                _LINES.put(key, stored)
            if own is not None:
                own.put(key, stored)
        return stored

    def _line_alone(self, line: str, role: str) -> Analysis:
        body = line.rstrip("\n")
        a = self._analyse(Message(role, body), len(body) + 3)
        end = line[len(body) :]
        if end and a.counts and a.counts[-1]:
            *rows, last = a.pieces
            a = replace(
                a,
                pieces=(*rows, (last[0] + end, *last[1:])),
                segments=(*a.segments[:-1], a.segments[-1] + end),
            )
        elif end:  # no segment to end the line (a blank one): the break alone is one
            blank = Columns.of(segment_features([end], []))
            a = replace(
                a,
                pieces=(*a.pieces, (end, False, "prose", 1.0)),
                counts=(*a.counts, 1),
                segments=(*a.segments, end),
                features=Columns.joined([a.features, blank]),
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


def _joined_pieces(
    lines: Sequence[Stored],
) -> tuple[tuple[PieceRow, ...], tuple[int, ...]]:
    """The pieces of lines analysed one by one (as the memo keeps them) as one text's,
    and how many segments each has: a run of pieces alike (kept or not, mode, weight)
    is one piece, so a note of a thousand lines is a few pieces, as when it was
    analysed whole."""
    flat = tuple(chain.from_iterable(map(itemgetter(_PIECES), lines)))
    sizes = chain.from_iterable(map(itemgetter(_COUNTS), lines))
    kinds = zip(flat[1::4], flat[2::4], flat[3::4], strict=True)
    pieces: list[PieceRow] = []
    counts: list[int] = []
    for kind, run in groupby(zip(kinds, flat[0::4], sizes, strict=True), itemgetter(0)):
        items = list(run)
        pieces.append(("".join(map(itemgetter(1), items)), *kind))
        counts.append(sum(map(itemgetter(2), items)))
    return tuple(pieces), tuple(counts)


def echo_of(role: str) -> float:
    """How much a mention of an identifier in a message of ``role`` counts: ids people
    (and the agent) repeat matter more than ids in tool output."""
    return 1.0 if role == "tool" else POLICY.people_echo


def _calls(
    m: Message, layers: Layers
) -> tuple[tuple[ToolCall, ...], list[str], list[tuple[str, str]]]:
    """The message's tool calls (arguments minified in the form clients write them, so
    that a wrapper that keeps arguments as objects, as LangChain does, sends what was
    counted), their texts, and the identifiers they act on (counted twice: what the
    assistant acted on matters)."""
    calls = m.tool_calls
    if layers.json and calls:
        calls = tuple(
            ToolCall(c.id, c.name, minify_json(c.arguments, spaced=True) or c.arguments, c.type)
            for c in calls
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

    def apply_layers(self, layers: Layers, role: str, named: re.Pattern[str] | None) -> None:
        """JSON minified, tool output truncated (keeping the lines that name what
        ``named`` matches), whitespace normalized, as configured."""
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
        if role == "tool":
            cut = layers.cut(self.text, named)
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
    pieces: list[Piece], draft: _Draft, compare: bool
) -> tuple[list[tuple[str, ...]], list[tuple[Features, ...]], set[str], bool]:
    """Each piece's segments (sentences or lines; a preserved piece by line) and their
    features; the pieces' identifiers join the draft's. With them, the identifiers on
    segments unlike the others (every segment when not ``compare``, as for an earlier
    note, or of a message too short to compare them, see :func:`standing`), and
    whether they were compared."""
    segments: list[tuple[str, ...]] = []
    for p in pieces:
        if not p.keep:
            segments.append(tuple(segments_of(p)))
        elif "\n" in p.text.rstrip("\n"):
            segments.append(tuple(p.text.splitlines(keepends=True)))
        else:
            segments.append((p.text,))
    feats: list[tuple[Features, ...]] = []
    stands = standing(segments) if compare else [None] * len(segments)
    distinct: set[str] = set()
    found_in = found_per_piece(pieces, draft.text)
    for p, segs, found, st in zip(pieces, segments, found_in, stands, strict=True):
        if not draft.truncated and not draft.is_json:
            draft.identifiers += [(kind, value) for kind, value, _, _ in found]
        if st is None:
            distinct.update(value for _, value, _, _ in found)
        else:
            distinct.update(_on_distinct(segs, found, st))
        flags = Flags.of(p.text) if len(segs) > 4 else ALL_FLAGS
        weight = p.weight * (POLICY.preserved_weight if p.keep else 1.0)
        feats.append(tuple(segment_features(segs, found, flags, weight, st)))
    return segments, feats, distinct, bool(stands) and stands[0] is not None


def _on_distinct(
    segments: Sequence[str], found: Sequence[tuple[str, str, int, int]], st: Sequence[float]
) -> Iterator[str]:
    """The identifiers of ``found`` (offsets into the joined ``segments``) that lie on
    a segment of full standing (one unlike the others)."""
    ends = list(accumulate(map(len, segments)))
    k = 0
    for _, value, start, _ in found:
        while k < len(ends) - 1 and start >= ends[k]:
            k += 1
        if st[k] >= 1.0:
            yield value
