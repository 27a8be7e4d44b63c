"""Giving back what compression folded: a whole history through every round, or the
text behind one id."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..exceptions import CorruptRecordError, ExpandError
from ..messages import Message, as_messages, to_openai, transcript
from ..result import NOTE_KEY, CompressionResult, without_recall
from ..storage.store import NamespacedStore, VerbatimStore, get_store
from .records import Read, load, message_from_record, tag_key
from .redaction import unredact

__all__ = ["Expansion", "expand", "originals", "uncompress"]

#: A round's tag: the whole first line of the message that carries it (see
#: :func:`ctxfold.reversible.rounds.round_heads`); a line with more after the tag is text.
_ROUND = re.compile(r"\[ctxfold round ([0-9a-f]{10,64})(?:: [^\]\n]*)?\](?:\n|$)")


@dataclass(frozen=True)
class Expansion:
    """What :func:`expand` rebuilt: the ``messages``, how many ``rounds`` it undid, the
    ids it could not find (``missing``) and those whose record is not what was written
    under them (``corrupt``: altered or unreadable, never given back as the original).
    Both are empty when the rebuild is complete."""

    messages: tuple[Message, ...]
    rounds: int
    missing: tuple[str, ...] = ()
    corrupt: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether every id was found, intact."""
        return not self.missing and not self.corrupt

    def to_openai(self) -> list[dict[str, Any]]:
        """The rebuilt messages as OpenAI dicts."""
        return to_openai(self.messages)


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

    ``store`` is where the originals are (default: a result's own store, else the
    process's). A session writes in its own part of its store: its renders find it
    given the store's spec; its messages alone or its ids need
    :meth:`ctxfold.Session.expand` (or ``Session.load(id, store=...).expand``).

    A message that starts with a round's tag is that round's only when its metadata
    or the store says so (see :func:`_written`). A tag the store knows nothing of is
    reported ``missing`` when the messages came through a wire format (their
    metadata lost: a round of another store, or a session's); in a
    :class:`CompressionResult`, whose own notes carry their metadata, it is text
    (a user's message that starts with a tag leaves the expansion complete).
    """
    st = _store_of(target, store)
    if isinstance(target, str):
        return _expand_id(st, target.strip())
    # A result's own messages keep their metadata: a round's message says so itself.
    kept_meta = isinstance(target, CompressionResult)
    msgs = list(target.messages) if isinstance(target, CompressionResult) else as_messages(target)
    msgs = without_recall(msgs)  # a recall block quotes the history: it is no part of it
    missing: list[str] = []
    corrupt: list[str] = []
    rounds = 0
    done: set[str] = set()  # rounds undone, or known to be missing
    rounds_read: dict[str, Read] = {}  # each round's record is read once
    seen = (done, missing, corrupt, rounds_read)
    while (undone := _undo_newest(st, msgs, *seen, kept_meta=kept_meta)) is not None:
        msgs = undone
        rounds += 1
    for m in msgs:  # rounds whose output is not all here any more
        match = _round_of(m)
        rid = match.group(1) if match else None
        if rid and rid not in done and _written(st, m, rounds_read.get(rid), kept_meta):
            missing.append(rid)
    msgs, lost = unredact(msgs, st)  # credentials masked on the way in: put back
    missing += lost
    return Expansion(
        tuple(msgs), rounds, tuple(dict.fromkeys(missing)), tuple(dict.fromkeys(corrupt))
    )


def _store_of(target: object, store: VerbatimStore | str | None) -> VerbatimStore:
    """Where ``target``'s originals are: the store given, in the part of it a result's
    own store names (a session writes in its own namespace); a result's own store
    when none is given."""
    own = target.store if isinstance(target, CompressionResult) else None
    if store is None:
        return get_store(own)
    st = get_store(store)
    if isinstance(own, NamespacedStore) and not isinstance(st, NamespacedStore):
        return NamespacedStore(st, own.namespace)
    return st


def _undo_newest(
    store: VerbatimStore,
    msgs: list[Message],
    done: set[str],
    missing: list[str],
    corrupt: list[str],
    rounds_read: dict[str, Read],
    *,
    kept_meta: bool,
) -> list[Message] | None:
    """``msgs`` with one round undone: the newest one whose output is all here (a round
    whose tag is part of another round's output is older: that one goes first); None
    when no round can be undone. Rounds found missing go to ``done`` and ``missing``
    (or ``corrupt``). ``kept_meta``: see :func:`_written`."""
    found: list[tuple[int, str, dict[str, Any]]] = []
    for pos, m in enumerate(msgs):
        match = _round_of(m)
        if not match or match.group(1) in done:
            continue
        rid = match.group(1)
        if rid not in rounds_read:
            rounds_read[rid] = load(store, [rid])
        read = rounds_read[rid]
        record = read.records[0]
        if not _written(store, m, read, kept_meta):
            continue  # text that only looks like a tag (a user's, say): left as it is
        if record is None or record.get("k") != "round":
            done.add(rid)
            (corrupt if read.corrupt or record is not None else missing).append(rid)
            continue
        found.append((pos, rid, record))
    for pos, rid, record in found:
        inside = msgs[pos].fingerprint
        if any(inside in other["out"] for _, o, other in found if o != rid):
            continue  # its tag is in a newer round's output: that one first
        read = load(store, record["in"])
        originals = read.records
        lost = [i for i, r in zip(record["in"], originals, strict=True) if r is None]
        if lost:
            done.add(rid)
            corrupt.extend(read.corrupt)
            missing.extend(i for i in lost if i not in read.corrupt)
            continue
        rest = msgs[:pos] + msgs[pos + 1 :]
        spots = _subsequence(rest, record["out"])
        if spots is None:
            continue  # its output is not all here (yet)
        # The originals take the place of the round's output: its first message, or its
        # tag when that comes first (a round whose output is only its note).
        first = min(spots[0], pos) if spots else pos
        taken = set(spots)
        restored = [message_from_record(r) for r in originals if r is not None]
        done.add(rid)
        return (
            [x for k, x in enumerate(rest[:first]) if k not in taken]
            + restored
            + [x for k, x in enumerate(rest) if k >= first and k not in taken]
        )
    return None


def _round_of(m: Message) -> re.Match[str] | None:
    """The round tag a message starts with (never in a tool's result; a note can speak
    as the user, where strict chat APIs want a user turn): see :func:`_written`."""
    return _ROUND.match(m.text) if m.role != "tool" else None


def _written(store: VerbatimStore, m: Message, read: Read | None, kept_meta: bool) -> bool:
    """Whether ``m``, whose first line is the tag of a round whose record ``read``
    holds, is that round's own message: its metadata says so, or (its metadata lost
    on the way through a wire format) the store names it, by its fingerprint, as the
    message that carries the round's tag (for a round stored before that was kept:
    any message but a tool's). For a round the store lacks, the message is taken for
    its own (to be reported missing) only when its metadata may have been lost: not
    with ``kept_meta`` (a :class:`CompressionResult`'s messages), where a tag nothing
    vouches for is text. A copy of the tag in another message is text, never
    spliced."""
    match = _ROUND.match(m.text)
    if match is None:
        return False
    meta = m.metadata.get(NOTE_KEY)
    if isinstance(meta, Mapping) and meta.get("round") == match.group(1):
        return True
    if read is None or read.records[0] is None:
        return not kept_meta  # the store lacks the round: missing, unless text
    carrier = store.get_many([tag_key(match.group(1))])[0]
    return carrier is None or carrier == m.fingerprint.encode("ascii")


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
    return transcript(originals(store, entry_id))


def originals(store: VerbatimStore, entry_id: str) -> list[Message]:
    """The messages behind one id (an ``[expand <id>]`` marker's or a ``[secret <id>]``
    mark's: its message; a round's: the messages it hid), which :func:`expand` gives
    as text. :class:`ExpandError` if the store lacks them."""
    entry_id = entry_id.removeprefix("[expand ").removesuffix("]").strip()
    read = load(store, [entry_id])
    _refuse_corrupt(read.corrupt)
    record = read.records[0]
    if record is None:
        raise ExpandError(
            f"nothing is stored under {entry_id!r}; use an id from an [expand <id>] marker "
            "or a reference block, with the store the compression used (a session's own "
            "ids: Session.load(session_id, store=...).expand(id))"
        )
    if record.get("k") == "msg":
        return [message_from_record(record)]
    ids = record.get("hid") or []  # a round: what its output no longer shows
    read = load(store, ids)
    _refuse_corrupt(read.corrupt)
    rows = read.records
    absent = [i for i, r in zip(ids, rows, strict=True) if r is None]
    if absent:
        raise ExpandError(f"{entry_id!r} refers to ids the store lacks: {', '.join(absent)}")
    return [message_from_record(r) for r in rows if r is not None]


def _refuse_corrupt(ids: list[str]) -> None:
    if ids:
        raise CorruptRecordError(
            f"the store's record under {', '.join(ids)} is not what was written there "
            "(altered or unreadable), so it is not given back; restore the store from a "
            "backup, or compress the original history again",
            ids=tuple(ids),
        )


#: Another name for :func:`expand`.
uncompress = expand
