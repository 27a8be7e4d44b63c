"""The recall block: the recalled passages in time order, each under its speaker and
its time context, between a head line and an end line; and where it goes in an output
so that strict chat APIs still take it: as late as it can (at the head of the newest
user message, or a user turn of its own where one fits)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..messages import ContentPart, Message
from ..result import RECALL_END, RECALL_HEAD, RECALL_KEY
from ..validity import SYSTEM_ROLES
from .index import RecallIndex
from .select import Pick

__all__ = ["HEAD_LINE", "SEARCH_LINE", "place", "render"]

# The time of day before a date ("1:56 pm on 8 May, 2023"): a time line shows the day.
_DAY = re.compile(r"^\d{1,2}:\d{2}\s*(?:[ap]\.?m\.?)?\s+on\s+", re.IGNORECASE)

#: The block's first line.
HEAD_LINE = f"{RECALL_HEAD} earlier passages that bear on the latest message]"
#: The first line of what a search of the history found (see :func:`ctxfold.recall.search`).
SEARCH_LINE = f"{RECALL_HEAD} passages of the history that match the search]"


def render(
    index: RecallIndex, picks: Sequence[Pick], refs: Mapping[int, str], head: str = HEAD_LINE
) -> str:
    """The block's text for the passages ``picks`` (in time order), under ``head``: a message's
    passages on one line, cut parts marked ``...``, a message shown in part followed by
    its reference in ``refs`` (``[expand <id>]``) when there is one; a time line
    wherever the day changes (the day alone: a session header's time of day is when
    the session opened, not when each later message was said) and above a message
    that opens with its date header (the header whole)."""
    lines = [head]
    stamp: str | None = None  # the last time line's
    day: str | None = None  # ...and its day
    k = 0
    while k < len(picks):
        message = index.passages[picks[k].pid].message
        run = [picks[k]]
        k += 1
        while k < len(picks) and index.passages[picks[k].pid].message == message:
            run.append(picks[k])
            k += 1
        when = index.stamps[message]
        if when:
            opens, on_day = index.opens[message], _DAY.sub("", when)
            shows = when if opens else on_day  # its header: the time line shows it whole
            if shows != (stamp if opens else day):
                lines.append(f"[{shows}]")
                stamp, day = shows, on_day
        lines.append(_message_line(index, run, refs.get(message)))
    lines.append(RECALL_END)
    return "\n".join(lines)


def _message_line(index: RecallIndex, run: list[Pick], ref: str | None) -> str:
    passages = index.passages
    first = passages[run[0].pid]
    if first.whole:
        return f"{index.speakers[first.message]}: {index.shown(run[0].pid, run[0].full)}"
    span = index.of_message(first.message)
    parts: list[str] = []
    for j, (pid, _, full) in enumerate(run):
        if pid > span.start and (j == 0 or run[j - 1].pid != pid - 1):
            parts.append("...")
        parts.append(("-> " if passages[pid].call else "") + index.shown(pid, full))
    if run[-1].pid < span.stop - 1:
        parts.append("...")
    tail = f" {ref}" if ref else ""
    return f"{index.speakers[first.message]}: {' '.join(parts)}{tail}"


def place(messages: Sequence[Message], block: str, sources: list[int]) -> list[Message] | None:
    """``messages`` with the block as late as strict chat APIs take it (all before it
    stays byte for byte, for a provider's prompt cache, and it sits next to what is
    being answered): a user message of its own after closing tool results, else at
    the head of the newest user message or as a user message of its own before the
    newest assistant message that can follow one, whichever is later; ``None`` when
    there is no such place."""
    meta = {RECALL_KEY: {"sources": sources}}
    own = Message("user", block, metadata=meta)
    if messages and messages[-1].role == "tool":  # an agent about to read its results
        return [*messages, own]
    for k in range(len(messages) - 1, -1, -1):
        m = messages[k]
        if m.role == "user":
            return [*messages[:k], _opening(m, block, meta), *messages[k + 1 :]]
        if _fits_alone(messages, k):
            return [*messages[:k], own, *messages[k:]]
    return None


def _fits_alone(messages: Sequence[Message], at: int) -> bool:
    """Whether a user message can go at ``at``: an assistant message without pending
    calls (or a tool result, or the system block) before it, an assistant message
    after it."""
    if not 0 < at < len(messages) or messages[at].role != "assistant":
        return False
    before = messages[at - 1]
    return before.role in (*SYSTEM_ROLES, "tool") or (
        before.role == "assistant" and not before.tool_calls
    )


def _opening(m: Message, block: str, meta: Mapping[str, object]) -> Message:
    """``m`` with the block at its head (``without_recall`` takes it off again)."""
    merged = {**m.metadata, **meta}
    if isinstance(m.content, tuple):
        return replace(m, content=(ContentPart("text", block), *m.content), metadata=merged)
    return replace(m, content=f"{block}\n\n{m.content}", metadata=merged)
