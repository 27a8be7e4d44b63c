"""A strategy's output as a request strict chat APIs accept: where leaving messages
out put two turns of one role side by side, the left-out message before or a
one-line note in the other role keeps them apart (:func:`alternate`)."""

from __future__ import annotations

from collections.abc import Iterable

from ..contract import Compaction, Conversation, Overflow
from ..messages import Message
from ..result import Decision, earlier, note_message
from ..validity import SYSTEM_ROLES, clashes, turn_order_problems
from .base import overflow

__all__ = ["alternate"]


def alternate(
    conv: Conversation,
    done: Compaction,
    step: str,
    policy: Overflow,
    protect: Iterable[int] = (),
    *,
    make_room: bool = True,
) -> Compaction:
    """``done`` as a request strict chat APIs accept, when the input is one: where
    leaving messages out put two turns of one role side by side (or an assistant turn
    right after the system block), a one-line note in the other role says how many
    messages were left out there, so turns alternate and the conversation opens with
    the user. When the notes do not fit, the oldest kept units make room for them (never
    a pinned message, a note, a unit in ``protect`` or the newest unit); when nothing
    can, ``policy`` decides. ``make_room=False`` returns the notes over the budget
    instead, for a strategy that selects again with less room."""
    if turn_order_problems(conv.messages):
        return done  # the input itself is not a strict request: nothing to keep
    where = {id(m): i for i, m in enumerate(conv.messages)}
    unit_of = {i: u for u in conv.grouping.units for i in u.indices}
    fixed = {unit_of[i].start for i in protect}
    if done.messages and id(done.messages[-1]) in where:
        fixed.add(unit_of[where[id(done.messages[-1])]].start)
    out = list(done.messages)
    hidden = {d.index for d in done.trace if d.tokens_after == 0}
    dropped: set[int] = set()
    while True:
        bridged, back = _bridged(conv, out, where, hidden)
        need = conv.counter.count_messages(bridged)
        if len(bridged) == len(out) or need <= conv.budget or not make_room:
            break
        spare = next(
            (
                unit_of[where[id(m)]]
                for m in out
                if id(m) in where
                and m.role not in SYSTEM_ROLES
                and unit_of[where[id(m)]].start not in fixed
            ),
            None,
        )
        if spare is None:
            overflow(policy, required=need, budget=conv.budget, what="notes that keep turns apart")
            break
        dropped.update(spare.indices)
        hidden.update(spare.indices)
        out = [m for m in out if where.get(id(m), -1) not in spare.indices]
    trace = [
        Decision(d.index, "dropped", "over_budget", d.tokens_before, 0, step)
        if d.index in dropped
        else Decision(d.index, "kept", "turn_order", d.tokens_before, d.tokens_before, step)
        if d.index in back
        else d
        for d in done.trace
    ]
    return Compaction(bridged, trace, done.savings)


def _bridged(
    conv: Conversation, out: list[Message], where: dict[int, int], hidden: set[int]
) -> tuple[list[Message], set[int]]:
    """``out`` with a turn of the other role wherever two turns of one role meet (or an
    assistant turn follows the system block), and the input indexes brought back for
    it: the left-out message right before, when it has that role and costs no more
    than a note (a real turn says more), else a note: ``[ctxfold: 3 earlier messages
    left out]``."""
    messages, tokens = conv.messages, conv.tokens
    result: list[Message] = []
    back: set[int] = set()
    last_at = -1  # the input index of the newest input message so far
    for m in out:
        before = result[-1].role if result else None
        at = where.get(id(m))
        if clashes(before, m.role):
            gap = (at - last_at - 1) if at is not None else 0
            role = "assistant" if m.role == "user" else "user"
            what = f"{earlier(gap)} left out" if gap > 0 else "earlier messages left out"
            note = note_message(role, "note", what, "", left_out=gap)
            j = at - 1 if at is not None else -1  # the message right before, if left out
            real = (
                j
                if j > last_at
                and j in hidden
                and messages[j].role == role
                and not messages[j].tool_calls
                and tokens[j] <= conv.counter.count_message(note)
                else None
            )
            if real is None:
                result.append(note)
            else:
                result.append(messages[real])
                back.add(real)
        result.append(m)
        if at is not None:
            last_at = at
    return result, back
