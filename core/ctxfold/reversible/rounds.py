"""Reversible compaction: nothing a compressor removes is lost, only folded.

Reversibility is a layer around a :class:`~ctxfold.Strategy`: :func:`make_round` runs
the strategy's public ``compact`` in the room the call's ledger leaves after what the
round adds (:func:`round_share`), marks its output, and gathers for the verbatim store,
in one atomic batch, every input message under a content-derived id and the *round*:
which messages went in, which came out, and which the model no longer sees (*hidden*).
The driver stores the round it keeps (:meth:`Round.stored`); a try it does not keep
writes nothing.

The output names the round in one line, ``[ctxfold round <id>: 21 earlier messages
condensed]``: the first line of the strategy's note or summary, or of a block after the
leading system messages when the strategy wrote none. Every message the strategy
rewrote carries a marker, ``[expand <id>]``. After the round's line come the references
of what the model no longer sees in full (files, URLs, errors, ...), in what is left of
``reference_share`` of the budget (a strategy that lists identifiers itself, as
``auto``'s note does, gets none). :func:`ctxfold.expand` turns a compressed history
back into the original.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ..contract import Compaction, Conversation, Strategy
from ..exceptions import ConfigurationError
from ..messages import Message
from ..references.index import ReferenceIndex, check_max_references
from ..result import (
    FOLDED,
    NOTE_KEY,
    Decision,
    earlier,
    from_user,
    note_head,
    note_role,
    sources_of,
)
from ..storage.store import VerbatimStore, get_store
from .expand import with_notes_known
from .records import Batch, marker

__all__ = [
    "Round",
    "RoundSettings",
    "RoundShare",
    "make_round",
    "round_heads",
    "round_share",
]

_FIXED_RESERVE = 28  # tokens first set aside for the round's tag and a few markers
_MIN_BLOCK = 16  # the bare round tag as a message
_MIN_REFERENCES = 32  # tokens: the references' header, a group's label and a few items
_SAMPLE_ID = "314159265358"  # for estimating what a round's head costs (any id costs that)
_HEAD_SHARE = 50  # a note's full round line when it takes at most 1/50 of the free budget


@dataclass(frozen=True)
class RoundSettings:
    """Where a reversible round's originals go and how much room its line may take.

    Args:
        store: the verbatim store (``None``: the process's memory store, capped at
            :data:`ctxfold.storage.DEFAULT_MAX_BYTES`; ``"sqlite:///path.db"``,
            ``"redis://..."`` or a :class:`ctxfold.storage.VerbatimStore`).
        reference_share: the round's line and the references take at most this
            share of the budget.
        max_references: at most this many references follow the round's line.
    """

    store: VerbatimStore | None = None
    reference_share: float = 0.1
    max_references: int | None = 200

    @classmethod
    def of(
        cls, *, store: Any = None, reference_share: object = 0.1, max_references: object = 200
    ) -> RoundSettings:
        """Checked settings from user options."""
        if isinstance(reference_share, bool) or not isinstance(reference_share, (int, float)):
            raise ConfigurationError(
                f"reference_share must be a number in [0, 1), got {reference_share!r}"
            )
        if not 0 <= reference_share < 1:
            raise ConfigurationError(
                f"reference_share must be a number in [0, 1), got {reference_share!r}"
            )
        return cls(
            None if store is None else get_store(store),
            float(reference_share),
            check_max_references(max_references),
        )

    def cap(self, budget: int) -> int:
        """Tokens the round's tag and references may take together."""
        return int(self.reference_share * budget)


class RoundShare(NamedTuple):
    """What a round adds to a strategy's output, set aside from the target before the
    strategy compacts (see :class:`ctxfold.pipeline.ledger.Ledger`)."""

    tag: int  # its line (or what it adds to the note's head) and markers
    references: int  # its references: given up first


class Round(NamedTuple):
    """A reversible round made but not stored yet: the marked output, the id it is
    stored under, its exact count, what the round added to the strategy's output, and
    the batch :meth:`stored` writes (in one atomic write)."""

    compaction: Compaction
    round_id: str
    tokens: int
    added: int
    batch: Batch

    def stored(self) -> Round:
        """This round, its originals and record written to the store."""
        self.batch.commit()
        return self


def round_share(
    strategy: Strategy, settings: RoundSettings, conv: Conversation, *, relieved: bool = False
) -> RoundShare:
    """What a round of ``strategy`` over ``conv`` (at its target budget) sets aside:
    a block with its line and references for a strategy that writes no identifier
    list (``relieved``: the references given up; the bare tag when they had no room
    to give up); for one that does, what the round's line adds to its note's head."""
    counter, budget = conv.counter, conv.budget
    if not strategy.lists_identifiers:  # a block with the round and the references
        cap = settings.cap(budget)
        if relieved:
            return RoundShare(_FIXED_RESERVE if cap > _FIXED_RESERVE else _MIN_BLOCK, 0)
        return RoundShare(_FIXED_RESERVE, max(cap - _FIXED_RESERVE, 0))
    # The strategy's note will carry the round in its first line.
    what = f"{earlier(len(conv.messages))} condensed"
    heads = round_heads(_SAMPLE_ID, what)
    pinned = [m for m in conv.messages if m.role in strategy.pin_roles]
    free = budget - counter.count_messages(pinned)
    full = counter.count_text(heads[0])
    # In a tight budget the round's description is worth less than what the note
    # would drop for it: reserve for the bare tag (a longer head is used if it fits).
    head = full if full * _HEAD_SHARE <= free else counter.count_text(heads[-1])
    return RoundShare(max(head - counter.count_text(note_head(what)), 0), 0)


def make_round(
    strategy: Strategy,
    conv: Conversation,
    room: int,
    settings: RoundSettings,
    records: Sequence[bytes | None] | None = None,
) -> Round:
    """Run ``strategy`` on ``conv`` in ``room`` tokens, mark what it wrote, and add the
    round's line and (unless the strategy lists identifiers itself) its references
    within ``conv.budget``, the target; nothing is stored until :meth:`Round.stored`.
    Raises :class:`BudgetError` as the strategy does. ``records``: the originals'
    records as encoded already, where known (see :meth:`Batch.add_messages`)."""
    store = get_store(settings.store)
    known = with_notes_known(store, conv.messages)
    if known is not conv.messages:
        conv = replace(conv, messages=known)
    done = strategy.compact(conv.with_budget(room))
    batch = Batch(store)
    final, round_id = _mark(
        strategy, settings, conv, list(done.messages), done.trace, batch, records
    )
    total = conv.counter.count_messages(final)
    added = total - conv.counter.count_messages(done.messages)
    return Round(Compaction(final, done.trace, done.savings), round_id, total, added, batch)


def round_heads(round_id: str, what: str) -> tuple[str, ...]:
    """The first line of the message that carries a round, longest first: its id and
    what the round folded; the bare tag for the tightest budgets. How to expand is for
    the expand tool's description to say (:func:`ctxfold.expand_tool`): a model without
    the tool cannot expand anything."""
    tag = f"[ctxfold round {round_id}"
    return (f"{tag}: {what}]", f"{tag}]") if what else (f"{tag}]",)


class _Marked(NamedTuple):
    """The strategy's output with markers on what it rewrote: where its note is (one
    that can carry the round's tag), and which inputs were rewritten."""

    messages: list[Message]
    note_at: int | None
    rewritten: list[int]


def _add_markers(
    conv: Conversation, out: list[Message], trace: Sequence[Decision], msg_ids: list[str]
) -> _Marked:
    """An ``[expand <id>]`` marker on every message the strategy rewrote."""
    messages = conv.messages
    marked: list[Message] = []
    rewritten: list[int] = []
    note_at: int | None = None
    for m, j in zip(out, sources_of(messages, out, trace), strict=True):
        if j is None:  # what the strategy wrote: the first note that can carry the tag
            if note_at is None and _carries_head(m):
                note_at = len(marked)
        elif m != messages[j]:
            rewritten.append(j)
            if isinstance(m.content, str):
                sep = " " if m.content else ""
                m = replace(m, content=f"{m.content}{sep}{marker(msg_ids[j])}")
        marked.append(m)
    return _Marked(marked, note_at, rewritten)


def _place_round(
    strategy: Strategy,
    conv: Conversation,
    marked: _Marked,
    trace: Sequence[Decision],
    round_id: str,
) -> tuple[int, str, str, dict[str, Any]]:
    """Where the round's line goes (the note's first line, or a new block after the
    leading system messages), what it says, the body after it and the metadata; a block
    is inserted into ``marked.messages`` as a placeholder."""
    out = marked.messages
    hidden = sum(1 for d in trace if d.tokens_after == 0)
    if marked.note_at is not None:  # the note's first line names the round
        note = out[marked.note_at]
        meta = {**note.metadata[NOTE_KEY], "round": round_id}
        what = str(meta["what"])
        folded = sum(1 for d in trace if d.action == "summarized" or d.reason == FOLDED)
        if "left_out" in meta:  # a note on a gap: the round's line counts every gap
            what = f"{earlier(hidden)} left out"
        elif hidden > folded:
            what += f", {hidden - folded} more left out"
        body = note.text.split("\n", 1)[1] if "\n" in note.text else ""
        return marked.note_at, what, body, meta
    inputs = {id(m) for m in conv.messages}
    at = 0
    while at < len(out) and id(out[at]) in inputs and out[at].role in strategy.pin_roles:
        at += 1
    what = f"{earlier(hidden)} left out" if hidden else ""
    out.insert(at, Message("system", ""))
    return at, what, "", {"kind": "references", "what": what, "round": round_id}


def _references(
    settings: RoundSettings,
    conv: Conversation,
    unseen: list[int],
    shown: list[Message],
    msg_ids: list[str],
    allowance: int,
) -> str:
    """The references block of what the model no longer sees in full."""
    messages = conv.messages
    index = ReferenceIndex(max_references=settings.max_references)
    for i in unseen:
        index.add_messages([messages[i]], start=i)
    users = [m.text for m in messages if from_user(m)]
    goal = " ".join(users[:1] + users[-1:])
    index.score(goal=goal, recent=[m.text for m in shown[-4:]], now=len(messages) - 1)
    return index.block(
        max_tokens=allowance,
        counter=conv.counter,
        shown="\n".join(m.text for m in shown),
        expand_ids={r.id: msg_ids[r.source] for r in index},
    )


def _mark(
    strategy: Strategy,
    settings: RoundSettings,
    conv: Conversation,
    out: list[Message],
    trace: Sequence[Decision],
    batch: Batch,
    records: Sequence[bytes | None] | None = None,
) -> tuple[list[Message], str]:
    """The round's output: a marker on every message the strategy rewrote, the round's
    tag at the head of its note (or in a block after the leading system messages when
    it wrote none) and the references of what the model no longer sees in full, in the
    room left within ``reference_share`` of the budget. The batch gets every entry."""
    counter, budget = conv.counter, conv.budget
    msg_ids = batch.add_messages(conv.messages, records)
    hidden = [d.index for d in trace if d.tokens_after == 0]
    marked = _add_markers(conv, out, trace, msg_ids)
    round_id = batch.add(
        {
            "k": "round",
            "in": msg_ids,
            "out": [m.fingerprint for j, m in enumerate(marked.messages) if j != marked.note_at],
            "hid": [msg_ids[i] for i in hidden],
        }
    )
    at, what, body, meta = _place_round(strategy, conv, marked, trace, round_id)
    final = marked.messages
    role = final[at].role if marked.note_at is not None else note_role(final, at + 1)
    rest = counter.count_messages(final[:at] + final[at + 1 :])
    for head in round_heads(round_id, what):  # the longest that fits
        carrier = Message(role, head + (f"\n{body}" if body else ""), metadata={NOTE_KEY: meta})
        if rest + counter.count_message(carrier) <= budget:
            break
    final[at] = carrier
    # The references of what the model no longer sees in full, in the room left (a
    # strategy that lists identifiers itself has its own list: auto's note).
    room = budget - rest - counter.count_message(carrier) - 1
    allowance = min(settings.cap(budget) - counter.count_text(head), room)
    unseen = sorted(set(hidden) | set(marked.rewritten))
    if allowance >= _MIN_REFERENCES and unseen and not strategy.lists_identifiers:
        refs = _references(settings, conv, unseen, final, msg_ids, allowance)
        if refs:
            final[at] = replace(carrier, content=f"{carrier.text}\n{refs}")
    batch.add_tag(round_id, final[at])
    return final, round_id


def _carries_head(m: Message) -> bool:
    """Whether ``m`` is a strategy's note whose first line can carry the round's tag."""
    meta = m.metadata.get(NOTE_KEY)
    return (
        isinstance(meta, Mapping)
        and isinstance(meta.get("what"), str)
        and isinstance(m.content, str)
        and m.content.split("\n", 1)[0] == note_head(meta["what"])
    )
