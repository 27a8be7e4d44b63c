"""Stage 1b, the horizon: older messages far past the budget are judged by a glance.

A compaction of a history many times its budget keeps a few sentences of each
thousand older messages; analysing every one of them in full (layers, adapters,
segments, per-sentence features) is most of its cost. Past the horizon (the newest
older messages that fill ``POLICY.horizon`` budgets, and at least
``POLICY.horizon_floor`` tokens) a message gets a :class:`Glance` instead: its
identifiers, content words, names, numbers, errors and decisions, found once over its
whole text. Those features rank it; the best, until their tokens fill
``POLICY.candidates`` budgets, get the full analysis and compete in the selection like
any other; the rest are folded with only their identifiers and words counted (in the
note's list and in the words' rarity). Below the horizon, nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from ...messages import Message, speaker_tag
from ...text.adapters import Piece
from ...text.primitives import find_identifiers
from ...text.scoring import Features, ScoreContext, combine_all, segment_features
from .analysis import call_identifiers, echo_of
from .plan import Plan
from .policy import POLICY

__all__ = ["Glance", "Horizon", "candidates", "glance", "glanced_plan", "horizon"]


def _uncut(_: Message) -> None:
    """No message is cut (a horizon without layers)."""
    return None


@dataclass(frozen=True, slots=True)
class Glance:
    """What one pass over a message's whole text finds: enough to rank it and to count
    its identifiers and words, nothing to select from. A long tool result is judged by
    what the layers leave of it (its lines that stand out), ``share`` of its tokens."""

    features: Features
    identifiers: tuple[tuple[str, str], ...]
    echo: float
    share: float = 1.0


def glance(m: Message, vocabulary: dict[str, str], cut: str | None = None) -> Glance:
    """The message's glance (of ``cut``, what the layers leave of it, when they cut
    it); its words and identifiers are interned in ``vocabulary`` (one string per word
    across the history, not one per message)."""
    text = m.text
    found = list(find_identifiers(text))
    shown = found if cut is None else list(find_identifiers(cut))
    f = segment_features([text if cut is None else cut], shown)[0]
    words = tuple(map(vocabulary.setdefault, f.content, f.content))
    ids = [(kind, value) for kind, value, _, _ in found]
    ids += call_identifiers(m.tool_calls)
    shared = tuple([(kind, vocabulary.setdefault(value, value)) for kind, value in ids])
    features = Features(words, f.base, f.factor, f.signal, "", f.names)  # not _replace: slow
    share = 1.0 if cut is None else min(len(cut) / max(len(text), 1), 1.0)
    return Glance(features, shared, echo_of(m.role), share)


@dataclass(frozen=True)
class Horizon:
    """Which older messages are analysed in full (``near``, in order) and which are
    glanced (``far``, each with its glance)."""

    near: list[int]
    far: dict[int, Glance]


def horizon(
    messages: Sequence[Message],
    tokens: Sequence[int],
    old_idx: Sequence[int],
    budget: int,
    keep: frozenset[int],
    cut: Callable[[Message], str | None] = _uncut,
) -> Horizon:
    """Split the older messages ``old_idx`` at the horizon; those in ``keep`` (the
    task, earlier notes) are always near; ``cut`` gives what the layers leave of a
    message they cut."""
    reach = max(POLICY.horizon * budget, POLICY.horizon_floor)
    seen = 0
    past = 0  # old_idx[:past] lie past the horizon
    for k in range(len(old_idx) - 1, -1, -1):
        seen += tokens[old_idx[k]]
        if seen > reach:
            past = k + 1
            break
    vocabulary: dict[str, str] = {}
    far = {
        i: glance(messages[i], vocabulary, cut(messages[i]))
        for i in old_idx[:past]
        if i not in keep
    }
    return Horizon([i for i in old_idx if i not in far], far)


def candidates(
    far: dict[int, Glance], tokens: Sequence[int], ctx: ScoreContext, budget: int
) -> list[int]:
    """The glanced messages worth a full analysis: the most valuable for their length
    (what the layers leave of it), until those lengths fill ``POLICY.candidates``
    budgets."""
    room = POLICY.candidates * budget
    power = POLICY.candidate_length
    order = list(far)
    values = combine_all([far[i].features for i in order], ctx)
    size = {i: tokens[i] * far[i].share for i in order}
    rank = sorted(
        zip(order, values, strict=True),
        key=lambda iv: (-iv[1] / max(size[iv[0]], POLICY.min_cost) ** power, iv[0]),
    )
    out: list[int] = []
    for i, _ in rank:
        if room <= 0:
            break
        out.append(i)
        room -= size[i]
    return sorted(out)


#: What every glanced plan shares (read only: selection never chooses a segment that
#: scores nothing, so it changes only its ``chosen``).
_NOTHING = ((0.0,),)
_GLANCED = ("horizon:glanced",)
_SAVED_NOTHING: Mapping[str, int] = MappingProxyType({})


def glanced_plan(m: Message, i: int, g: Glance) -> Plan:
    """A folded message known by its glance: one segment that is never chosen (it
    scores nothing), its identifiers for the note's list."""
    return Plan(
        i,
        speaker_tag(m),
        (Piece(m.text, keep=False),),
        ((m.text,),),
        _NOTHING,
        ((g.features.content,),),
        [[False]],
        (),
        (),
        [],
        _GLANCED,
        1.0,
        g.identifiers,
        g.echo,
        savings=_SAVED_NOTHING,
    )
