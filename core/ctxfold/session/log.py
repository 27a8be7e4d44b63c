"""A session's record in a store: its messages and its compactions, append-only.

Every key a session writes lives in its own namespace of the store
(:class:`ctxfold.storage.NamespacedStore`, ``ctxfold:session:<length of id>:<id>:``), and no key is
ever written twice, so the record works on every store, SQLite and Redis included:

- ``<epoch>:m:<n>``: message ``n`` of the history, as the reversible layer records it;
- ``<epoch>:c:<k>``: compaction ``k``: how many messages it covers, the prefix it left,
  which message of the history each prefix message stands for, and what it did with
  each message it took in;
- ``e:<epoch>``: :meth:`SessionLog.clear` opened this epoch; the older ones stay in the
  store (nothing is ever lost), unseen by the session.

One writer per session at a time: two processes appending to one session id race.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import CorruptRecordError
from ..messages import Message
from ..result import Action, Decision
from ..reversible.records import encode, message_from_record, message_record
from ..storage.store import NamespacedStore, VerbatimStore

__all__ = ["Fold", "SessionLog", "namespace"]

_PROBE = 256  # keys read per round trip while counting what a session holds


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


def _decision(
    index: int, action: Action, reason: str, before: int, after: int, step: str, flags: Any
) -> Decision:
    return Decision(index, action, reason, before, after, step, tuple(flags))


class SessionLog:
    """The stored record of one session: append messages and folds, read them back."""

    def __init__(self, store: VerbatimStore, session_id: str) -> None:
        self.store = NamespacedStore(store, namespace(session_id))
        self.session_id = session_id
        self.epoch = self._count(lambda n: f"e:{n + 1}")
        self.messages = 0  # how many this epoch holds
        self.folds = 0

    def _count(self, key: Callable[[int], str], start: int = 0) -> int:
        """How many of ``key(start)``, ``key(start + 1)``, ... exist, up to the first gap."""
        n = start
        while True:
            got = self.store.get_many([key(k) for k in range(n, n + _PROBE)])
            for value in got:
                if value is None:
                    return n
                n += 1

    def _read(self, keys: Sequence[str]) -> Iterator[dict[str, Any]]:
        for key, value in zip(keys, self.store.get_many(keys), strict=True):
            try:
                record = json.loads(value) if value is not None else None
            except ValueError:
                record = None
            if not isinstance(record, dict):
                raise CorruptRecordError(
                    f"session {self.session_id!r}: the record {key!r} is missing or not "
                    "JSON; the store was changed behind the session"
                )
            yield record

    def load(self) -> tuple[list[Message], list[Fold]]:
        """The history and the folds of the current epoch."""
        e = self.epoch
        self.messages = self._count(lambda n: f"{e}:m:{n}")
        self.folds = self._count(lambda n: f"{e}:c:{n}")
        keys = [f"{e}:m:{n}" for n in range(self.messages)]
        history = [message_from_record(r) for r in self._read(keys)]
        folds = [Fold.from_record(r) for r in self._read([f"{e}:c:{k}" for k in range(self.folds)])]
        return history, folds

    def exists(self) -> bool:
        """Whether anything was ever written for this session (a message, or a clear)."""
        return self.epoch > 0 or self.messages > 0

    def append(self, messages: Sequence[Message]) -> None:
        """Store ``messages`` after the history, in one atomic write."""
        e, n = self.epoch, self.messages
        self.store.put_many(
            {f"{e}:m:{n + k}": encode(message_record(m)) for k, m in enumerate(messages)}
        )
        self.messages += len(messages)

    def add_fold(self, fold: Fold) -> None:
        """Store the newest compaction."""
        self.store.put_many({f"{self.epoch}:c:{self.folds}": encode(fold.record())})
        self.folds += 1

    def clear(self) -> None:
        """Open a new, empty epoch; the old one stays in the store."""
        self.store.put_many({f"e:{self.epoch + 1}": b"{}"})
        self.epoch += 1
        self.messages = self.folds = 0
