"""A session's record in a store: its messages and its compactions, append-only.

Every key a session writes lives in its own namespace of the store
(:class:`ctxfold.storage.NamespacedStore`, ``ctxfold:session:<length of id>:<id>:``), and no key is
ever written twice, so the record works on every store, SQLite and Redis included:

- ``<epoch>:m:<n>``: message ``n`` of the history, as the reversible layer records it;
- ``<epoch>:c:<k>``: compaction ``k``: how many messages it covers, the prefix it left,
  which message of the history each prefix message stands for, what it did with each
  message it took in, the token counts of the messages it took in after the
  compaction before it (so a reopened session does not count them again), and how
  many messages the history held when it was written;
- ``<epoch>:mw:<k>``, ``<epoch>:cw:<k>``: landmarks: written with message (compaction)
  ``256 k``, the digest after it, so a reader knows how far each series reaches
  before it reads it;
- ``e:<epoch>``: :meth:`SessionLog.clear` opened this epoch, and closed the one before
  with a record in its place ``<epoch - 1>:m:<n>``; the older epochs stay in the store
  (nothing is ever lost), unseen by the session. :meth:`SessionLog.truncate` does the
  same, and its marker says how many messages and compactions of the epoch before the
  new one keeps by reference (a history cut back writes two records, not what it
  keeps): record ``n`` of a series is read from the newest epoch that wrote it.

Every record is stored as ``{"d": <digest>, "r": <record>, "v": 3}``: ``d`` chains the
SHA-256 of the record to the one before it (a compaction's also to the history it
covers), starting from the session's namespace and epoch; epoch markers have a chain of
their own. The last record of every write also holds its head, ``"h": [<compactions>]``
(chained with it): how many compactions the log held, so a reader knows where each
series ends. An edited, reordered, copied or missing record, a series that ends before
a landmark or a head says, a write cut in two, a missing or inserted epoch marker, a
record of another format among chained ones: each is a
:class:`ctxfold.exceptions.CorruptRecordError` naming the session and the record,
never a wrong history. What a deletion can still do is take a session back to a state
it had after one of its writes (see ``SECURITY.md``).

Logs written by an older ctxfold (:class:`Format`: bare records, or chained records
without heads) are not read: opening one is a :class:`CorruptRecordError` saying to run
:func:`migrate` (or ``ctxfold migrate <id> --store <spec>``) once, which copies such a
log, if every record of it is of that one format, into a new epoch of the current one.

A reader racing a writer reads one state the log had: the messages, then the
compactions, reading on to the messages a compaction covers that were stored after it
read them (and to the compactions their heads count); a clear stored meanwhile ends
the history where it closed the epoch.

Writes never overwrite: each goes where the next record belongs, and only if that place
is free (:func:`ctxfold.storage.put_new`, atomic on the built-in stores), so a second
writer on the same session (another process, or another ``Session`` object) gets
:class:`ctxfold.exceptions.ConcurrentWriteError` instead of a lost write: optimistic
concurrency, the record's position its version.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._column import Column
from ..exceptions import ConcurrentWriteError
from ..messages import Message
from ..reversible.records import encode, message_record
from ..storage.store import (
    VerbatimStore,
    get_session_store,
    put_new,
)
from .chain import (
    VERSION,
    Format,
    Kept,
    chain_root,
    head_bytes,
    landmark,
    link,
    namespace,
    record_bytes,
)
from .fold import Counts, Fold, counting
from .reader import LogReader

__all__ = [
    "Counts",
    "Fold",
    "Format",
    "SessionLog",
    "counting",
    "migrate",
    "namespace",
    "record_bytes",
]


class SessionLog(LogReader):
    """The stored record of one session: append messages and folds, clear or cut
    it back (reading it is :class:`LogReader`'s)."""

    def _put(self, entries: dict[str, bytes]) -> None:
        taken = put_new(self.store, entries)
        if taken:
            raise ConcurrentWriteError(
                f"session {self.session_id!r}: {taken[0]!r} was written by another writer "
                "since this one read the session; nothing of this write was stored. "
                f"Reopen it (Session.load({self.session_id!r}, store=...)) and write again"
            )

    def _sealed(
        self,
        record: dict[str, Any],
        previous: bytes,
        extra: bytes = b"",
        head: list[int] | None = None,
    ) -> tuple[bytes, bytes]:
        """``record`` in its envelope (the bytes ``encode`` gives the envelope, made
        without encoding the record twice), with ``head`` if the last of a write, and
        the digest after it."""
        payload = encode(record)
        digest = link(previous, extra + payload + head_bytes(head))
        h = b"" if head is None else b'"h":%s,' % head_bytes(head)[1:]
        return b'{"d":"%s",%s"r":%s,"v":%d}' % (digest.hex().encode(), h, payload, VERSION), digest

    def append(self, messages: Sequence[Message]) -> list[bytes]:
        """Store ``messages`` after the history, in one atomic write, if no other
        writer has written there first: the bytes stored for each."""
        e, n = self.epoch, self.messages
        heads = self.heads[-1:]
        entries: dict[str, bytes] = {}
        rows: list[bytes] = []
        for k, m in enumerate(messages):
            head = [self.folds] if k == len(messages) - 1 else None
            previous = self._from("m", n + k, heads[-1])
            row, digest = self._sealed(message_record(m), previous, head=head)
            entries[f"{e}:m:{n + k}"] = row
            entries.update(landmark(e, "m", n + k, digest))
            heads.append(digest)
            rows.append(row)
        self._put(entries)
        self.heads.extend(heads[1:])
        self.messages += len(messages)
        self._counted = self.folds
        return rows

    def add_fold(self, fold: Fold, counts: Counts | None = None) -> None:
        """Store the newest compaction (bound to the history it covers), with the token
        counts of the history messages it took in after the compaction before it (a
        session reopened with the same counting takes them instead of counting those
        messages again), and how many messages the history holds."""
        record = fold.record()
        if counts is not None:
            record["counts"] = counts.record()
        record["n"] = self.messages
        previous = self._from("c", self.folds, self.fold_head)
        sealed, head = self._sealed(record, previous, self.heads[fold.upto])
        entries = {f"{self.epoch}:c:{self.folds}": sealed}
        entries.update(landmark(self.epoch, "c", self.folds, head))
        self._put(entries)
        self.fold_head = head
        self.fold_heads.append(head)
        self.uptos.append(fold.upto)
        self.folds += 1

    def clear(self) -> None:
        """Open a new, empty epoch; the old one stays in the store, closed by a record
        in the place of its next message (so a removed marker is seen)."""
        self._close(None)
        self.messages = self.folds = self._counted = 0
        self._start()

    def truncate(self, keep: int) -> None:
        """Open a new epoch that holds the first ``keep`` messages of this one
        (``0 < keep <= messages``) and the compactions that cover no more than them,
        by reference: only its marker and the record closing this epoch are written,
        whatever the length of what it keeps."""
        if not 0 < keep <= self.messages:
            raise ValueError(f"keep must be in 1..{self.messages}, got {keep}")
        folds = next((k for k, upto in enumerate(self.uptos) if upto > keep), len(self.uptos))
        kept = Kept(keep, folds, self.heads[keep].hex(), self.fold_heads[folds].hex())
        self._close(kept)
        self._kept[self.epoch] = kept
        self._route()
        self.heads = Column(self.heads[: keep + 1])
        self.fold_heads = Column(self.fold_heads[: folds + 1])
        self.fold_head, self.uptos = self.fold_heads[-1], self.uptos[:folds]
        self.messages, self.folds, self._counted = keep, folds, folds

    def _close(self, kept: Kept | None) -> None:
        """Write the marker of the next epoch (keeping ``kept``) and the record that
        closes the current one, in one write, and move to the next epoch."""
        e, n = self.epoch, self.messages
        record = {"k": "epoch", "epoch": e + 1} if kept is None else kept.record(e + 1)
        marker, mark_head = self._sealed(record, self.mark_head)
        previous = self._from("m", n, self.heads[-1])
        closing, digest = self._sealed({"k": "clear", "epoch": e + 1}, previous)
        entries = {f"e:{e + 1}": marker, f"{e}:m:{n}": closing}
        if kept is not None:  # in the place of its message 0, which it holds by reference:
            entries[f"{e + 1}:m:0"] = marker  # what a reader that misses the marker meets
        if not self.form.legacy:
            entries.update(landmark(e, "m", n, digest))
        self._put(entries)
        self.epoch, self.mark_head, self.form = e + 1, mark_head, Format.CURRENT

    def upgrade(self) -> None:
        """Copy the current epoch, of an older :class:`Format`, into a new epoch of the
        current one, in one write: every message and compaction as stored, chained
        now, and the old epoch closed (as :meth:`clear` closes one). Its records are
        read (and checked as their format allows) again first; a log made with
        ``migrating``."""
        self._start()
        records = [record for _, record in self._message_records()]
        self.messages, self.folds, self._counted = len(records), 0, 0
        folds = [record for _, record, _ in self._fold_records()]
        e, n, f = self.epoch, len(records), len(folds)
        marker, mark_head = self._sealed({"k": "epoch", "epoch": e + 1}, self.mark_head)
        closing, _ = self._sealed({"k": "clear", "epoch": e + 1}, self.heads[-1])
        entries = {f"e:{e + 1}": marker, f"{e}:m:{n}": closing}
        heads = [chain_root(self.session_id, e + 1, Format.CURRENT)]
        for k, record in enumerate(records):
            row, digest = self._sealed(record, heads[-1], head=[f] if k == n - 1 else None)
            entries[f"{e + 1}:m:{k}"] = row
            entries.update(landmark(e + 1, "m", k, digest))
            heads.append(digest)
        fold_heads = [heads[0]]
        for k, record in enumerate(folds):
            upto = record["upto"]
            row, fold_head = self._sealed({**record, "n": n}, fold_heads[-1], heads[upto])
            entries[f"{e + 1}:c:{k}"] = row
            entries.update(landmark(e + 1, "c", k, fold_head))
            fold_heads.append(fold_head)
        self._put(entries)
        self.epoch, self.mark_head, self.form = e + 1, mark_head, Format.CURRENT
        self._route()
        self.heads, self.fold_heads = Column(heads), Column(fold_heads)
        self.fold_head, self.uptos = fold_heads[-1], [record["upto"] for record in folds]
        self.messages, self.folds, self._counted = n, f, f


def migrate(session_id: str, *, store: VerbatimStore | str) -> bool:
    """Copy the session ``session_id``, stored by an older ctxfold (records without
    digests, or chained without heads), into a new epoch of the current format, once,
    in one atomic write: every message and compaction kept, the old records left where
    they are, the old epoch closed. Such a session is not read until then (a record of
    the first format has no digest: whoever can write the store could have written
    it), so run this only on a store whose records you trust. Returns whether it
    copied anything (``False``: the session is current, or empty). Raises
    :class:`ctxfold.exceptions.CorruptRecordError` for records that do not read as
    their format (nothing is written then), and
    :class:`ctxfold.exceptions.ConcurrentWriteError` if a writer wrote the session
    meanwhile (run it again)."""
    log = SessionLog(get_session_store(store), session_id, migrating=True)
    log.load()
    for _ in log._fold_records():
        pass
    if not log.form.legacy:
        return False
    log.upgrade()
    return True
