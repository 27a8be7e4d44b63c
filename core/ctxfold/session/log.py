"""A session's record in a store: its messages and its compactions, append-only.

Every key a session writes lives in its own namespace of the store
(:class:`ctxfold.storage.NamespacedStore`, ``ctxfold:session:<length of id>:<id>:``), and no key is
ever written twice, so the record works on every store, SQLite and Redis included:

- ``<epoch>:m:<n>``: message ``n`` of the history, as the reversible layer records it;
- ``<epoch>:c:<k>``: compaction ``k``: how many messages it covers, the prefix it left,
  which message of the history each prefix message stands for, what it did with each
  message it took in, and the token counts of the messages it took in after the
  compaction before it (so a reopened session does not count them again);
- ``e:<epoch>``: :meth:`SessionLog.clear` opened this epoch; the older ones stay in the
  store (nothing is ever lost), unseen by the session.

Every record is stored as ``{"v": 2, "d": <digest>, "r": <record>}``: ``d`` chains the
SHA-256 of the record to the one before it (a compaction's also to the history it
covers), starting from the session's namespace and epoch, so an edited, reordered,
copied or missing record is a :class:`ctxfold.exceptions.CorruptRecordError` naming the
session and the position, never a wrong history. (Records of the first format, bare and
unchained, are still read; a format of a later version is refused.)

Writes never overwrite: each goes where the next record belongs, and only if that place
is free (:func:`ctxfold.storage.put_new`, atomic on the built-in stores), so a second
writer on the same session (another process, or another ``Session`` object) gets
:class:`ctxfold.exceptions.ConcurrentWriteError` instead of a lost write: optimistic
concurrency, the record's position its version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._column import Column
from ..exceptions import ConcurrentWriteError, CorruptRecordError
from ..messages import ContentPart, Message, ToolCall
from ..result import Action, Decision
from ..reversible.records import encode, message_from_record, message_record
from ..storage.store import NamespacedStore, VerbatimStore, put_new
from ..tokens import TokenCounter

__all__ = ["Counts", "Fold", "SessionLog", "counting", "namespace", "record_bytes"]

_PROBE = 256  # keys read per round trip while counting what a session holds
_VERSION = 2  # of the stored form of a record (1: the bare record, unchained)


def record_bytes(raw: bytes) -> bytes | None:
    """The record's own bytes inside a stored envelope as :meth:`SessionLog._sealed`
    writes it (``encode(record)``), or ``None`` for any other layout (the record is
    then encoded again)."""
    head, tail = b'{"d":"', b',"v":%d}' % _VERSION
    at = len(head) + 64 + len(b'","r":')
    if raw.startswith(head) and raw.endswith(tail) and raw[len(head) + 64 : at] == b'","r":':
        return raw[at : -len(tail)]
    return None


def _link(previous: bytes, payload: bytes) -> bytes:
    """The running digest after a record whose stored bytes are ``payload``."""
    return hashlib.sha256(previous + payload).digest()


def namespace(session_id: str) -> str:
    """The prefix of every key the session ``session_id`` writes."""
    # With the id's length in it, no session's namespace begins another's.
    return f"ctxfold:session:{len(session_id)}:{session_id}:"


@dataclass(frozen=True)
class Fold:
    """What a compaction left: the first ``upto`` messages of the history now stand as
    ``prefix``; ``sources[j]`` is the history index prefix message ``j`` stands for
    (``None`` for a note); ``decisions`` what the compaction did with each history
    message it took in (kept ones are not listed); ``round_id`` names its round;
    ``savings`` the tokens each layer and the selection saved (as
    :attr:`ctxfold.CompressionStats.savings`; empty in a record stored before it)."""

    upto: int
    prefix: tuple[Message, ...]
    sources: tuple[int | None, ...]
    decisions: tuple[Decision, ...]
    round_id: str
    savings: Mapping[str, int] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The JSON form stored under ``<epoch>:c:<k>``."""
        return {
            "upto": self.upto,
            "prefix": [message_record(m) for m in self.prefix],
            "sources": list(self.sources),
            "decisions": [
                [d.index, d.action, d.reason, d.tokens_before, d.tokens_after, d.step, d.flags]
                for d in self.decisions
            ],
            "round": self.round_id,
            "savings": dict(self.savings),
        }

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> Fold:
        """The fold stored as ``r`` (see :meth:`record`)."""
        return cls(
            upto=int(r["upto"]),
            prefix=tuple(message_from_record(m) for m in r["prefix"]),
            sources=tuple(r["sources"]),
            decisions=tuple(_decision(*d) for d in r["decisions"]),
            round_id=str(r["round"]),
            savings={str(k): int(v) for k, v in dict(r.get("savings", {})).items()},
        )


#: Messages any two counters count differently (scripts, code, numbers, a name, a tool
#: call, an image): what a counter gives them tells its counting apart (see
#: :func:`counting`).
_TELLING = (
    Message("system", "Résumé: naïve café, 東京の天気は晴れです。 Привет, мир! 🙂 ≥ ½"),
    Message("user", "def f(x):\n    return x ** 2  # 12,345.67\n\tand   spaces  ", name="ana"),
    Message("assistant", None, tool_calls=(ToolCall("c1", "get_weather", '{"city": "Zürich"}'),)),
    Message("user", (ContentPart("text", "See:"), ContentPart("image_url", extra='{"u": "x"}'))),
)


def counting(counter: TokenCounter, redact: bool) -> list[Any]:
    """What tells a session's counting apart, as :class:`Counts` records it: its
    counter's name, whether it redacts (it counts masked messages), and what the
    counter gives messages any two counters count differently: a session reopened with
    another counter, or other overheads, counts its history again."""
    return [counter.name, redact, *map(counter.count_message, _TELLING)]


@dataclass(frozen=True)
class Counts:
    """The token counts a compaction stores: of the history messages it took in after
    the compaction before it (``tokens``), and what counted them (``by``: whatever the
    session says tells its counting apart, compared whole on reading)."""

    tokens: list[int]
    by: list[Any]

    def record(self) -> dict[str, Any]:
        """The JSON form a compaction record holds under ``counts``."""
        return {"tokens": self.tokens, "by": self.by}

    @classmethod
    def from_record(cls, value: Any) -> Counts | None:
        """The counts stored as ``value``, or None where there are none that hold."""
        if not isinstance(value, dict):
            return None
        tokens, by = value.get("tokens"), value.get("by")
        if not isinstance(by, list) or not isinstance(tokens, list):
            return None
        if not all(type(n) is int and n >= 0 for n in tokens):
            return None
        return cls(tokens, by)


def _decision(
    index: int, action: Action, reason: str, before: int, after: int, step: str, flags: Any
) -> Decision:
    return Decision(index, action, reason, before, after, step, tuple(flags))


class SessionLog:
    """The stored record of one session: append messages and folds, read them back,
    each checked against the running digest of what came before."""

    def __init__(self, store: VerbatimStore, session_id: str) -> None:
        self.store = NamespacedStore(store, namespace(session_id))
        self.session_id = session_id
        self.epoch = sum(1 for _ in self._records(lambda n: f"e:{n + 1}"))
        self.messages = 0  # how many this epoch holds
        self.folds = 0
        self._start()

    def _start(self) -> None:
        root = _link(namespace(self.session_id).encode(), str(self.epoch).encode())
        self.heads = Column([root])  # heads[n]: the digest of the first n messages
        self.fold_head = root

    def _corrupt(self, key: str, why: str) -> CorruptRecordError:
        return CorruptRecordError(
            f"session {self.session_id!r}: the record {key!r} {why}; the store was changed "
            "behind the session (restore it from a backup, or start the session over "
            "with Session.clear())",
            ids=(key,),
        )

    def _records(self, key: Callable[[int], str]) -> Iterator[tuple[str, bytes]]:
        """Each of ``key(0)``, ``key(1)``, ... and its stored bytes, up to the first gap
        (a record after a gap is a :class:`CorruptRecordError`), read ``_PROBE`` keys per
        round trip: only one round trip's records are held at a time."""
        n = 0
        while True:
            keys = [key(k) for k in range(n, n + _PROBE)]
            got = self.store.get_many(keys)
            for k, value in enumerate(got):
                if value is None:
                    later = next((j for j in range(k + 1, len(got)) if got[j] is not None), None)
                    if later is not None:
                        raise self._corrupt(keys[k], f"is missing, and {keys[later]} is not")
                    return
                yield keys[k], value
            n += _PROBE

    def _read(self, key: Callable[[int], str]) -> Iterator[tuple[str, bytes, dict[str, Any]]]:
        """Each record of :meth:`_records`, its stored bytes and its envelope."""
        for name, value in self._records(key):
            try:
                record = json.loads(value)
            except ValueError:
                record = None
            if not isinstance(record, dict):
                raise self._corrupt(name, "is not JSON")
            yield name, value, record

    def _opened(
        self,
        key: str,
        envelope: dict[str, Any],
        previous: bytes,
        extra: bytes = b"",
        raw: bytes = b"",
    ) -> tuple[dict[str, Any], bytes]:
        """The record in ``envelope`` and the digest after it (checked)."""
        version = envelope.get("v", 1)
        if version == 1 and "r" not in envelope:
            return envelope, previous  # the first format: unchained
        if version != _VERSION:
            raise self._corrupt(
                key, f"has format {version!r}, which this ctxfold does not know: upgrade it"
            )
        record = envelope.get("r")
        payload = record_bytes(raw) if raw else None
        if payload is None and isinstance(record, dict):
            payload = encode(record)
        digest = _link(previous, extra + payload) if payload is not None else b""
        if not isinstance(record, dict) or envelope.get("d") != digest.hex():
            raise self._corrupt(key, "does not match the digest of the records before it")
        return record, digest

    def _sealed(
        self, record: dict[str, Any], previous: bytes, extra: bytes = b""
    ) -> tuple[bytes, bytes]:
        """``record`` in its envelope (the bytes ``encode`` gives the envelope, made
        without encoding the record twice), and the digest after it."""
        payload = encode(record)
        digest = _link(previous, extra + payload)
        return b'{"d":"%s","r":%s,"v":%d}' % (digest.hex().encode(), payload, _VERSION), digest

    def load(self) -> tuple[list[Message], list[bytes]]:
        """The history of the current epoch, each message checked, and each one's
        stored bytes; then :meth:`compactions` gives its compactions."""
        self._start()
        history: list[Message] = []
        rows: list[bytes] = []
        for key, raw, envelope in self._read(lambda n: f"{self.epoch}:m:{n}"):
            record, head = self._opened(key, envelope, self.heads[-1], raw=raw)
            try:
                history.append(message_from_record(record))
            except (KeyError, TypeError, ValueError):
                raise self._corrupt(key, "is not a message") from None
            self.heads.append(head)
            rows.append(raw)
        self.messages, self.folds = len(history), 0
        return history, rows

    def compactions(self) -> Iterator[tuple[Fold, Counts | None]]:
        """The compactions of the current epoch, each checked, one at a time (after
        :meth:`load`): a long session's are never all in memory at once. Each with the
        token counts it stored (see :meth:`add_fold`), or None."""
        for key, raw, envelope in self._read(lambda k: f"{self.epoch}:c:{k}"):
            inner = envelope.get("r", envelope)
            upto = inner.get("upto") if isinstance(inner, dict) else None
            if not isinstance(upto, int) or not 0 <= upto <= self.messages:
                raise self._corrupt(key, f"covers {upto!r} messages of {self.messages}")
            record, self.fold_head = self._opened(
                key, envelope, self.fold_head, self.heads[upto], raw=raw
            )
            yield self._fold(key, record, upto), Counts.from_record(record.get("counts"))
            self.folds += 1

    def _fold(self, key: str, record: dict[str, Any], upto: int) -> Fold:
        try:
            fold = Fold.from_record(record)
        except (KeyError, TypeError, ValueError):
            raise self._corrupt(key, "is not a compaction") from None
        if any(i is not None and not 0 <= i < upto for i in fold.sources) or any(
            not 0 <= d.index < upto for d in fold.decisions
        ):
            raise self._corrupt(key, "refers to messages outside what it covers")
        return fold

    def exists(self) -> bool:
        """Whether anything was ever written for this session (a message, or a clear)."""
        return self.epoch > 0 or self.messages > 0

    def _put(self, entries: dict[str, bytes]) -> None:
        taken = put_new(self.store, entries)
        if taken:
            raise ConcurrentWriteError(
                f"session {self.session_id!r}: {taken[0]!r} was written by another writer "
                "since this one read the session; nothing of this write was stored. "
                f"Reopen it (Session.load({self.session_id!r}, store=...)) and write again"
            )

    def append(self, messages: Sequence[Message]) -> list[bytes]:
        """Store ``messages`` after the history, in one atomic write, if no other
        writer has written there first: the bytes stored for each."""
        e, n = self.epoch, self.messages
        heads = self.heads[-1:]
        entries: dict[str, bytes] = {}
        for k, m in enumerate(messages):
            entries[f"{e}:m:{n + k}"], head = self._sealed(message_record(m), heads[-1])
            heads.append(head)
        self._put(entries)
        self.heads.extend(heads[1:])
        self.messages += len(messages)
        return list(entries.values())

    def add_fold(self, fold: Fold, counts: Counts | None = None) -> None:
        """Store the newest compaction (bound to the history it covers), with the token
        counts of the history messages it took in after the compaction before it (a
        session reopened with the same counting takes them instead of counting those
        messages again)."""
        record = fold.record()
        if counts is not None:
            record["counts"] = counts.record()
        sealed, head = self._sealed(record, self.fold_head, self.heads[fold.upto])
        self._put({f"{self.epoch}:c:{self.folds}": sealed})
        self.fold_head = head
        self.folds += 1

    def clear(self) -> None:
        """Open a new, empty epoch; the old one stays in the store."""
        self._put({f"e:{self.epoch + 1}": b"{}"})
        self.epoch += 1
        self.messages = self.folds = 0
        self._start()
