"""Reading a session's log: each record checked against the chain, every series read
to its end a window at a time, a racing writer's records read as one state the log
had (see :mod:`ctxfold.session.log`)."""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .._column import Column
from ..exceptions import CorruptRecordError
from ..messages import Message
from ..reversible.records import encode, message_from_record
from ..storage.store import (
    NamespacedStore,
    VerbatimStore,
)
from .chain import (
    FIELDS,
    FORMS,
    MARKS,
    PROBE,
    Format,
    Kept,
    chain_root,
    head_bytes,
    link,
    namespace,
    record_bytes,
)
from .fold import Counts, Fold

__all__ = ["LogReader"]

#: What a record that does not hold what its format says may raise on reading.
_UNREADABLE = (KeyError, TypeError, ValueError, IndexError, AttributeError)


@dataclass(slots=True)
class _Stored:
    """One stored record as read: its key, its bytes, its format, its envelope's fields."""

    key: str
    raw: bytes
    form: Format
    record: Any  # for the first format, the whole JSON value
    digest: Any = None
    head: Any = None


@dataclass(frozen=True)
class _Read:
    """One round trip's read of a series: its records, the landmarks and other keys read
    with them."""

    values: list[bytes | None]
    marks: list[bytes | None]
    extra: list[bytes | None]


def _past(record: dict[str, Any], messages: int) -> bool:
    """Whether the compaction record ``record`` says the history holds more than
    ``messages`` messages (it covers more, or was written after more)."""
    return any(type(v) is int and v > messages for v in (record.get("upto"), record.get("n")))


class LogReader:
    """Reads the stored record of one session (:class:`SessionLog` writes it): its
    messages and compactions, each checked against the running digest of what came
    before, and where each record is stored."""

    def __init__(self, store: VerbatimStore, session_id: str, *, migrating: bool = False) -> None:
        """``migrating``: read a log of an older :class:`Format` (for :func:`migrate`
        only: such records carry no head, and the first format no digest)."""
        self.store = NamespacedStore(store, namespace(session_id))
        self.session_id = session_id
        self.migrating = migrating
        self.form = Format.CURRENT  # of the current epoch's records (found by load)
        self.messages = 0  # how many this epoch holds
        self.folds = 0
        self._counted = 0  # the compactions the newest write of messages counted
        self._marks: list[bytes] = []  # the landmarks of the messages read
        self._cleared = False  # whether a clear was written since the markers were read
        self._history: list[Message] = []  # what load read: its messages and their bytes
        self._rows: list[bytes] = []
        self._kept: dict[int, Kept] = {}  # the epochs truncate opened, and what they keep
        self._markers()
        self._start()

    def _route(self) -> None:
        """Find where the current epoch's records are stored (see :meth:`_lineage`)."""
        self._owners = {kind: self._lineage(kind) for kind in ("m", "c")}

    def _start(self) -> None:
        self._route()
        root = chain_root(self.session_id, self._owners["m"][1][0], self.form)
        self.heads = Column([root])  # heads[n]: the digest of the first n messages
        self.fold_head = root
        self.fold_heads = Column([root])  # fold_heads[k]: after the first k compactions
        self.uptos: list[int] = []  # how many messages each compaction covers

    def _lineage(self, kind: str) -> tuple[list[int], list[int]]:
        """Where each record of the series ``kind`` of the current epoch is stored: the
        first records an epoch holds (ascending) and the epochs, so that record ``n``
        is in ``epochs[i]`` for the last ``starts[i] <= n``. An epoch that
        :meth:`truncate` opened holds its first records by reference to the one
        before (and so on back)."""
        starts: list[int] = []
        epochs: list[int] = []
        limit, e = None, self.epoch
        while True:
            kept = self._kept.get(e)
            start = 0 if kept is None else kept.messages if kind == "m" else kept.folds
            if limit is None or start < limit:
                starts.append(start)
                epochs.append(e)
                limit = start
            if kept is None or limit == 0:
                return starts[::-1], epochs[::-1]
            e -= 1

    def _owner(self, kind: str, n: int) -> int:
        """The epoch that stores record ``n`` of the series ``kind``."""
        starts, epochs = self._owners[kind]
        if len(epochs) == 1:
            return epochs[0]
        return epochs[bisect.bisect_right(starts, n) - 1]

    def _own(self, kind: str) -> int:
        """The first record of the series ``kind`` the current epoch stores itself."""
        return self._owners[kind][0][-1]

    def _from(self, kind: str, n: int, digest: bytes) -> bytes:
        """What record ``n`` of the series ``kind`` chains from, ``digest`` the digest
        after the records before it: the first own record of an epoch
        :meth:`truncate` opened chains from that digest bound to the epoch, so no
        record the truncation dropped (chained from the same digest) reads in its
        place."""
        starts, epochs = self._owners[kind]
        i = bisect.bisect_right(starts, n) - 1
        if starts[i] != n or epochs[i] not in self._kept:
            return digest
        return link(digest, f"{epochs[i]}:{kind}".encode())

    def _corrupt(self, key: str, why: str) -> CorruptRecordError:
        return CorruptRecordError(
            f"session {self.session_id!r}: the record {key!r} {why}; the store was changed "
            "behind the session (restore it from a backup, or start the session over "
            "with Session.clear())",
            ids=(key,),
        )

    # ------------------------------------------------------------------ reading

    def _get(self, keys: list[str]) -> list[bytes | None]:
        try:
            return self.store.get_many(keys)
        except CorruptRecordError as exc:  # a stored value that is not bytes
            key = exc.ids[0].removeprefix(self.store.namespace) if exc.ids else keys[0]
            raise self._corrupt(key, "is not stored as bytes") from None

    def _records(self, key: Callable[[int], str]) -> Iterator[tuple[str, bytes]]:
        """Each of ``key(0)``, ``key(1)``, ... and its stored bytes, up to the first gap
        (a record after a gap in the same round trip is a :class:`CorruptRecordError`),
        read ``PROBE`` keys per round trip."""
        n = 0
        while True:
            keys = [key(k) for k in range(n, n + PROBE)]
            got = self._get(keys)
            for k, value in enumerate(got):
                if value is None:
                    later = next((j for j in range(k + 1, len(got)) if got[j] is not None), None)
                    if later is not None:
                        raise self._corrupt(keys[k], f"is missing, and {keys[later]} is not")
                    return
                yield keys[k], value
            n += PROBE

    def _parse(self, key: str, value: bytes | None) -> _Stored:
        """The stored record ``value`` read as its envelope says (not yet checked)."""
        if not isinstance(value, bytes):
            raise self._corrupt(key, f"holds a {type(value).__name__}, not bytes")
        try:
            envelope = json.loads(value)
        except (ValueError, RecursionError):
            envelope = None
        if not isinstance(envelope, dict):
            raise self._corrupt(key, "is not a JSON object")
        version, head = envelope.get("v"), envelope.get("h")
        if version == 3 and type(version) is int and len(envelope) == 3 + (head is not None):
            return _Stored(key, value, Format.CURRENT, envelope.get("r"), envelope.get("d"), head)
        if "v" not in envelope and "r" not in envelope:
            return _Stored(key, value, Format.FIRST, envelope)
        form = FORMS.get(version) if type(version) is int else None
        if form is None:
            raise self._corrupt(
                key, f"has format {version!r}, which this ctxfold does not know: upgrade it"
            )
        if not envelope.keys() <= FIELDS[form]:
            raise self._corrupt(key, "holds fields its format does not have")
        return _Stored(key, value, form, envelope.get("r"), envelope.get("d"), head)

    def _checked(self, stored: _Stored, previous: bytes, extra: bytes = b"") -> bytes:
        """The running digest after the chained record ``stored``, checked."""
        payload = record_bytes(stored.raw)
        if payload is None and isinstance(stored.record, dict):
            payload = encode(stored.record)
        digest = b""
        if payload is not None:
            digest = link(previous, extra + payload + head_bytes(stored.head))
        if not isinstance(stored.record, dict) or stored.digest != digest.hex():
            raise self._corrupt(stored.key, "does not match the digest of the records before it")
        return digest

    def _opened(
        self, stored: _Stored, previous: bytes, extra: bytes = b""
    ) -> tuple[dict[str, Any], bytes]:
        """The record in ``stored`` and the digest after it, checked: of the epoch's
        format (one format in a log: a record of an older format among chained ones
        is refused, never read unchecked), and matching the chain."""
        if stored.form is not self.form:
            raise self._corrupt(
                stored.key,
                f"is of the {stored.form.name.lower()} format in a log of the "
                f"{self.form.name.lower()} format (a record replaced by one of another form)",
            )
        if stored.form is Format.FIRST:
            return stored.record, previous  # unchained: read only in a log of its format
        return stored.record, self._checked(stored, previous, extra)

    def _markers(self) -> None:
        """Read the epoch markers: the current epoch, and the digest of their chain
        (markers written before they were chained come first, and only first)."""
        root = self.mark_head = link(namespace(self.session_id).encode(), b"e:3")
        self.epoch = self.bare_markers = 0
        self._kept = {}
        for key, value in self._records(lambda n: f"e:{n + 1}"):
            stored = self._parse(key, value)
            self.epoch += 1
            if stored.form is Format.FIRST and stored.record == {}:
                if self.mark_head != root:
                    raise self._corrupt(key, "is an unchained marker after chained ones")
                self.bare_markers += 1
                continue
            if stored.form is not Format.CURRENT:
                raise self._corrupt(key, "is not an epoch marker")
            self.mark_head = self._checked(stored, self.mark_head)
            try:
                kept = Kept.from_marker(stored.record, self.epoch)
            except ValueError:
                raise self._corrupt(key, f"is not the marker of epoch {self.epoch}") from None
            if kept is not None:
                self._kept[self.epoch] = kept

    def _window(
        self, kind: str, n: int, marks_from: int | None, extra: Sequence[str] = ()
    ) -> _Read:
        """One round trip of ``PROBE`` keys: records from ``n`` of the series ``kind``,
        after ``MARKS`` landmarks from ``marks_from`` and the keys ``extra``."""
        keys = [*extra]
        if marks_from is not None:
            keys += self._keys(kind, f"{kind}w", range(marks_from, marks_from + MARKS), PROBE)
        size = len(keys)
        keys += self._keys(kind, kind, range(n, n + PROBE - size))
        got = self._get(keys)
        return _Read(got[size:], got[len(extra) : size], got[: len(extra)])

    def _keys(self, kind: str, series: str, numbers: range, per: int = 1) -> list[str]:
        """The keys ``<epoch>:<series>:<k>`` for ``k`` in ``numbers``, each in the
        epoch that stores record ``k * per`` of the series ``kind``."""
        epochs = self._owners[kind][1]
        if len(epochs) == 1:
            return [f"{epochs[0]}:{series}:{k}" for k in numbers]
        return [f"{self._owner(kind, k * per)}:{series}:{k}" for k in numbers]

    def _landmarks(self, kind: str, marks: list[bytes], read: list[bytes | None]) -> bool:
        """Take the landmarks of one round trip into ``marks``: whether more may follow."""
        base = len(marks)
        for j, value in enumerate(read):
            at = f"{self._owner(kind, (base + j + 1) * PROBE)}:{kind}w:{base + j + 1}"
            if value is not None and self.form.legacy:
                raise self._corrupt(at, "is in a log of an older format")
            if value is None and not self.form.legacy:
                later = next((k for k in range(j + 1, len(read)) if read[k] is not None), None)
                if later is not None:
                    raise self._corrupt(
                        at,
                        f"is missing, and {kind}w:{base + later + 1} is not",
                    )
                return False
            if value is not None:
                marks.append(value)
        return not self.form.legacy

    def _series(
        self, kind: str, read: _Read, n: int = 0, marks: list[bytes] | None = None
    ) -> Iterator[tuple[str, bytes, tuple[str, bytes] | None]]:
        """Each record of the series ``kind`` (``"m"`` messages, ``"c"`` compactions) of
        the current epoch from record ``n``, its stored bytes, and for record ``256 k``
        the landmark written with it; ``read``: the first round trip's; ``marks``: the
        landmarks before ``n`` (filled with those read). The series ends at its first
        gap: one before the last landmark's record, or with a record after it in the
        same round trip, is a :class:`CorruptRecordError`."""
        owner, own = self._owner, self._own(kind)
        marks = [] if marks is None else marks
        more = self._landmarks(kind, marks, read.marks)
        while True:
            reach = PROBE * len(marks)  # the last landmark's record (none: 0)
            for j, value in enumerate(read.values):
                slot = n + j
                key = f"{owner(kind, slot)}:{kind}:{slot}"
                if value is None:
                    if slot < own:
                        raise self._corrupt(key, f"is missing, and epoch {self.epoch} holds it")
                    self._ended(key, slot, reach, read.values[j + 1 :])
                    return
                mark = None
                if slot and not slot % PROBE and not self.form.legacy:
                    mark_key = f"{owner(kind, slot)}:{kind}w:{slot // PROBE}"
                    if slot > reach:
                        raise self._corrupt(mark_key, f"is missing, and {key} is not")
                    mark = (mark_key, marks[slot // PROBE - 1])
                yield key, value, mark
            n += len(read.values)
            read = self._window(kind, n, len(marks) + 1 if more else None)
            if more:
                more = self._landmarks(kind, marks, read.marks)

    def _ended(self, key: str, slot: int, reach: int, rest: list[bytes | None]) -> None:
        """Check that the series may end at ``key``: nothing after it was written."""
        if reach and slot <= reach:
            raise self._corrupt(key, f"is missing, and the series reaches record {reach}")
        later = next((k for k, v in enumerate(rest) if v is not None), None)
        if later is not None:
            nxt = key.rsplit(":", 1)[0] + f":{slot + 1 + later}"
            raise self._corrupt(key, f"is missing, and {nxt} is not")

    def _marked(self, mark: tuple[str, bytes] | None, digest: bytes) -> None:
        if mark is not None and mark[1] != digest.hex().encode():
            raise self._corrupt(mark[0], "does not match the record it marks")

    def _first(self) -> _Read:
        """The first round trip of :meth:`load`: the first messages and landmarks, with
        what tells whether an epoch marker was removed; the epoch's format."""
        e = self.epoch
        around = [f"{e + 1}:m:0", f"{e + 1}:c:0", f"e:{e + 1}"]
        self.form = Format.CURRENT
        read = self._window("m", 0, 1, around)
        self._cleared = read.extra[-1] is not None  # since the markers were read
        for key, value in zip(around[:2], read.extra, strict=False):
            if value is not None and not self._cleared:
                raise self._corrupt(
                    key, f"exists, but the marker of its epoch (e:{e + 1}) does not"
                )
        if self.bare_markers == e:  # no chained marker opened this epoch
            self._unchained_markers()
            self.form = self._form_of(read.values)
        if self.form.legacy and not self.migrating:
            raise self._older(f"{e}:m:0")
        self._start()
        return read

    def _older(self, key: str) -> CorruptRecordError:
        """The error for a log of an older format, read only by :func:`migrate`."""
        return CorruptRecordError(
            f"session {self.session_id!r}: the record {key!r} is of the "
            f"{self.form.name.lower()} format, which an older ctxfold wrote and which is "
            "not read unchecked: if the store's records are trusted, migrate the session "
            f"once (ctxfold.session.migrate({self.session_id!r}, store=...), or "
            f"`ctxfold migrate {self.session_id} --store <spec>`) and open it again",
            ids=(key,),
        )

    def _form_of(self, values: list[bytes | None]) -> Format:
        """The format of an epoch no chained marker opened, as its first records show:
        the first format only if none of them is chained (a bare record among chained
        ones is the one refused, not they)."""
        present = [(j, v) for j, v in enumerate(values) if v is not None]
        chained = [(j, v) for j, v in present if isinstance(v, bytes) and v.startswith(b'{"d":')]
        for j, value in chained[:1] or present[:1]:
            return self._parse(f"{self.epoch}:m:{j}", value).form
        return Format.CURRENT

    def _unchained_markers(self) -> None:
        """Markers of the first format are a log's of that format: one after an epoch
        of chained records was inserted (another round trip, in such logs only)."""
        for n in range(0, self.epoch, PROBE):
            keys = [f"{j}:m:0" for j in range(n, min(n + PROBE, self.epoch))]
            for key, value in zip(keys, self._get(keys), strict=True):
                if value is not None and self._parse(key, value).form is Format.CURRENT:
                    marker = f"e:{int(key.split(':')[0]) + 1}"
                    raise self._corrupt(marker, "is an unchained marker after chained records")

    def _message_records(self, n: int = 0) -> Iterator[tuple[_Stored, dict[str, Any]]]:
        """Each message record of the current epoch from message ``n``, checked, with
        its stored form. A clear written since the epoch markers were read ends the
        history where it closed the epoch (as it stood before the clear, which the
        next write then meets as another writer's)."""
        if n == 0:
            self._marks, read = [], self._first()
        else:
            read = self._window("m", n, len(self._marks) + 1)
        head, heads = self.heads[-1], self.heads
        for key, raw, mark in self._series("m", read, n, self._marks):
            stored = self._parse(key, raw)
            record, head = self._opened(stored, self._from("m", len(heads) - 1, head))
            if record.get("k") == "clear":
                if len(heads) - 1 < self._own("m") or record.get("epoch") != self.epoch + 1:
                    raise self._corrupt(key, f"closes its epoch where epoch {self.epoch} holds on")
                if self._cleared or self._get([f"e:{self.epoch + 1}"])[0] is not None:
                    self._cleared = True
                    return
                raise self._corrupt(
                    key,
                    f"closes this epoch, but the next one's marker (e:{self.epoch + 1}) is missing",
                )
            if mark is not None:
                self._marked(mark, head)
            heads.append(head)
            yield stored, record

    def _head(self, last: _Stored | None) -> int:
        """How many compactions the newest write of messages counted (its head; the
        marker's where the current epoch wrote none)."""
        if self.form.legacy:
            return 0
        if last is None or self.messages <= self._own("m"):
            kept = self._kept.get(self.epoch)
            return 0 if kept is None else kept.folds
        head = last.head
        if not (isinstance(head, list) and len(head) == 1 and type(head[0]) is int):
            raise self._corrupt(
                last.key, "ends the history inside a write (the rest of it is missing)"
            )
        return max(head[0], 0)

    def load(self) -> tuple[list[Message], list[bytes]]:
        """The history of the current epoch, each message checked, and each one's
        stored bytes; then :meth:`compactions` gives its compactions (and appends to
        these lists the messages another writer stored since, where a compaction
        covers them: one consistent state of the log, never a false corruption)."""
        self._history, self._rows = [], []
        self.messages = self.folds = 0
        self._read_messages(0)
        return self._history, self._rows

    def _read_messages(self, n: int) -> None:
        """Read the messages from message ``n`` on into the history :meth:`load` gives."""
        last: _Stored | None = None
        for stored, record in self._message_records(n):
            try:
                self._history.append(message_from_record(record))
            except _UNREADABLE:
                raise self._corrupt(stored.key, "is not a message") from None
            self._rows.append(stored.raw)
            last = stored
        if last is not None or n == 0:
            self.messages = len(self._history)
            self._counted = self._head(last)
        if n == 0:
            self._check_kept("m", self.heads)

    def _check_kept(self, kind: str, heads: Sequence[bytes]) -> None:
        """Check that the records the current epoch holds by reference (see
        :meth:`truncate`) are those its marker names."""
        kept = self._kept.get(self.epoch)
        if kept is None:
            return
        own = self._own(kind)
        digest = kept.head if kind == "m" else kept.fold_head
        if own and heads[own].hex() != digest:  # (heads reach it: a gap is an error)
            what = "messages" if kind == "m" else "compactions"
            raise self._corrupt(
                f"e:{self.epoch}", f"does not match the {what} it keeps of epoch {self.epoch - 1}"
            )

    def _fold_records(self) -> Iterator[tuple[str, dict[str, Any], int]]:
        """Each compaction record of the current epoch, checked, and how many messages
        it covers (after :meth:`load`); the last is the newest the log's heads count.
        Messages another writer stored since :meth:`load` read them are read where a
        compaction covers them, and the compactions their heads count after those."""
        marks: list[bytes] = []
        while True:
            read = self.messages
            yield from self._fold_series(marks)
            if self.folds >= self._counted or self.messages == read:
                break
        self._check_kept("c", self.fold_heads)
        if self.folds < self._counted:
            raise self._corrupt(
                f"{self.epoch}:c:{self.folds}",
                f"is missing: the newest messages were written after {self._counted} compactions",
            )

    def _fold_series(self, marks: list[bytes]) -> Iterator[tuple[str, dict[str, Any], int]]:
        """The compaction records from :attr:`folds` on, as :meth:`_fold_records`."""
        n, own = self.folds, self._own("c")
        for key, raw, mark in self._series("c", self._window("c", n, len(marks) + 1), n, marks):
            stored = self._parse(key, raw)
            record = stored.record if isinstance(stored.record, dict) else {}
            upto = record.get("upto")
            held = self.folds >= own  # not one the epoch holds by reference (its n is of another)
            if held and not self.migrating and _past(record, self.messages):
                self._read_messages(self.messages)  # written since the messages were read
            if type(upto) is not int or not 0 <= upto <= self.messages:
                raise self._corrupt(key, f"covers {upto!r} messages of {self.messages}")
            previous = self._from("c", self.folds, self.fold_head)
            record, self.fold_head = self._opened(stored, previous, self.heads[upto])
            self.fold_heads.append(self.fold_head)
            self.uptos.append(upto)
            written = record.get("n", upto) if self.form.legacy else record.get("n")
            if not held:
                written = upto
            if type(written) is not int or not upto <= written <= self.messages:
                raise self._corrupt(
                    key,
                    f"was written after message {written!r}, of {self.messages}: "
                    "the newest messages are missing",
                )
            self._marked(mark, self.fold_head)
            yield key, record, upto
            self.folds += 1

    def compactions(self) -> Iterator[tuple[Fold, Counts | None]]:
        """The compactions of the current epoch, each checked, one at a time (after
        :meth:`load`): a long session's are never all in memory at once. Each with the
        token counts it stored (see :meth:`add_fold`), or None."""
        for key, record, upto in self._fold_records():
            yield self._fold(key, record, upto), Counts.from_record(record.get("counts"))

    def _fold(self, key: str, record: dict[str, Any], upto: int) -> Fold:
        try:
            fold = Fold.from_record(record)
            outside = any(i is not None and not 0 <= i < upto for i in fold.sources) or any(
                not 0 <= d.index < upto for d in fold.decisions
            )
        except _UNREADABLE:
            raise self._corrupt(key, "is not a compaction") from None
        if outside:
            raise self._corrupt(key, "refers to messages outside what it covers")
        return fold

    def exists(self) -> bool:
        """Whether anything was ever written for this session (a message, or a clear)."""
        return self.epoch > 0 or self.messages > 0
