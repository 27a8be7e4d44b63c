"""Stage 4, assemble: the output for the current selection. Pinned and verbatim
messages as they are, a unit whose content is all chosen in place (after layers and
adapters), everything else condensed, speaker by speaker, into one note that ends with
the identifiers of folded content that appear nowhere else."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from ...contract import Conversation
from ...messages import Message
from ...result import (
    FOLDED,
    NOTE_KEY,
    Action,
    Decision,
    earlier,
    insert_note,
    note_message,
)
from ...text.layers import Layers, build_codebook
from ...text.scoring import elide
from ...tokens import TokenCounter
from ...units import Unit
from ..newest import SHORTENED
from .plan import SPEAKER_TAG, TASK_KEY, Plan, lookup, shown_text
from .policy import POLICY, Verbatim
from .state import WorkingState

__all__ = ["Assembled", "Layout", "Notes", "assemble", "savings"]


@dataclass
class Layout:
    """Where every message of the history stands in the current try of the fit loop:
    pinned, kept verbatim (and why), or older (planned, maybe folded)."""

    pinned: set[int]
    verbatim: dict[int, Verbatim]
    old_units: list[Unit]
    plans: dict[int, Plan]
    pool: list[tuple[str, float]]
    shortened: dict[int, Message] = field(default_factory=dict)  # the newest, cut in place
    alike: frozenset[str] = frozenset()  # identifiers only alike lines showed (see Pool)
    state: WorkingState = field(default_factory=WorkingState)  # what the older show
    head: list[str] = field(default_factory=list)  # the lines the note opens with
    task: str = ""  # the first of them, the task's opening, when the task is folded


class Assembled(NamedTuple):
    """An output, its trace, where its note is (``None``: no note), and what the
    pinned messages and those shown in place show (the note's identifiers are looked
    up there: the pool holds none that a message kept verbatim shows)."""

    messages: list[Message]
    trace: list[Decision]
    note_at: int | None
    others: str


@dataclass(frozen=True)
class Notes:
    """Writes ``auto``'s note: who said what, condensed, then the identifiers of
    folded content that appear nowhere else (encoded with a codebook if the layers ask
    for one)."""

    role: str
    layers: Layers
    id_share: float = 1.0  # the most of a note its list may take (beside other lines)

    def listable(
        self, listed: list[str], lines: list[str], counter: TokenCounter, alike: Collection[str]
    ) -> list[str]:
        """Of ``listed`` (best first), those not ``alike`` and the first of the others
        (shown only on lines like most others of a long output) that keep them within
        ``id_share`` of a note of ``lines`` and the list: a log's thousand request ids
        must not crowd out what the note says (a note of nothing else lists them all)."""
        share = self.id_share
        if not lines or share >= 1.0:
            return listed
        allowance = share / (1.0 - share) * counter.count_text("\n".join(lines))
        out: list[str] = []
        for value in listed:
            if value in alike:
                allowance -= counter.count_text(value) + 1  # and its separator
                if allowance < 0:
                    continue
            out.append(value)
        return out

    def write(
        self,
        folded: int,
        lines: list[str],
        candidates: list[str],
        shown: str,
        counter: TokenCounter,
        state: WorkingState | None = None,
        task: str = "",
        summarized: bool = False,
    ) -> Message:
        """The note on ``folded`` messages: ``lines``, then the ``candidates`` not in
        ``shown``, none listed twice (one inside another listed one is found there);
        the working ``state`` and the ``task``'s opening line in its metadata, for the
        next note to carry on."""
        how = "summarized" if summarized else "condensed"
        in_shown = lookup(shown, len(candidates))
        listed = _outermost(dict.fromkeys(v for v in candidates if v not in in_shown))
        body = list(lines)
        if listed:
            body.append(POLICY.also + ", ".join(listed))
        meta: dict[str, Any] = {"folded": folded, "listed": candidates}
        if state:
            meta["state"] = state.meta()
        if task:
            meta[TASK_KEY] = task
        text = "\n".join(body)
        layers = self.layers
        if text and (layers.codebook or layers.static_codebook or layers.path_aliases):
            book = build_codebook(
                [text],
                counter.count_text,
                static=layers.static_codebook,
                dynamic=layers.codebook,
                paths=layers.path_aliases,
            )
            encoded, used = book.encode(text)
            header = book.header(used)
            saved = counter.count_text(text) - counter.count_text(encoded + "\n" + header)
            if used and saved > 0:
                meta["codebook"] = {k: book.entries[k] for k in sorted(used)}
                meta["codebook_saved"] = saved
                text = header + "\n" + encoded
        return note_message(self.role, "note", f"{earlier(folded)} {how}", text, **meta)


def _outermost(values: Collection[str]) -> list[str]:
    """``values`` (distinct, none holding a line break) less those found inside another
    one: a value is inside only longer ones, so each is looked for in the longer values
    alone, joined longest first."""
    longest_first = sorted(values, key=len, reverse=True)
    joined = "\n".join(longest_first)
    ends: dict[int, int] = {}  # length -> where the values of that length begin
    pos = 0
    for v in longest_first:
        ends.setdefault(len(v), pos)
        pos += len(v) + 1
    return [v for v in values if joined.find(v, 0, ends[len(v)]) < 0]


def _condensed_note(p: Plan) -> str:
    """The chosen parts of an earlier note, line by line, each under its speaker's
    tag (kept when the line's first segment, which holds it, is left out)."""
    lines: list[str] = []
    for segs, chosen in zip(p.segments, p.chosen, strict=True):
        if not any(chosen):
            continue  # most of a long note's lines
        kept: list[str] = []
        head = 0  # the line's first segment
        for si, (seg, ok) in enumerate(zip(segs, chosen, strict=True)):
            if ok:
                kept.append(seg.strip())
            if seg.endswith("\n") or si == len(segs) - 1:
                if kept:
                    lines.append(_speaker(segs[head], chosen[head]) + " ".join(kept))
                    kept = []
                head = si + 1
    return "\n".join(lines)


def _speaker(first: str, shown: bool) -> str:
    """The speaker's tag a condensed line needs: the one its ``first`` segment begins
    with, unless that segment is ``shown`` and holds it."""
    found = None if shown else SPEAKER_TAG.match(first)
    return found.group(0) if found else ""


def condensed(p: Plan) -> str:
    """The chosen parts of a message, for the note (nothing for a copy of a later
    message: in the note, a pointer to it says nothing)."""
    if p.deduplicated or not p.anything():  # most folded messages of a long history
        return ""
    if p.note:
        return _condensed_note(p)
    parts: list[str] = []
    gap = ""  # what separates the next part from the last: the pieces left out between
    for pi, piece in enumerate(p.pieces):
        segs, chosen = p.segments[pi], p.chosen[pi]
        if not any(chosen):
            if parts and piece.mode == "lines" and not parts[-1].endswith("... "):
                parts.append(" ... ")
            gap = "\n" if gap == "\n" or "\n" in piece.text else " "
            continue
        part = elide(replace(piece, keep=False), segs, chosen, marks=False)
        if gap and parts and not parts[-1][-1:].isspace() and not part[:1].isspace():
            parts.append(gap)  # not glued across what was left out
        parts.append(part)
        gap = ""
    body = "".join(parts).strip()
    calls = [
        f"-> {c.name}({c.arguments})" for c, ok in zip(p.calls, p.call_chosen, strict=True) if ok
    ]
    return " ".join(x for x in (body, *calls) if x)


def _in_place(
    m: Message, p: Plan, t: int, i: int, counter: TokenCounter, step: str
) -> tuple[Message, Decision]:
    """A message whose content is all chosen, after its layers and adapters."""
    text = "".join(pc.text for pc in p.pieces)
    new = replace(m.with_text(text) or m, tool_calls=p.calls)
    after = counter.count_message(new)
    if new == m or after >= t:
        return m, Decision(i, "kept", "selected", t, t, step)
    done: Action = "deduplicated" if p.deduplicated else "compressed"
    return new, Decision(i, done, "selected", t, after, step, tuple(p.reasons))


def _alternating(messages: Sequence[Message], layout: Layout, whole: list[Unit]) -> set[int]:
    """The indexes of the ``whole`` units that stay in place, less those that would sit
    beside a message of their own role (user or assistant) across folded messages: those
    are folded too, so turns alternate as strict chat APIs require (the one gap left,
    between the kept task and the recent messages, the note fills)."""
    unit_of = {i: u for u in whole for i in u.indices}
    fixed = layout.pinned.keys() if isinstance(layout.pinned, dict) else layout.pinned
    kept = sorted({*fixed, *layout.verbatim, *unit_of})
    out: list[int] = []
    dropped: set[int] = set()
    for i in kept:
        if i in dropped:
            continue
        while out and _clash(messages, out[-1], i) and out[-1] in unit_of:
            gone = unit_of[out[-1]]
            dropped.update(gone.indices)
            del out[len(out) - len([k for k in out if k in gone.indices]) :]
        if out and _clash(messages, out[-1], i) and i in unit_of:
            dropped.update(unit_of[i].indices)
            continue
        out.append(i)
    # The user opens the conversation: an assistant turn kept in place first, with
    # folded messages before it (an earlier note speaking as the user), would open it
    # while the note fills another gap, so it is folded too.
    opening = next((i for i in range(len(messages)) if i not in fixed), None)
    while out:
        head = next((k for k in out if k not in fixed), None)
        if head in (None, opening) or head not in unit_of or messages[head].role != "assistant":
            break
        gone = unit_of[head]
        dropped.update(gone.indices)
        out = [k for k in out if k not in gone.indices]
    # The output must end on the side the input ended on: the message that comes next
    # (the model's reply, or the user's turn after it) follows the last one kept.
    follows = _next_role(messages)
    while out and out[-1] in unit_of and _ends_before(messages, out[-1], follows):
        gone = unit_of[out[-1]]
        dropped.update(gone.indices)
        out = [k for k in out if k not in gone.indices]
    return {i for i in unit_of if i not in dropped}


def _next_role(messages: Sequence[Message]) -> str | None:
    """The role of the turn that follows ``messages``: the assistant's after a user
    message or a tool result, the user's after an assistant message."""
    last = messages[-1].role if messages else None
    return {"user": "assistant", "tool": "assistant", "assistant": "user"}.get(last or "")


def _ends_before(messages: Sequence[Message], k: int, follows: str | None) -> bool:
    """Whether kept message ``k``, with folded messages after it to the end, has the
    role of the turn that follows the whole: the two would sit side by side."""
    return k < len(messages) - 1 and messages[k].role == follows


def _clash(messages: Sequence[Message], a: int, b: int) -> bool:
    """Whether kept messages ``a`` < ``b`` would sit side by side in the same role
    with folded messages between them."""
    role = messages[a].role
    return b > a + 1 and role == messages[b].role and role in ("user", "assistant")


def assemble(
    conv: Conversation,
    layout: Layout,
    chosen_ids: list[bool],
    notes: Notes,
    step: str,
    *,
    force_fold: bool = False,
) -> Assembled:
    """The output for the current selection, its trace and where the note is."""
    messages, tokens, counter, plans = conv.messages, conv.tokens, conv.counter, layout.plans
    in_place: set[int] = set()
    if not force_fold:
        whole = [u for u in layout.old_units if all(plans[i].complete() for i in u.indices)]
        in_place = _alternating(messages, layout, whole)
    out: list[Message] = []
    others: list[Message] = []  # pinned, or shown in place
    trace: list[Decision] = []
    lines: list[str] = []
    folded = 0
    last_tag = ""
    holes: list[int] = []
    for i, m in enumerate(messages):
        t = tokens[i]
        if i in layout.pinned:
            out.append(m)
            others.append(m)
            trace.append(Decision(i, "kept", f"pinned:{m.role}", t, t, step))
        elif i in layout.shortened:
            cut = layout.shortened[i]
            out.append(cut)
            after = counter.count_message(cut)
            trace.append(Decision(i, "compressed", SHORTENED, t, after, step))
        elif i in layout.verbatim:
            out.append(m)
            trace.append(Decision(i, "kept", layout.verbatim[i].value, t, t, step))
        elif i in in_place:
            shown_m, decision = _in_place(m, plans[i], t, i, counter, step)
            out.append(shown_m)
            others.append(shown_m)
            trace.append(decision)
        else:
            p = plans[i]
            folded += 1
            if not holes or holes[-1] != len(out):
                holes.append(len(out))  # where a run of folded messages begins
            shown = condensed(p) if not force_fold else ""
            if shown and p.note:  # its lines name their speakers already
                lines.append(shown)
                last_tag = ""
            elif shown and lines and last_tag == p.tag and not p.tag.startswith("tool"):
                lines[-1] += " " + shown  # the same speaker again: one tag for both
            elif shown:
                lines.append(f"{p.tag}: {shown}")
                last_tag = p.tag
            action: Action = "deduplicated" if p.deduplicated else "summarized"
            trace.append(Decision(i, action, FOLDED, t, 0, step, tuple(p.reasons)))
    others_text = shown_text(others)
    lines[:0] = layout.head  # what was asked, then where the work is
    note_at: int | None = None
    if holes:
        chosen = [v for (v, _), ok in zip(layout.pool, chosen_ids, strict=True) if ok]
        listed = notes.listable(chosen, lines, counter, layout.alike)
        shown = others_text + "\n" + "\n".join(lines)
        note = notes.write(folded, lines, listed, shown, counter, layout.state, layout.task)
        note_at = insert_note(out, note, hole=_gap(out, holes))
    return Assembled(out, trace, note_at, others_text)


def _gap(out: Sequence[Message], holes: Sequence[int]) -> int:
    """Where the note goes among the runs of folded messages that begin at ``holes``:
    the first run whose folding left two turns of one role side by side, so the note
    fills that gap; else the first run."""
    for h in holes:
        if 0 < h < len(out) and out[h - 1].role == out[h].role in ("user", "assistant"):
            return h
    return holes[0]


def savings(
    plans: dict[int, Plan], tokens: list[int], note: Message | None, counter: TokenCounter
) -> dict[str, int]:
    """Tokens each layer saved on the older messages, and what selection saved."""
    total: Counter[str] = Counter()
    for i, plan in plans.items():
        if plan.savings:  # a glanced message saved nothing
            total.update(plan.savings)
        if plan.deduplicated:
            total["dedup"] += tokens[i]
    meta = {} if note is None else note.metadata[NOTE_KEY]
    if "codebook" in meta:
        total["codebook"] += meta["codebook_saved"]
    old_after = 0 if note is None else counter.count_message(note)
    layered = sum(total.values())
    total["selection"] = max(sum(tokens[i] for i in plans) - layered - old_after, 0)
    return {k: v for k, v in total.items() if v}
