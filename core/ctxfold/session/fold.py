"""One compaction of a session: a reversible round over the previous prefix and the
messages since, down to a target, and what it did with each history message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..contract import Conversation, Strategy, WordCounts
from ..messages import ContentPart, Message, ToolCall
from ..result import Action, Decision, sources_of
from ..reversible.records import message_from_record, message_record
from ..reversible.rounds import Round, RoundSettings, make_round
from ..tokens import TokenCounter
from ..units import group_units
from .history import History

__all__ = ["Counts", "Fold", "Intake", "compact", "counting", "intake", "open_start"]


@dataclass(frozen=True)
class Fold:
    """What a compaction left: the first ``upto`` messages of the history now stand as
    ``prefix``; ``sources[j]`` is the history index prefix message ``j`` stands for
    (``None`` for a note); ``decisions`` what the compaction did with each history
    message it took in (kept ones are not listed); ``round_id`` names its round;
    ``savings`` the tokens each layer and the selection saved (as
    :attr:`ctxfold.CompressionStats.savings`; empty in a record stored before it);
    ``room`` the tokens the render that made it asked for (the budget less what a
    query's passages wanted; ``None`` in a record stored before it), so that a render
    with nothing new does not fold the prefix again for the same room; ``filled``
    that it filled that room because what it took in arrived at once (see
    :func:`.settings.fill_for`), so that a question asked before anything new arrives
    gets its room too."""

    upto: int
    prefix: tuple[Message, ...]
    sources: tuple[int | None, ...]
    decisions: tuple[Decision, ...]
    round_id: str
    savings: Mapping[str, int] = field(default_factory=dict)
    room: int | None = None
    filled: bool = False

    def record(self) -> dict[str, Any]:
        """The JSON form stored under ``<epoch>:c:<k>``."""
        room = {} if self.room is None else {"room": self.room}
        filled = {"filled": True} if self.filled else {}
        return {
            **room,
            **filled,
            "upto": self.upto,
            "prefix": [message_record(m) for m in self.prefix],
            "sources": list(self.sources),
            "decisions": [
                [d.index, d.action, d.reason, d.tokens_before, d.tokens_after, d.step, d.flags]
                for d in self.decisions
            ],
            "round": self.round_id,
            "savings": dict(self.savings),
        }

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> Fold:
        """The fold stored as ``r`` (see :meth:`record`)."""
        return cls(
            upto=int(r["upto"]),
            prefix=tuple(message_from_record(m) for m in r["prefix"]),
            sources=tuple(r["sources"]),
            decisions=tuple(_decision(*d) for d in r["decisions"]),
            round_id=str(r["round"]),
            savings={str(k): int(v) for k, v in dict(r.get("savings", {})).items()},
            room=None if r.get("room") is None else int(r["room"]),
            filled=r.get("filled") is True,
        )


#: Messages any two counters count differently (scripts, code, numbers, a name, a tool
#: call, an image): what a counter gives them tells its counting apart (see
#: :func:`counting`).
_TELLING = (
    Message("system", "Résumé: naïve café, 東京の天気は晴れです。 Привет, мир! 🙂 ≥ ½"),
    Message("user", "def f(x):\n    return x ** 2  # 12,345.67\n\tand   spaces  ", name="ana"),
    Message("assistant", None, tool_calls=(ToolCall("c1", "get_weather", '{"city": "Zürich"}'),)),
    Message("user", (ContentPart("text", "See:"), ContentPart("image_url", extra='{"u": "x"}'))),
)


def counting(counter: TokenCounter, redact: bool) -> list[Any]:
    """What tells a session's counting apart, as :class:`Counts` records it: its
    counter's name, whether it redacts (it counts masked messages), and what the
    counter gives messages any two counters count differently: a session reopened with
    another counter, or other overheads, counts its history again."""
    return [counter.name, redact, *map(counter.count_message, _TELLING)]


@dataclass(frozen=True)
class Counts:
    """The token counts a compaction stores: of the history messages it took in after
    the compaction before it (``tokens``), and what counted them (``by``: whatever the
    session says tells its counting apart, compared whole on reading)."""

    tokens: list[int]
    by: list[Any]

    def record(self) -> dict[str, Any]:
        """The JSON form a compaction record holds under ``counts``."""
        return {"tokens": self.tokens, "by": self.by}

    @classmethod
    def from_record(cls, value: Any) -> Counts | None:
        """The counts stored as ``value``, or None where there are none that hold."""
        if not isinstance(value, dict):
            return None
        tokens, by = value.get("tokens"), value.get("by")
        if not isinstance(by, list) or not isinstance(tokens, list):
            return None
        if not all(type(n) is int and n >= 0 for n in tokens):
            return None
        return cls(tokens, by)


def _decision(
    index: int, action: Action, reason: str, before: int, after: int, step: str, flags: Any
) -> Decision:
    return Decision(index, action, reason, before, after, step, tuple(flags))


def open_start(messages: Sequence[Message], start: int) -> int:
    """Where the unit still waiting for tool results begins among ``messages[start:]``
    (``len(messages)`` when none is): a compaction stops there, so a call and its
    results are never split, even when the results arrive after the render."""
    tail = messages[start:]
    grouping = group_units(tail)
    if not grouping.units or not grouping.dangling_calls:
        return len(messages)
    last = grouping.units[-1]
    if any(i >= last.start for i, _ in grouping.dangling_calls):
        return start + last.start
    return len(messages)


@dataclass(frozen=True)
class Intake:
    """What one session compaction takes in: the previous prefix and the history since
    (up to ``cut``) as one conversation, the history index each input stands for
    (``None`` for a note), and their stored records."""

    conv: Conversation
    cut: int
    sources: tuple[int | None, ...]
    records: Sequence[bytes | None]

    def fixed(self, pin_roles: Sequence[str]) -> int:
        """The tokens no compaction of it goes below: the request's own and the
        messages a strategy pinning ``pin_roles`` keeps whole."""
        return self.conv.pinned(pin_roles)[2]


def intake(
    counter: TokenCounter,
    history: History,
    previous: Fold | None,
    cut: int,
    tokens: Sequence[int],
    rarity: WordCounts | None = None,
    task: str = "",
) -> Intake:
    """The previous prefix and ``history[previous.upto:cut]`` (whose token counts are
    ``tokens``) as a compaction takes them in; ``rarity``: the word counts of the whole
    history, ``task``: what its user first said."""
    start = previous.upto if previous else 0
    prefix = previous.prefix if previous else ()
    inputs = [*prefix, *history[start:cut]]
    conv = Conversation.of(
        inputs,
        budget=1,  # each target sets its own
        counter=counter,
        grouping=group_units(inputs),
        rarity=rarity,
        tokens=[*map(counter.count_message, prefix), *tokens],
        task=task,
    )
    sources = (*(previous.sources if previous else ()), *range(start, cut))
    records = history.rows(start, cut).after(len(prefix))  # stored: not encoded again
    return Intake(conv, cut, sources, records)


def compact(
    strategy: Strategy, settings: RoundSettings, taken: Intake, target: int, room: int
) -> tuple[Fold, Round]:
    """Compact what was ``taken`` in, the strategy in ``room`` tokens, into a
    reversible round of at most ``target`` tokens when it fits (raises
    :class:`ctxfold.BudgetError` when what must be kept cannot fit): the fold, and the
    round it is made of (stored when the fold is kept)."""
    conv, sources = taken.conv.with_budget(target), taken.sources
    made = make_round(strategy, conv, room, settings, taken.records)
    done, round_id = made.compaction, made.round_id
    out = list(done.messages)
    shows = sources_of(conv.messages, out, done.trace, round_id)  # the input each shows
    decisions = tuple(
        Decision(src, d.action, d.reason, d.tokens_before, d.tokens_after, d.step, d.flags)
        for d in done.trace
        if (src := sources[d.index]) is not None
    )
    fold = Fold(
        taken.cut,
        tuple(out),
        tuple(None if j is None else sources[j] for j in shows),
        decisions,
        round_id,
        dict(done.savings),
    )
    return fold, made
