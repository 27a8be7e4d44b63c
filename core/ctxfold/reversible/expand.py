"""Giving back what compression folded: a whole history through every round, or the
text behind one id."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..exceptions import CorruptRecordError, ExpandError
from ..formats import read_messages
from ..messages import Message, transcript
from ..result import NOTE_KEY, CompressionResult, without_recall
from ..storage.retention import Retains
from ..storage.store import SESSION_PREFIX, NamespacedStore, VerbatimStore, get_store
from ..wire.openai import to_openai
from .records import Read, load, message_from_record, tag_key
from .redaction import unredact

__all__ = [
    "Expansion",
    "expand",
    "holding",
    "located",
    "originals",
    "uncompress",
    "with_notes_known",
]

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
    target: CompressionResult | Sequence[Message | Mapping[str, Any]] | Mapping[str, Any] | str,
    *,
    store: VerbatimStore | str | None = None,
) -> Any:
    """Give back what compression folded.

    - a :class:`CompressionResult` or a list of messages (in any format ctxfold reads:
      OpenAI or Anthropic dicts, a framework's messages): an :class:`Expansion` with
      the original conversation, rebuilt through every round found (the newest
      first), and the ids the store lacked (``missing``) instead of a silent gap;
    - an id (from an ``[expand <id>]`` marker, a round's tag or a reference): the text
      it stands for (a message's, or the transcript of the messages a round hid);
      raises :class:`ExpandError` if the store does not have it;
    - a session's compaction record (:attr:`ctxfold.Session.compaction`, what an
      agent's state keeps under ``ctxfold``): the text of its round's originals, as
      for its round id.

    ``store`` is where the originals are (default: a result's own store, else the
    process's). A session writes in its own part of its store: given the store
    itself (its spec: ``"sqlite:///rounds.db"``, a Redis URL), a round or an id found
    nowhere else is looked up in the parts its sessions wrote (:func:`located`), so a
    round id, a rendered message list or a record read back without the session's id.
    :meth:`ctxfold.Session.expand` reads one session's part only.

    A message that starts with a round's tag is that round's only when its metadata
    or the store says so (see :func:`_written`). A tag the store knows nothing of is
    reported ``missing`` when the messages came through a wire format (their
    metadata lost: a round of another store, or a session's); in a
    :class:`CompressionResult`, whose own notes carry their metadata, it is text
    (a user's message that starts with a tag leaves the expansion complete).
    """
    st = _store_of(target, store)
    if isinstance(target, Mapping):
        target = _round_of_record(target)
    if isinstance(target, str):
        return _expand_id(st, target.strip())
    # A result's own messages keep their metadata: a round's message says so itself.
    kept_meta = isinstance(target, CompressionResult)
    # a list in any format the entry points read (OpenAI or Anthropic dicts, LangChain's)
    msgs = (
        list(target.messages) if isinstance(target, CompressionResult) else read_messages(target)[0]
    )
    msgs = without_recall(msgs)  # a recall block quotes the history: it is no part of it
    missing: list[str] = []
    corrupt: list[str] = []
    rounds = 0
    done: set[str] = set()  # rounds undone, or known to be missing
    rounds_read: dict[str, Read] = {}  # each round's record is read once
    seen = (done, missing, corrupt, rounds_read)
    where: dict[str, VerbatimStore] = {}  # the part of the store each round is in

    def locate(rid: str) -> VerbatimStore:
        if rid not in where:
            where[rid] = located(st, rid)
        return where[rid]

    while (undone := _undo_newest(locate, msgs, *seen, kept_meta=kept_meta)) is not None:
        msgs = undone
        rounds += 1
    for m in msgs:  # rounds whose output is not all here any more
        match = _round_of(m)
        rid = match.group(1) if match else None
        if rid and rid not in done and _written(locate(rid), m, rounds_read.get(rid), kept_meta):
            missing.append(rid)
    # credentials masked on the way in: put back from the part the newest round is in
    msgs, lost = unredact(msgs, next(iter(where.values()), st))
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


def _round_of_record(record: Mapping[str, Any]) -> str:
    """The round id of a session's compaction record; an :class:`ExpandError` that
    says what to pass for any other mapping."""
    fold = record.get("fold")
    rid = fold.get("round") if isinstance(fold, Mapping) else None
    if not isinstance(rid, str) or not rid:
        raise ExpandError(
            "expand takes a mapping only as a session's compaction record (an agent "
            "state's 'ctxfold' field), and this one names no round; pass a round id, "
            "an [expand <id>] marker, a list of messages or a CompressionResult"
        )
    return rid


def located(store: VerbatimStore, entry_id: str) -> VerbatimStore:
    """The part of ``store`` that holds ``entry_id``: ``store`` itself when it holds
    it, is one part already (a :class:`~ctxfold.storage.NamespacedStore`) or cannot
    list its parts (not :class:`~ctxfold.storage.Retains`); else the part a session
    wrote that holds it (the one written last, when several do: an id names its
    content), or ``store`` when none does. One read of the store, and one per 500
    sessions it holds."""
    if isinstance(store, NamespacedStore) or not isinstance(store, Retains):
        return store
    entry_id = _bare(entry_id)
    if store.get_many([entry_id])[0] is not None:
        return store
    written = store.namespaces(SESSION_PREFIX)
    spaces = sorted(written, key=lambda ns: (-written[ns], ns))
    for start in range(0, len(spaces), 500):
        chunk = spaces[start : start + 500]
        for ns, value in zip(chunk, store.get_many([ns + entry_id for ns in chunk]), strict=True):
            if value is not None:
                return NamespacedStore(store, ns)
    return store


def holding(stores: Sequence[VerbatimStore], entry_id: str) -> VerbatimStore | None:
    """The first of ``stores`` that holds a record under ``entry_id`` (an id, or an
    ``[expand <id>]`` marker), or ``None``."""
    key = _bare(entry_id)
    for store in stores:
        if store.get_many([key])[0] is not None:
            return store
    return None


def _bare(entry_id: str) -> str:
    """The id an ``[expand <id>]`` marker (or an id) names."""
    return entry_id.removeprefix("[expand ").removesuffix("]").strip()


def _undo_newest(
    locate: Callable[[str], VerbatimStore],
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
    (or ``corrupt``). ``locate`` gives the store each round is in; ``kept_meta``: see
    :func:`_written`."""
    found: list[tuple[int, str, dict[str, Any]]] = []
    for pos, m in enumerate(msgs):
        match = _round_of(m)
        if not match or match.group(1) in done:
            continue
        rid = match.group(1)
        store = locate(rid)
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
        read = load(locate(rid), record["in"])
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


def with_notes_known(store: VerbatimStore, messages: list[Message]) -> list[Message]:
    """``messages`` with the note metadata a wire format dropped given back to each
    round's own message that speaks as the user (where strict chat APIs want a user
    turn), so that it is read as history, not as the user's task: only where ``store``
    names it, by its fingerprint, as the message that carries the round's tag. A
    user's text that copies a tag stays the user's (see :func:`_written`)."""
    spots = [
        (i, match)
        for i, m in enumerate(messages)
        if m.role == "user"
        and NOTE_KEY not in m.metadata
        and (match := _ROUND.match(m.text)) is not None
    ]
    if not spots:
        return messages
    carriers = store.get_many([tag_key(match.group(1)) for _, match in spots])
    out = list(messages)
    for (i, match), carrier in zip(spots, carriers, strict=True):
        m = messages[i]
        if carrier is not None and carrier == m.fingerprint.encode("ascii"):
            what = m.text[match.end(1) :].split("\n", 1)[0].removeprefix(": ").rstrip("]")
            meta = {"what": what, "round": match.group(1)}
            out[i] = replace(m, metadata={**m.metadata, NOTE_KEY: meta})
    return out


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
    return transcript(originals(located(store, entry_id), entry_id))


def originals(store: VerbatimStore, entry_id: str) -> list[Message]:
    """The messages behind one id (an ``[expand <id>]`` marker's or a ``[secret <id>]``
    mark's: its message; a round's: the messages it hid), which :func:`expand` gives
    as text. :class:`ExpandError` if the store lacks them."""
    entry_id = _bare(entry_id)
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
