"""Reversible compaction: nothing a compressor removes is lost, only folded.

With ``reversible=True`` a compression round writes to the verbatim store, in one
atomic batch, every input message under a content-derived id and the *round*: which
messages went in, which came out, and which the model no longer sees (*hidden*).

The output names the round in one line, ``[ctxfold round <id>: 21 earlier messages
condensed ...; expand(id) gives the full text of these ...]``: the first line of the
strategy's note or summary, or of a block after the leading system messages when the
strategy wrote none. Every message the strategy rewrote carries a marker,
``[expand <id>]``. After the round's line come the references of what the model no
longer sees in full (files, URLs, errors, ...), in what is left of ``reference_share``
of the budget. :func:`expand` turns a compressed history back into the original, byte
for byte, through any number of rounds, and reports ids the store does not have;
``expand("<id>")`` gives the text of one message, or of a round's hidden messages.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from ._messages import ContentPart, Message, ToolCall, as_messages
from ._models import transcript
from ._references import ReferenceIndex
from ._result import NOTE_KEY, CompressionResult, Decision, earlier, note_head
from ._store import VerbatimStore, get_store
from ._tokens import TokenCounter
from .exceptions import BudgetError, ExpandError

if TYPE_CHECKING:
    from ._compressor import BaseCompressor
    from ._units import Grouping

__all__ = ["Expansion", "entry_id", "expand", "marker", "uncompress"]

_ID_LENGTHS = (12, 24, 64)  # digits; a longer id only when a shorter one holds other content
_MARKER = re.compile(r"\[expand ([0-9a-f]{10,64})\]")
_ROUND = re.compile(r"\[ctxfold round ([0-9a-f]{10,64})[:\]]")
_FIXED_RESERVE = 28  # tokens first set aside for the round's tag and a few markers
_MIN_BLOCK = 16  # the bare round tag as a message
_MIN_REFERENCES = 32  # tokens: the references' header, a group's label and a few items
_MAX_TRIES = 5
_SAMPLE_ID = "314159265358"  # for estimating what a round's head costs (any id costs that)
_HEAD_SHARE = 50  # a note's full round line when it takes at most 1/50 of the free budget
_NO_ROOM = (
    "reversible: the round's tag and markers (about {reserve} tokens) do not fit "
    "beside the pinned messages, so this result is not reversible; raise the budget to "
    "make it so"
)


def entry_id(digest: bytes, digits: int) -> str:
    """The store id of content with this SHA-256 ``digest``: ``digits`` decimal digits.
    Digits, because the tiktoken encodings cut a run of digits into groups of three, one
    token each: a 12-digit id always costs 4 tokens (a 10-character hex id costs 4 to 7,
    which made the room a round's tag needs a guess). Ids of older versions (hex) are
    still read."""
    width = min(len(digest), max(8, digits // 2))  # at least 64 bits behind the digits
    return str(int.from_bytes(digest[:width], "big") % 10**digits).zfill(digits)


def marker(entry_id: str) -> str:
    """The marker a compressed text carries for a stored span."""
    return f"[expand {entry_id}]"


# ------------------------------------------------------------------ serialization


def _encode(obj: Mapping[str, Any]) -> bytes:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def _message_record(m: Message) -> dict[str, Any]:
    content: Any = m.content
    if isinstance(content, tuple):
        content = [[p.type, p.text, p.extra] for p in content]
    record: dict[str, Any] = {
        "k": "msg",
        "role": m.role,
        "content": content,
        "name": m.name,
        "calls": [[c.id, c.name, c.arguments, c.type] for c in m.tool_calls],
        "call_id": m.tool_call_id,
        "id": m.id,
        "extras": [list(x) for x in m.extras],
    }
    if m.metadata:
        try:
            json.dumps(dict(m.metadata), sort_keys=True)
            record["meta"] = dict(m.metadata)
        except (TypeError, ValueError):
            pass  # metadata the model never sees and JSON cannot hold stays behind
    return record


def _message_from_record(r: Mapping[str, Any]) -> Message:
    content = r["content"]
    if isinstance(content, list):
        content = tuple(ContentPart(t, text, extra) for t, text, extra in content)
    return Message(
        r["role"],
        content,
        name=r["name"],
        tool_calls=tuple(ToolCall(*c) for c in r["calls"]),
        tool_call_id=r["call_id"],
        id=r["id"],
        extras=tuple((k, v) for k, v in r["extras"]),
        metadata=r.get("meta", {}),
    )


class _Batch:
    """Entries of one round: ids resolved against the store (a longer id when the
    short one holds other content), then written in one atomic ``put_many``."""

    def __init__(self, store: VerbatimStore) -> None:
        self.store = store
        self.entries: dict[str, bytes] = {}

    def add_all(self, records: Sequence[Mapping[str, Any]]) -> list[str]:
        datas = [_encode(r) for r in records]
        digests = [hashlib.sha256(d).digest() for d in datas]
        ids = [""] * len(datas)
        todo = list(range(len(datas)))
        for n in _ID_LENGTHS:
            if not todo:
                break
            keys = [entry_id(digests[k], n) for k in todo]
            unknown = [key for key in dict.fromkeys(keys) if key not in self.entries]
            stored = dict(zip(unknown, self.store.get_many(unknown), strict=True))
            left = []
            for k, key in zip(todo, keys, strict=True):
                have = self.entries.get(key, stored.get(key))
                if have is None or have == datas[k]:
                    self.entries[key] = datas[k]
                    ids[k] = key
                else:
                    left.append(k)
            todo = left
        return ids

    def add(self, record: Mapping[str, Any]) -> str:
        return self.add_all([record])[0]

    def commit(self) -> None:
        self.store.put_many(self.entries)


# ------------------------------------------------------------------ one round


class Reversed(NamedTuple):
    """A reversible round's output; ``round_id`` is ``None`` when there was no room for
    the round's tag (``warnings`` says so) and the output is the strategy's plain one."""

    messages: list[Message]
    trace: list[Decision]
    savings: Mapping[str, int]
    warnings: tuple[str, ...]
    round_id: str | None


def compress_reversibly(
    compressor: BaseCompressor,
    messages: list[Message],
    *,
    budget: int,
    counter: TokenCounter,
    grouping: Grouping,
) -> Reversed:
    """Run ``compressor``'s strategy with room left for the round's tag, its markers and
    (unless the strategy lists identifiers itself) its references; mark what it wrote,
    add the tag and the references, and store every original; shrink and retry until
    the whole fits ``budget``."""
    store = get_store(compressor.store)
    if compressor.lists_identifiers:  # its note will carry the round in its first line
        what = f"{earlier(len(messages))} condensed"
        heads = round_heads(_SAMPLE_ID, what)
        pinned = getattr(compressor, "pin_roles", ("system", "developer"))
        free = budget - counter.count_messages([m for m in messages if m.role in pinned])
        full = counter.count_text(heads[0])
        # In a tight budget the round's description is worth less than what the note
        # would drop for it: reserve for the bare tag (a longer head is used if it fits).
        head = full if full * _HEAD_SHARE <= free else counter.count_text(heads[-1])
        reserve = max(head - counter.count_text(note_head(what)), 0)
    else:  # a block with the round and the references
        reserve = max(cap_of(compressor, budget), _FIXED_RESERVE)
    for _ in range(_MAX_TRIES):
        try:
            out, trace, savings = compressor._compress(
                messages, budget=max(budget - reserve, 1), counter=counter, grouping=grouping
            )
        except BudgetError:
            if reserve > _MIN_BLOCK:  # no room for references, then only the bare tag
                reserve = _FIXED_RESERVE if reserve > _FIXED_RESERVE else _MIN_BLOCK
                continue
            break
        batch = _Batch(store)
        final, round_id = _mark(compressor, messages, list(out), trace, batch, counter, budget)
        total = counter.count_messages(final)
        if total <= budget or getattr(compressor, "overflow", "error") == "best_effort":
            batch.commit()
            return Reversed(final, trace, savings, (), round_id)
        reserve += total - budget + 4
    # Not even the round tag fits beside what must be kept: the plain result (which
    # raises if that cannot fit either), said out loud.
    out, trace, savings = compressor._compress(
        messages, budget=budget, counter=counter, grouping=grouping
    )
    return Reversed(list(out), trace, savings, (_NO_ROOM.format(reserve=_MIN_BLOCK),), None)


def round_heads(round_id: str, what: str) -> tuple[str, ...]:
    """The first line of the message that carries a round, longest first: its id and
    what the round folded; the bare tag for the tightest budgets. How to expand is for
    the expand tool's description to say (:func:`ctxfold.expand_tool`): a model without
    the tool cannot expand anything."""
    tag = f"[ctxfold round {round_id}"
    return (f"{tag}: {what}]", f"{tag}]") if what else (f"{tag}]",)


def _mark(
    compressor: BaseCompressor,
    messages: list[Message],
    out: list[Message],
    trace: Sequence[Decision],
    batch: _Batch,
    counter: TokenCounter,
    budget: int,
) -> tuple[list[Message], str]:
    """The round's output: a marker on every message the strategy rewrote, the round's
    tag at the head of its note (or in a block after the leading system messages when
    it wrote none) and the references of what the model no longer sees in full, in the
    room left within ``reference_share`` of the budget. The batch gets every entry."""
    msg_ids = batch.add_all([_message_record(m) for m in messages])
    shown = [d for d in trace if d.tokens_after > 0]  # one per non-note output message
    hidden = [d.index for d in trace if d.tokens_after == 0]
    inputs = {id(m) for m in messages}
    marked: list[Message] = []
    rewritten: list[int] = []
    note_at: int | None = None
    k = 0
    for m in out:
        meta = m.metadata.get(NOTE_KEY)
        if id(m) not in inputs and isinstance(meta, Mapping):
            if note_at is None and _carries_head(m):
                note_at = len(marked)
            marked.append(m)
            continue
        d = shown[k] if k < len(shown) else None
        k += 1
        if d is not None and m != messages[d.index]:
            rewritten.append(d.index)
            if isinstance(m.content, str):
                sep = " " if m.content else ""
                m = replace(m, content=f"{m.content}{sep}{marker(msg_ids[d.index])}")
        marked.append(m)
    round_id = batch.add(
        {
            "k": "round",
            "in": msg_ids,
            "out": [m.fingerprint for j, m in enumerate(marked) if j != note_at],
            "hid": [msg_ids[i] for i in hidden],
        }
    )
    if note_at is not None:  # the note's first line names the round
        note = marked[note_at]
        meta = {**note.metadata[NOTE_KEY], "round": round_id}
        what = str(meta["what"])
        folded = sum(1 for d in trace if d.action == "summarized" or d.reason.startswith("folded"))
        if len(hidden) > folded:
            what += f", {len(hidden) - folded} more left out"
        body = note.text.split("\n", 1)[1] if "\n" in note.text else ""
        role = note.role
    else:  # a block after the leading system messages of the input
        note_at = 0
        pinned = getattr(compressor, "pin_roles", ("system", "developer"))
        while (
            note_at < len(marked)
            and id(marked[note_at]) in inputs
            and marked[note_at].role in pinned
        ):
            note_at += 1
        what = f"{earlier(len(hidden))} left out" if hidden else ""
        meta = {"kind": "references", "what": what, "round": round_id}
        marked.insert(note_at, Message("system", ""))
        body, role = "", "system"
    rest = counter.count_messages(marked[:note_at] + marked[note_at + 1 :])
    for head in round_heads(round_id, what):  # the longest that fits
        carrier = Message(role, head + (f"\n{body}" if body else ""), metadata={NOTE_KEY: meta})
        if rest + counter.count_message(carrier) <= budget:
            break
    marked[note_at] = carrier
    # The references of what the model no longer sees in full, in the room left (a
    # strategy that lists identifiers itself has its own list: auto's note).
    room = budget - rest - counter.count_message(carrier) - 1
    allowance = min(cap_of(compressor, budget) - counter.count_text(head), room)
    unseen = sorted(set(hidden) | set(rewritten))
    if allowance >= _MIN_REFERENCES and unseen and not compressor.lists_identifiers:
        index = ReferenceIndex(max_references=compressor.max_references)
        for i in unseen:
            index.add_messages([messages[i]], start=i)
        users = [m.text for m in messages if m.role == "user"]
        goal = " ".join(users[:1] + users[-1:])
        index.score(goal=goal, recent=[m.text for m in marked[-4:]], now=len(messages) - 1)
        refs = index.block(
            max_tokens=allowance,
            counter=counter,
            shown="\n".join(m.text for m in marked),
            expand_ids={r.id: msg_ids[r.source] for r in index},
        )
        if refs:
            marked[note_at] = replace(carrier, content=f"{carrier.text}\n{refs}")
    return marked, round_id


def cap_of(compressor: BaseCompressor, budget: int) -> int:
    """Tokens the round's tag and references may take together."""
    return int(compressor.reference_share * budget)


def _carries_head(m: Message) -> bool:
    """Whether ``m`` is a strategy's note whose first line can carry the round's tag."""
    meta = m.metadata.get(NOTE_KEY)
    return (
        isinstance(meta, Mapping)
        and isinstance(meta.get("what"), str)
        and isinstance(m.content, str)
        and m.content.split("\n", 1)[0] == note_head(meta["what"])
    )


# ------------------------------------------------------------------ expanding


@dataclass(frozen=True)
class Expansion:
    """What :func:`expand` rebuilt: the ``messages``, how many ``rounds`` it undid,
    and the ids it could not find (``missing``; empty when the rebuild is complete)."""

    messages: tuple[Message, ...]
    rounds: int
    missing: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether every id was found."""
        return not self.missing

    def to_openai(self) -> list[dict[str, Any]]:
        """The rebuilt messages as OpenAI dicts."""
        from ._messages import to_openai

        return to_openai(self.messages)


def _load(store: VerbatimStore, ids: Sequence[str]) -> list[dict[str, Any] | None]:
    return [None if v is None else json.loads(v) for v in store.get_many(list(ids))]


def expand(
    target: CompressionResult | Sequence[Message | Mapping[str, Any]] | str,
    *,
    store: VerbatimStore | str | None = None,
) -> Any:
    """Give back what compression folded.

    - a :class:`CompressionResult` or a list of messages: an :class:`Expansion` with
      the original conversation, rebuilt through every round found (the newest
      first), and the ids the store lacked (``missing``) instead of a silent gap;
    - an id (from an ``[expand <id>]`` marker, a round's tag or a reference): the text
      it stands for (a message's, or the transcript of the messages a round hid);
      raises :class:`ExpandError` if the store does not have it.
    """
    st = get_store(store)
    if isinstance(target, str):
        return _expand_id(st, target.strip())
    msgs = list(target.messages) if isinstance(target, CompressionResult) else as_messages(target)
    missing: list[str] = []
    rounds = 0
    done: set[str] = set()  # rounds undone, or known to be missing
    progress = True
    while progress:  # the newest round first: an older one's output is inside it
        progress = False
        for pos, m in enumerate(msgs):
            match = _round_of(m)
            if not match or match.group(1) in done:
                continue
            rid = match.group(1)
            record = _load(st, [rid])[0]
            if record is None or record.get("k") != "round":
                done.add(rid)
                missing.append(rid)
                continue
            originals = _load(st, record["in"])
            lost = [i for i, r in zip(record["in"], originals, strict=True) if r is None]
            rest = msgs[:pos] + msgs[pos + 1 :]
            spots = _subsequence(rest, record["out"])
            if lost or spots is None:
                if lost:
                    done.add(rid)
                    missing.extend(lost)
                continue  # its output is folded into a newer round: that one first
            first = spots[0] if spots else len(rest)
            taken = set(spots)
            restored = [_message_from_record(r) for r in originals if r is not None]
            msgs = (
                [x for k, x in enumerate(rest[:first]) if k not in taken]
                + restored
                + [x for k, x in enumerate(rest) if k >= first and k not in taken]
            )
            done.add(rid)
            rounds += 1
            progress = True
            break
    for m in msgs:  # rounds whose output is not all here any more
        match = _round_of(m)
        if match and match.group(1) not in done:
            missing.append(match.group(1))
    return Expansion(tuple(msgs), rounds, tuple(dict.fromkeys(missing)))


def _round_of(m: Message) -> re.Match[str] | None:
    """The round tag a message starts with (never in a user's or a tool's message)."""
    return _ROUND.match(m.text) if m.role not in ("user", "tool") else None


def _subsequence(msgs: Sequence[Message], ids: Sequence[str]) -> list[int] | None:
    """Positions of the messages with ``ids``, in order, or None if one is absent."""
    spots: list[int] = []
    k = 0
    for want in ids:
        while k < len(msgs) and msgs[k].fingerprint != want:
            k += 1
        if k == len(msgs):
            return None
        spots.append(k)
        k += 1
    return spots


def _expand_id(store: VerbatimStore, entry_id: str) -> str:
    entry_id = entry_id.removeprefix("[expand ").removesuffix("]").strip()
    record = _load(store, [entry_id])[0]
    if record is None:
        raise ExpandError(
            f"nothing is stored under {entry_id!r}; use an id from an [expand <id>] marker "
            "or a reference block, with the store the compression used"
        )
    if record.get("k") == "msg":
        return transcript([_message_from_record(record)])
    ids = record.get("hid") or []  # a round: what its output no longer shows
    rows = _load(store, ids)
    absent = [i for i, r in zip(ids, rows, strict=True) if r is None]
    if absent:
        raise ExpandError(f"{entry_id!r} refers to ids the store lacks: {', '.join(absent)}")
    return transcript([_message_from_record(r) for r in rows if r is not None])


#: Another name for :func:`expand`.
uncompress = expand
