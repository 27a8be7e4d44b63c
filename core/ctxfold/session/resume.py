"""The record of a session's current compaction that a history kept elsewhere carries
(an agent's checkpointed state): made by :attr:`Session.compaction`, checked against
the history by :meth:`Session.resume` before it is taken up.

Whoever can edit the checkpoint can edit the record, so a record is taken up only when
all of this holds (:func:`adopted`), else the session compacts the history afresh:

- it is of this format (:data:`RECORD_VERSION`) and carries a MAC (HMAC-SHA256) under
  the store's secret (:func:`ctxfold.reversible.records.secret_key`) over what it holds
  and the digest of the history it covers, message by message (``covers``): a record
  of an older format (no MAC, or an unkeyed digest anyone can recompute) is never
  trusted, and neither is one made for another history;
- every message of its prefix is the history's own message byte for byte (the one its
  source index names), or a rewrite of it in place (shortened, cut, re-encoded: same
  role, same tool call ids, never a pinned one: the system prompt is kept whole), or
  a ctxfold note (its round's, a note on a gap, an earlier round's block it kept);
  every pinned message it covers is in it; it is not empty;
- where the store knows the round, the prefix is the round's output as the store
  recorded it (its messages' fingerprints, and the note as the message that carries the
  round's tag, :func:`ctxfold.reversible.records.tag_key`).

The secret is the store's, not a session namespace's: a resumed session has an id (a
namespace) of its own, and the record is bound to the history it covers, not to a
session. A memory store's secret lives in its process, so a record a memory store
signed verifies in that process only (while the store lives, or with the key of the
process's sessions, which every resume given no store signs with); in another process
it is refused and the history compacted afresh. A persistent store (SQLite, Redis)
keeps its secret, so its records verify across restarts and processes.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import weakref
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..exceptions import CorruptRecordError
from ..messages import Message
from ..result import NOTE_KEY
from ..reversible.records import encode, load, secret_key, tag_key
from ..storage.store import MemoryStore, NamespacedStore, VerbatimStore
from .chain import namespace
from .fold import Fold

__all__ = [
    "RECORD_VERSION",
    "Covering",
    "Outcome",
    "Resumed",
    "adopted",
    "resume_record",
    "verifying_keys",
]

#: The format of the record :func:`resume_record` gives (1: no digest; 2: an unkeyed
#: SHA-256 digest; 3: a MAC under the store's secret, over the covered history too).
RECORD_VERSION = 3
_LABEL = b"ctxfold:resume-record:3\x00"  # the MAC's own domain under the store's secret

#: The memory stores that signed a record in this process (see :func:`verifying_keys`).
_SIGNERS: weakref.WeakSet[MemoryStore] = weakref.WeakSet()
_SIGNERS_LOCK = threading.Lock()  # a set changed by one thread as another reads it raises


class Outcome(Enum):
    """What :meth:`Session.resume` did with the record it was given."""

    NONE = "none"  #: no record was given
    TAKEN = "taken"  #: checked, and made the session's current compaction
    REFUSED = "refused"  #: it could not be verified: the history is compacted afresh


@dataclass(frozen=True)
class Resumed:
    """The outcome of :meth:`Session.resume` (:attr:`Session.resumed`) and, for a
    refused record, why (what failed, never the record's content)."""

    outcome: Outcome
    reason: str = ""


class Covering:
    """The digest of a history's first messages (their fingerprints, in order), kept
    running: a session's record reads it at each new compaction, at the cost of the
    messages folded since the last one."""

    def __init__(self) -> None:
        self._n = 0
        self._hash = hashlib.sha256()

    def digest(self, history: Sequence[Message], upto: int) -> str:
        """The digest of ``history[:upto]`` (``history`` only ever grows)."""
        if upto < self._n:
            self._n, self._hash = 0, hashlib.sha256()
        for m in history[self._n : upto]:
            self._hash.update(m.fingerprint.encode("ascii"))
        self._n = upto
        return self._hash.copy().hexdigest()


def _memory(store: VerbatimStore) -> MemoryStore | None:
    inner: object = store
    while isinstance(inner, NamespacedStore):
        inner = inner.store
    return inner if isinstance(inner, MemoryStore) else None


def verifying_keys(store: VerbatimStore, process: MemoryStore) -> list[bytes]:
    """The secrets a record may be signed with to be taken up in a session on
    ``store``: the store's own; for a memory store also those of ``process`` (the
    process's sessions, whose key every resume given no store signs with) and of the
    memory stores that signed a record in this process and are still alive (a process
    is one keeper of secrets: nobody outside it knows them)."""
    own = secret_key(store)
    if _memory(store) is None:
        return [own]
    with _SIGNERS_LOCK:
        signers = [s.key for s in _SIGNERS]
    return list(dict.fromkeys([own, process.key, *signers]))


def _mac(key: bytes, record: Mapping[str, Any]) -> str:
    """The MAC of ``record`` (its every field but ``mac``) under ``key``."""
    body = encode({k: v for k, v in record.items() if k != "mac"})
    return hmac.new(key, _LABEL + body, hashlib.sha256).hexdigest()


def resume_record(fold: Fold, covers: str, store: VerbatimStore, session_id: str) -> dict[str, Any]:
    """``fold``, the compaction the session ``session_id`` made of a history whose
    first ``fold.upto`` messages have the digest ``covers`` (:class:`Covering`), as a
    JSON-able record signed with the secret of ``store`` (the session's, whole)."""
    memory = _memory(store)
    if memory is not None:
        with _SIGNERS_LOCK:
            _SIGNERS.add(memory)
    record = {
        "version": RECORD_VERSION,
        "fold": fold.record(),
        "covers": covers,
        "session": session_id,  # whose part of the store holds the round
    }
    return {**record, "mac": _mac(secret_key(store), record)}


def adopted(
    compaction: Mapping[str, Any],
    history: Sequence[Message],
    *,
    covering: Covering,
    keys: Sequence[bytes],
    pinned: Collection[str],
    store: VerbatimStore,
    session_id: str,
) -> Fold:
    """The fold ``compaction`` records, verified (see the module) to be a compaction of
    ``history`` signed with one of ``keys``; ``store`` the session's store (whole),
    where the part of the session that made the record holds its rounds; else a
    :class:`CorruptRecordError` naming the session ``session_id`` and what failed."""
    try:
        fold = _signed(compaction, history, covering, keys)
        _check_prefix(fold, history, pinned)
        _check_round(fold, NamespacedStore(store, namespace(str(compaction["session"]))))
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, RecursionError) as exc:
        raise CorruptRecordError(
            f"session {session_id!r}: the compaction record cannot be verified against "
            f"this history ({exc}); it is not taken up (the history is compacted afresh)"
        ) from None
    return fold


def _signed(
    compaction: Mapping[str, Any],
    history: Sequence[Message],
    covering: Covering,
    keys: Sequence[bytes],
) -> Fold:
    """The fold of a record of this format, signed with one of ``keys`` for
    ``history``'s first messages."""
    version = compaction.get("version")
    if version != RECORD_VERSION:
        if isinstance(version, int) and version > RECORD_VERSION:
            raise ValueError(f"format {version!r}, which this ctxfold does not know: upgrade it")
        raise ValueError(f"format {version!r}, unsigned: made by an older ctxfold")
    record, covers, mac = compaction["fold"], compaction["covers"], compaction["mac"]
    if not isinstance(record, Mapping) or not isinstance(mac, str):
        raise ValueError("not a record")
    signed = {k: compaction[k] for k in ("version", "fold", "covers", "session")}
    upto = record["upto"]
    if type(upto) is not int or not 0 <= upto <= len(history):
        raise ValueError("it covers more messages than the history holds")
    if covers != covering.digest(history, upto):
        raise ValueError("the history differs from the one it was made for")
    if not any(hmac.compare_digest(mac, _mac(key, signed)) for key in keys):
        raise ValueError("its MAC is not this store's (made in another process, or changed)")
    fold = Fold.from_record(dict(record))
    if any(i is not None and not (type(i) is int and 0 <= i < upto) for i in fold.sources):
        raise ValueError("indices outside the history")
    if any(not 0 <= d.index < upto for d in fold.decisions):
        raise ValueError("decisions outside the history")
    return fold


def _check_prefix(fold: Fold, history: Sequence[Message], pinned: Collection[str]) -> None:
    """Each prefix message is the history message its source names, byte for byte,
    or a rewrite of it in place (see :func:`_rewrite_of`), or a note (ctxfold's: the
    round's own, a note on a gap, an earlier round's block kept); every pinned
    message covered is there, and the prefix is not empty."""
    if len(fold.prefix) != len(fold.sources):
        raise ValueError("its prefix and sources differ in length")
    if fold.upto and not fold.prefix:
        raise ValueError("its prefix is empty")
    for m, i in zip(fold.prefix, fold.sources, strict=True):
        if i is None:
            if not isinstance(m.metadata.get(NOTE_KEY), Mapping):
                raise ValueError("a message of its prefix is neither the history's nor a note")
        elif m.fingerprint != history[i].fingerprint and not _rewrite_of(m, history[i], pinned):
            raise ValueError(f"its message standing for message {i} is not that message")
    shown = set(fold.sources)
    if any(history[i].role in pinned and i not in shown for i in range(fold.upto)):
        raise ValueError("it leaves out a pinned message")


def _rewrite_of(m: Message, was: Message, pinned: Collection[str]) -> bool:
    """Whether ``m`` may stand for ``was`` rewritten in place: a message the
    compaction shortened, cut or re-encoded (JSON compacted, whitespace folded), which
    the history cannot confirm byte for byte, so the MAC vouches for it (and, where
    the store knows the round, :func:`_check_round`). Never a pinned one (the system
    prompt is kept whole), and never rewired: same role, tool call id and call ids."""
    return (
        m.role == was.role
        and was.role not in pinned
        and m.tool_call_id == was.tool_call_id
        and [c.id for c in m.tool_calls] == [c.id for c in was.tool_calls]
    )


def _check_round(fold: Fold, store: VerbatimStore) -> None:
    """Where ``store`` knows the fold's round: its prefix is what the round stored
    (the fingerprints of its messages, the note the one that carries the tag)."""
    read = load(store, [fold.round_id])
    if read.corrupt:
        raise ValueError("its round is not what the store holds under that id")
    stored = read.records[0]
    if stored is None:
        return  # a round of another session's part of the store: the MAC vouches
    tag = store.get_many([tag_key(fold.round_id)])[0]
    out = [m.fingerprint for m in fold.prefix if m.fingerprint.encode("ascii") != tag]
    if tag is None or len(out) != len(fold.prefix) - 1 or stored.get("out") != out:
        raise ValueError("its prefix is not what its round stored")
