"""Stage 2, plan: how each older message can be shown in this conversation (its
segments scored against the conversation's word rarity and goal), which are copies of
later messages, and which identifiers are worth listing in the note."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from ...messages import Message, ToolCall
from ...result import NOTE_HEAD, NOTE_KEY, NOTE_MARK
from ...text.adapters import Piece
from ...text.primitives import KIND_WEIGHT, TokenSet
from ...text.scoring import FILLER, ScoreContext, combine_all
from .analysis import Analysis
from .families import families
from .policy import POLICY
from .state import STATE_HEADS

__all__ = [
    "SPEAKER_TAG",
    "TASK_KEY",
    "Carried",
    "Plan",
    "Pool",
    "id_cost",
    "id_value",
    "identifier_pool",
    "lines_repeated_later",
    "lookup",
    "make_plan",
    "mark_duplicates",
    "opening",
    "shown_text",
    "task_of",
]

#: What a copy of a later message shows in its place.
SAME_AS_LATER = "[same content as a later message]"


@dataclass(slots=True)
class Plan:
    """How one older message can be shown: its pieces and their selectable segments.

    Every piece is split into segments (sentences or lines); preserved pieces score
    higher. Tool calls are selectable too. A unit whose segments are all chosen stays in
    place (after layers and adapters); any other unit is condensed into the note.
    """

    index: int
    tag: str
    pieces: Sequence[Piece]
    segments: Sequence[Sequence[str]]
    scores: Sequence[Sequence[float]]
    words: Sequence[Sequence[tuple[str, ...]]]  # content words of each segment
    chosen: list[list[bool]]  # the only parts selection changes
    calls: tuple[ToolCall, ...]
    call_scores: Sequence[float]
    call_chosen: list[bool]
    reasons: Sequence[str]
    cpt: float
    identifiers: Sequence[tuple[str, str]] = ()  # (kind, value)
    echo: float = 1.0  # how much a mention here counts (tool output 1, people 2)
    note: bool = False  # an earlier note, folded again: its lines name their speakers
    deduplicated: bool = False
    savings: Mapping[str, int] = field(default_factory=dict)  # tokens, by layer
    alike: frozenset[str] = frozenset()  # see Analysis.alike

    def complete(self) -> bool:
        """Whether everything is chosen (the message can stay in place)."""
        return all(all(c) for c in self.chosen) and all(self.call_chosen)

    def anything(self) -> bool:
        """Whether anything is chosen."""
        return any(any(c) for c in self.chosen) or any(self.call_chosen)


def make_plan(
    a: Analysis,
    i: int,
    ctx: ScoreContext,
    *,
    note: bool = False,
    later: frozenset[str] | None = None,
    task: str = "",
) -> Plan:
    """How message ``i`` (analysed as ``a``) can be shown, scored for this conversation;
    a ``note`` folded again offers its content, not its furniture (see
    :func:`_furniture`) nor what the ``task`` line the next note opens with says; its
    lines a later message shows again (``later``) count less."""
    if later:
        ctx = replace(ctx, repeated_later=later)
    words = a.features.words()
    segments = a.per_piece(a.segments)
    scores = [list(row) for row in a.per_piece(a.features.scores(ctx, words))]
    if note:
        for segs, row in zip(segments, scores, strict=True):
            for si in _furniture(segs):
                row[si] = 0.0
            for si in _said_in(segs, task) if task else ():
                row[si] = 0.0
    call_scores = [v + POLICY.call_bonus for v in combine_all(a.call_features.features(), ctx)]
    return Plan(
        i,
        a.tag,
        [Piece(*row) for row in a.pieces],
        segments,
        scores,
        a.per_piece(words),
        [[False] * n for n in a.counts],
        a.calls,
        call_scores,
        [False] * len(a.calls),
        a.reasons,
        a.cpt,
        a.identifiers,
        a.echo,
        note,
        savings=a.savings,
        alike=frozenset(a.alike),
    )


#: The speaker's tag a note's line begins with: "Caroline: ", "tool result (bash): ".
# Starts only where a run of its characters starts (``match`` at 0 is unchanged): linear.
SPEAKER_TAG = re.compile(r"(?<![\w.' -])[\w.' -]{1,40}(?: \([^\n()]{1,60}\))?: ")
# A note's line that is no content: a head, its own or one an earlier round copied in
# after a speaker tag.
_FURNITURE = re.compile(rf"(?:{SPEAKER_TAG.pattern})?(?:{NOTE_HEAD.pattern})")


def _furniture(segments: Sequence[str]) -> list[int]:
    """The segments that make up a note's head lines and its working state's lines
    (the next note writes its own)."""
    out: list[int] = []
    line_start, inside = True, False
    for si, seg in enumerate(segments):
        if line_start:  # a head holds its mark: most lines need no match
            inside = (NOTE_MARK in seg and bool(_FURNITURE.match(seg))) or seg.startswith(
                STATE_HEADS
            )
        if inside:
            out.append(si)
        line_start = seg.endswith("\n")
    return out


#: A note's metadata field: the task's opening as the note showed it (``user: ...``).
#: The next note opens with it too, whatever else it folds.
TASK_KEY = "task"


def task_of(m: Message) -> str:
    """The task's opening an earlier note carries ("": none, or no note; a value
    edited into anything but text is none)."""
    meta = m.metadata.get(NOTE_KEY)
    value = meta.get(TASK_KEY) if isinstance(meta, Mapping) else None
    return value if isinstance(value, str) else ""


def opening(p: Plan, room: float) -> Iterator[tuple[int, int]]:
    """The (piece, segment) places of what a message opens with, in order, up to
    ``room`` tokens (by the plan's estimate; filler left out): a long task's title and
    first lines, shown before all else."""
    used = 0.0
    for pi, (segs, scores) in enumerate(zip(p.segments, p.scores, strict=True)):
        for si, (seg, score) in enumerate(zip(segs, scores, strict=True)):
            if score < FILLER:
                continue
            used += len(seg) / p.cpt
            if used > room:
                return
            yield pi, si


def _said_in(segments: Sequence[str], text: str) -> list[int]:
    """The segments whose words, less a speaker's tag, ``text`` holds already."""
    out: list[int] = []
    for si, seg in enumerate(segments):
        words = seg.strip()
        tag = SPEAKER_TAG.match(words)
        words = words[tag.end() :] if tag else words
        if len(words) >= 8 and words in text:
            out.append(si)
    return out


def lines_repeated_later(messages: list[Message], old_idx: list[int]) -> dict[int, frozenset[str]]:
    """For each older message, its lines that appear again in a later message (the
    last copy of a line is not among them: it is the one to keep)."""
    seen: set[str] = set()
    repeated: dict[int, frozenset[str]] = {}
    old = set(old_idx)
    for i in range(len(messages) - 1, -1, -1):
        text = messages[i].text
        if "\n" not in text:
            continue
        lines = {ln.strip() for ln in text.splitlines() if len(ln) >= POLICY.repeat_min_chars}
        if i in old:
            again = lines & seen
            if again:
                repeated[i] = frozenset(again)
        seen |= lines
    return repeated


def mark_duplicates(messages: list[Message], plans: dict[int, Plan]) -> None:
    """An older message whose whole text appears again later is left out."""
    later: set[str] = set()
    for i in range(len(messages) - 1, -1, -1):
        text = messages[i].text
        if len(text) < POLICY.dedup_min_chars:
            continue
        if i in plans and text in later:
            p = plans[i]
            p.pieces = [Piece(SAME_AS_LATER, keep=True)]
            p.segments, p.scores, p.chosen = [[SAME_AS_LATER]], [[POLICY.pointer_score]], [[False]]
            p.words = [[()]]
            p.deduplicated = True
            p.reasons = ["dedup:repeated_later"]
        later.add(text)


def shown_text(messages: Iterable[Message]) -> str:
    """What ``messages`` show a reader: each one's text and its tool calls' arguments."""
    return "\n".join(m.text + " " + " ".join(c.arguments for c in m.tool_calls) for m in messages)


def lookup(text: str, n: int) -> str | TokenSet:
    """``text`` itself for a few substring tests, its token set for many."""
    return TokenSet(text) if n > 32 and len(text) > 2000 else text


def id_cost(ident: str) -> float:
    """Estimated tokens of an identifier in the note's list, with its separator."""
    return (len(ident) + 2) / POLICY.chars_per_id_token


def id_value(ident: str, weight: float) -> float:
    """How much listing an identifier is worth against a sentence's value per token: its
    weight, discounted for a long one (by the square root: a path is worth more than a
    short id, but not in proportion to its length)."""
    short = POLICY.id_short
    return weight * POLICY.id_scale * math.sqrt(short / max(id_cost(ident), short))


class Carried(NamedTuple):
    """What an earlier note, folded again, carries of its list: each identifier's
    weight, those the conversation had used, and those only alike lines had shown."""

    weights: Mapping[str, float]
    used: frozenset[str] = frozenset()
    alike: frozenset[str] = frozenset()


class Pool(NamedTuple):
    """The identifiers worth listing, best first with their weights; those the
    conversation used (the task named them, a person or the agent wrote them, before an
    earlier note or since); and those only lines like most others of a long output
    showed (an INFO line's request id), which the list's share caps."""

    ranked: list[tuple[str, float]]
    used: frozenset[str]
    alike: frozenset[str] = frozenset()


def _openable(kind: str, value: str) -> bool:
    """Whether ``value`` names a file an agent can open: a path without a number (a
    directory listing's every line is alike, and any one may be read next; a route or a
    log's ``file:line`` has numbers, and its family stands for it)."""
    return kind == "path" and not any(c.isdigit() for c in value)


def identifier_pool(
    plans: dict[int, Plan],
    old_idx: list[int],
    task: int,
    carried: Mapping[int, Carried] | None = None,
) -> Pool:
    """Identifiers of older messages, the most worth listing first: by kind, by how
    often they recur, and those of the task statement before all others; the many
    of one shape a tool showed once each as one entry (see :mod:`.families`). ``carried``
    maps an earlier note's index to the weights its identifiers had when it listed
    them, and those used: folded again, they keep at least that weight (a note names
    each once, so by its own count they would lose to what came since) and stay used."""
    freq: dict[str, float] = defaultdict(float)
    kind_of: dict[str, str] = {}
    first: dict[str, int] = {}
    said: dict[str, int] = defaultdict(int)  # mentions by a person or the agent
    stands_out: set[str] = set()  # shown once at least on a line unlike the others
    for i in old_idx:
        echo = plans[i].echo
        note = plans[i].note  # an earlier note carries what it knew (see ``carried``)
        speaks = echo > 1.0 and not note
        alike = plans[i].alike
        for kind, value in plans[i].identifiers:
            freq[value] += echo
            kind_of.setdefault(value, kind)
            first.setdefault(value, i)
            if speaks:
                said[value] += 1
            if not note and value not in alike:
                stands_out.add(value)
    kept: dict[str, float] = {}
    used_before: set[str] = set()
    for i, (weights, used, was_alike) in (carried or {}).items():
        used_before |= used
        stands_out.update(v for v in weights if v not in was_alike)
        for value, w in weights.items():
            kept[value] = max(kept.get(value, 0.0), w)
            freq[value] = max(freq[value], 1.0)
            kind_of.setdefault(value, "id")
            first.setdefault(value, i)
    weight = {
        v: max(
            KIND_WEIGHT.get(kind_of[v], 1.0)
            * (1 + math.log(freq[v]))
            * (POLICY.task_id_boost if first[v] == task else 1.0),
            kept.get(v, 0.0),
        )
        for v in freq
    }
    # Used: written by a person or the agent (the task, a call's arguments), now or
    # before an earlier note; a tool's output alone, however often, is no use of it.
    uses = {v: said.get(v, 0) + (v in used_before) + (first[v] == task) for v in freq}
    for fam in families(list(freq), uses):
        best = max(weight.pop(v) for v in fam.members)
        entry = fam.entry
        weight[entry] = best
        first[entry] = first[fam.members[0]]
    ranked = sorted(weight, key=lambda v: (-weight[v], first[v], v))
    used = frozenset(v for v, n in uses.items() if n)
    alike = frozenset(
        v
        for v in weight
        if v not in stands_out and v not in used and not _openable(kind_of.get(v, ""), v)
    )
    return Pool([(v, weight[v]) for v in ranked], used, alike)
