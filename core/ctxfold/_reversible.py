"""Reversible compaction: nothing a compressor removes is lost, only folded.

With ``reversible=True`` a compression round writes to the verbatim store, in one
atomic batch:

- every input message, under a content-derived id;
- for each note or summary, the list of messages it stands for (a *span*);
- for the messages left out altogether, one span too;
- the *round*: which messages went in and which came out.

The output carries short markers, ``[expand <id>]``, on every message the round wrote
or rewrote, and one block (a system-style message after the leading system messages)
with the round's id, the span of omitted messages and the references of everything
the model no longer sees in full (files, URLs, errors, ...), within
``reference_share`` of the budget. :func:`expand` turns a compressed history back into
the original, byte for byte, through any number of rounds, and reports ids the store
does not have; ``expand("<id>")`` gives the text one marker stands for.
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
from ._result import NOTE_KEY, CompressionResult, Decision
from ._store import VerbatimStore, get_store
from ._tokens import TokenCounter
from .exceptions import BudgetError, ExpandError

if TYPE_CHECKING:
    from ._compressor import BaseCompressor
    from ._units import Grouping

__all__ = ["Expansion", "expand", "marker", "uncompress"]

_ID_LENGTHS = (10, 16, 64)  # a longer id only when a shorter one is taken by other content
_MARKER = re.compile(r"\[expand ([0-9a-f]{10,64})\]")
_ROUND = re.compile(r"\[ctxfold round ([0-9a-f]{10,64})\]")
_FIXED_RESERVE = 28  # tokens first set aside for the block's header and a few markers
_MIN_BLOCK = 16  # the bare round tag as a message
_MAX_TRIES = 5
_NO_ROOM = (
    "reversible: the round block and its markers (about {reserve} tokens) do not fit "
    "beside the pinned messages, so this result is not reversible; raise the budget to "
    "make it so"
)


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
        fulls = [hashlib.sha256(d).hexdigest() for d in datas]
        ids = [""] * len(datas)
        todo = list(range(len(datas)))
        for n in _ID_LENGTHS:
            if not todo:
                break
            keys = [fulls[k][:n] for k in todo]
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
    the block (``warnings`` says so) and the output is the strategy's plain one."""

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
    """Run ``compressor``'s strategy with room left for the markers and the block, mark
    what it wrote, add the block and store every original; shrink and retry until the
    whole fits ``budget``."""
    store = get_store(compressor.store)
    pinned = getattr(compressor, "pin_roles", ("system", "developer"))
    free = budget - counter.count_messages([m for m in messages if m.role in pinned])
    allowance = max(int(compressor.reference_share * free), 0)  # for the references
    reserve = _FIXED_RESERVE + allowance
    inputs = {id(m) for m in messages}
    for _ in range(_MAX_TRIES):
        inner = max(budget - reserve, 1)
        try:
            out, trace, savings = compressor._compress(
                messages, budget=inner, counter=counter, grouping=grouping
            )
        except BudgetError:
            if reserve > _MIN_BLOCK:  # less room for references, then the bare round tag
                allowance = 0
                reserve = _FIXED_RESERVE if reserve > _FIXED_RESERVE else _MIN_BLOCK
                continue
            break
        batch = _Batch(store)
        marked, block = _mark(
            compressor, messages, list(out), trace, batch, counter, budget, allowance
        )
        total = counter.count_messages(marked) + counter.count_message(block)
        if total <= budget or getattr(compressor, "overflow", "error") == "best_effort":
            at = 0  # the block goes after the leading system messages of the input
            while at < len(marked) and id(marked[at]) in inputs and marked[at].role in pinned:
                at += 1
            final = [*marked[:at], block, *marked[at:]]
            batch.commit()
            return Reversed(final, trace, savings, (), block.metadata[NOTE_KEY]["round"])
        reserve += total - budget + 4
    # Not even the round tag fits beside what must be kept: the plain result (which
    # raises if that cannot fit either), said out loud.
    out, trace, savings = compressor._compress(
        messages, budget=budget, counter=counter, grouping=grouping
    )
    return Reversed(list(out), trace, savings, (_NO_ROOM.format(reserve=_MIN_BLOCK),), None)


def _mark(
    compressor: BaseCompressor,
    messages: list[Message],
    out: list[Message],
    trace: Sequence[Decision],
    batch: _Batch,
    counter: TokenCounter,
    budget: int,
    allowance: int,
) -> tuple[list[Message], Message]:
    """Markers on what the round wrote, and the block; the batch gets every entry."""
    msg_ids = batch.add_all([_message_record(m) for m in messages])
    shown = [d for d in trace if d.tokens_after > 0]  # one per non-note output message
    folded = [
        d.index
        for d in trace
        if d.action == "summarized"
        or (d.action == "deduplicated" and d.tokens_after == 0 and d.reason.startswith("folded"))
    ]
    folded_set = set(folded)
    omitted = [d.index for d in trace if d.tokens_after == 0 and d.index not in folded_set]
    inputs = {id(m) for m in messages}
    marked: list[Message] = []
    hidden: list[int] = list(folded) + omitted  # what the model no longer sees in full
    k = 0
    note_done = False
    for m in out:
        meta = m.metadata.get(NOTE_KEY)
        is_note = id(m) not in inputs and isinstance(meta, Mapping) and meta.get("kind")
        if is_note and not note_done and folded and isinstance(m.content, str):
            span = batch.add({"k": "span", "m": [msg_ids[i] for i in folded]})
            marked.append(replace(m, content=f"{m.content}\n{marker(span)}"))
            note_done = True
            continue
        if is_note:
            marked.append(m)
            continue
        d = shown[k] if k < len(shown) else None
        k += 1
        original = messages[d.index] if d is not None else None
        if original is not None and m != original:
            hidden.append(d.index)  # type: ignore[union-attr]
            if isinstance(m.content, str):
                sep = " " if m.content else ""
                m = replace(m, content=f"{m.content}{sep}{marker(msg_ids[d.index])}")  # type: ignore[union-attr]
        marked.append(m)
    if folded and not note_done:  # a strategy that folds without a note: count them out
        omitted = sorted(set(omitted) | folded_set)
    round_id = batch.add(
        {
            "k": "round",
            "in": msg_ids,
            "out": [m.fingerprint for m in marked],
        }
    )
    head = f"[ctxfold round {round_id}] expand(id) gives the full text of any [expand <id>]."
    lines = [head]
    if omitted:
        span = batch.add({"k": "span", "m": [msg_ids[i] for i in sorted(omitted)]})
        lines.append(f"Omitted: {len(omitted)} earlier messages {marker(span)}")
    fixed = Message("system", "\n".join(lines))
    room = budget - counter.count_messages(marked) - counter.count_message(fixed) - 1
    allowance = min(allowance, room)
    if allowance > 8 and hidden:
        index = ReferenceIndex(max_references=compressor.max_references)
        for i in sorted(set(hidden)):
            index.add_messages([messages[i]], start=i)
        users = [m.text for m in messages if m.role == "user"]
        goal = " ".join(users[:1] + users[-1:])
        index.score(goal=goal, recent=[m.text for m in marked[-4:]], now=len(messages) - 1)
        text = "\n".join(m.text for m in marked)
        refs = index.block(
            max_tokens=allowance,
            counter=counter,
            shown=text,
            expand_ids={r.id: msg_ids[r.source] for r in index},
        )
        if refs:
            lines.append(refs)
    meta = {NOTE_KEY: {"kind": "references", "round": round_id}}
    block = Message("system", "\n".join(lines), metadata=meta)
    if counter.count_messages(marked) + counter.count_message(block) > budget:
        block = Message("system", f"[ctxfold round {round_id}]", metadata=meta)  # tight
    return marked, block


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
    - an id (from an ``[expand <id>]`` marker or a reference block): the text it stands
      for (a message's text, or the transcript of the messages of a span or a round);
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
            match = _ROUND.search(m.text) if m.role == "system" else None
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
        match = _ROUND.search(m.text) if m.role == "system" else None
        if match and match.group(1) not in done:
            missing.append(match.group(1))
    return Expansion(tuple(msgs), rounds, tuple(dict.fromkeys(missing)))


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
    kind = record.get("k")
    if kind == "msg":
        return transcript([_message_from_record(record)])
    ids = record.get("m") if kind == "span" else record.get("in")
    rows = _load(store, ids or [])
    absent = [i for i, r in zip(ids or [], rows, strict=True) if r is None]
    if absent:
        raise ExpandError(f"{entry_id!r} refers to ids the store lacks: {', '.join(absent)}")
    return transcript([_message_from_record(r) for r in rows if r is not None])


#: Another name for :func:`expand`.
uncompress = expand
