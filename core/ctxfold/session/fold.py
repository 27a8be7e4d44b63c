"""One compaction of a session: a reversible round over the previous prefix and the
messages since, down to a target, and what it did with each history message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..contract import Conversation, Strategy, WordCounts
from ..messages import Message
from ..result import NOTE_KEY, Decision
from ..reversible.rounds import RoundSettings, compact_reversibly
from ..tokens import TokenCounter
from ..units import group_units
from .history import History
from .log import Fold

__all__ = ["compact", "open_start"]


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


def compact(
    strategy: Strategy,
    settings: RoundSettings,
    counter: TokenCounter,
    history: History,
    previous: Fold | None,
    cut: int,
    target: int,
    tokens: Sequence[int],
    rarity: WordCounts | None = None,
) -> Fold:
    """Compact the previous prefix and ``history[previous.upto:cut]`` (whose token
    counts are ``tokens``) to at most ``target`` tokens in a reversible round (raises
    :class:`ctxfold.BudgetError` when what must be kept cannot fit); ``rarity``: the
    word counts of the whole history."""
    start = previous.upto if previous else 0
    prefix = previous.prefix if previous else ()
    inputs = [*prefix, *history[start:cut]]
    sources = [*(previous.sources if previous else ()), *range(start, cut)]
    conv = Conversation.of(
        inputs,
        budget=target,
        counter=counter,
        grouping=group_units(inputs),
        rarity=rarity,
        tokens=[*map(counter.count_message, prefix), *tokens],
    )
    records = history.rows(start, cut).after(len(prefix))  # stored: not encoded again
    done, round_id = compact_reversibly(strategy, conv, settings, records)
    out = list(done.messages)
    decisions = tuple(
        Decision(src, d.action, d.reason, d.tokens_before, d.tokens_after, d.step, d.flags)
        for d in done.trace
        if (src := sources[d.index]) is not None
    )
    return Fold(
        cut,
        tuple(out),
        _sources(inputs, sources, out, done.trace, round_id),
        decisions,
        round_id,
        dict(done.savings),
    )


def _sources(
    inputs: Sequence[Message],
    sources: Sequence[int | None],
    out: Sequence[Message],
    trace: Sequence[Decision],
    round_id: str,
) -> tuple[int | None, ...]:
    """The history index each output message stands for (``None`` for the round's note
    or block): outputs that are not new follow the trace's shown decisions in order."""
    shown = iter([d.index for d in trace if d.tokens_after > 0])
    inputs_at = {id(m): k for k, m in enumerate(inputs)}
    result: list[int | None] = []
    for m in out:
        if id(m) in inputs_at:
            result.append(sources[inputs_at[id(m)]])
            next(shown, None)
            continue
        meta = m.metadata.get(NOTE_KEY)
        if isinstance(meta, Mapping) and meta.get("round") in (round_id, None):
            result.append(None)  # the round's note or block
            continue
        k = next(shown, None)
        result.append(None if k is None else sources[k])
    return tuple(result)
