"""The stored form of a session's log records: the envelope and its formats, the
chained digests, the keys (namespace, landmarks), and what an epoch that
``SessionLog.truncate`` opened keeps (see :mod:`ctxfold.session.log`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..storage.store import (
    SESSION_PREFIX,
)

__all__ = [
    "FIELDS",
    "FORMS",
    "KEPT_FIELDS",
    "MARKS",
    "PROBE",
    "VERSION",
    "Format",
    "Kept",
    "chain_root",
    "head_bytes",
    "landmark",
    "link",
    "namespace",
    "record_bytes",
]

PROBE = 256  # keys read per round trip; a landmark every PROBE records
MARKS = 32  # of them landmarks, while a series has more (8,192 records' worth)
VERSION = 3  # of the stored form of a record (see Format)


class Format(Enum):
    """The stored form of a session's records."""

    FIRST = 1  # the bare record, unchained
    CHAINED = 2  # {"d", "r", "v": 2}: chained, with no heads, landmarks or chained markers
    CURRENT = 3  # {"d", ["h",] "r", "v": 3}

    @property
    def legacy(self) -> bool:
        """Whether this ctxfold reads the format but no longer writes it."""
        return self is not Format.CURRENT


FIELDS = {Format.CHAINED: frozenset("drv"), Format.CURRENT: frozenset("dhrv")}
FORMS = {2: Format.CHAINED, 3: Format.CURRENT}


def record_bytes(raw: bytes) -> bytes | None:
    """The record's own bytes inside a stored envelope as :meth:`SessionLog._sealed`
    writes it (``encode(record)``), or ``None`` for any other layout (the record is
    then encoded again)."""
    prefix, tail = b'{"d":"', raw[-7:]
    if not raw.startswith(prefix) or tail not in (b',"v":3}', b',"v":2}'):
        return None
    at = len(prefix) + 64 + 1  # past the digest and its closing quote
    if raw.startswith(b',"h":[', at):
        end = raw.find(b"]", at + 6)
        if tail != b',"v":3}' or end < 0 or not raw[at + 6 : end].replace(b",", b"").isdigit():
            return None  # a head of this layout holds numbers only
        at = end + 1
    start = at + len(b',"r":')
    if not raw.startswith(b',"r":', at) or start > len(raw) - len(tail):
        return None
    return raw[start : -len(tail)]


def link(previous: bytes, payload: bytes) -> bytes:
    """The running digest after a record whose stored bytes are ``payload``."""
    return hashlib.sha256(previous + payload).digest()


def head_bytes(head: Any) -> bytes:
    """What a write's head (a JSON value as read; ``[<compactions>]`` as written) adds
    to its last record's digest: ``b"h"`` and its compact JSON."""
    if head is None:
        return b""
    if type(head) is list and len(head) == 1 and type(head[0]) is int:
        return b"h[%d]" % head[0]  # what json.dumps gives it, made at once
    return b"h" + json.dumps(head, separators=(",", ":")).encode()


def namespace(session_id: str) -> str:
    """The prefix of every key the session ``session_id`` writes."""
    # With the id's length in it, no session's namespace begins another's.
    return f"{SESSION_PREFIX}{len(session_id)}:{session_id}:"


def chain_root(session_id: str, epoch: int, form: Format) -> bytes:
    """Where the chains of an epoch's records start (of its own for each format)."""
    label = str(epoch) if form is Format.CHAINED else f"{epoch}:3"
    return link(namespace(session_id).encode(), label.encode())


def landmark(epoch: int, kind: str, slot: int, digest: bytes) -> dict[str, bytes]:
    """The landmark written with record ``slot`` of the series ``kind``, if it has one."""
    if slot and not slot % PROBE:
        return {f"{epoch}:{kind}w:{slot // PROBE}": digest.hex().encode()}
    return {}


@dataclass(frozen=True)
class Kept:
    """What an epoch opened by :meth:`SessionLog.truncate` holds of the one before, by
    reference: its first ``messages`` messages and ``folds`` compactions, and the
    digests after them (``head``, ``fold_head``, hex)."""

    messages: int
    folds: int
    head: str
    fold_head: str

    @classmethod
    def from_marker(cls, record: Any, epoch: int) -> Kept | None:
        """What the marker ``record`` of ``epoch`` keeps (``None``: an epoch opened
        empty), or a ``ValueError`` for a record that is no marker of ``epoch``."""
        if record == {"k": "epoch", "epoch": epoch}:
            return None
        if (
            not isinstance(record, dict)
            or record.keys() != KEPT_FIELDS
            or record.get("k") != "epoch"
        ):
            raise ValueError("not a marker")
        kept = cls(record["messages"], record["folds"], record["head"], record["fold_head"])
        if record["epoch"] != epoch or not kept._valid():
            raise ValueError("not a marker")
        return kept

    def _valid(self) -> bool:
        counts = (self.messages, self.folds)
        digests = (self.head, self.fold_head)
        return (
            all(type(n) is int and n >= 0 for n in counts)
            and self.messages > 0
            and all(type(d) is str and len(d) == 64 for d in digests)
        )

    def record(self, epoch: int) -> dict[str, Any]:
        """The marker of ``epoch`` that keeps this."""
        return {
            "k": "epoch",
            "epoch": epoch,
            "messages": self.messages,
            "folds": self.folds,
            "head": self.head,
            "fold_head": self.fold_head,
        }


KEPT_FIELDS = frozenset(("k", "epoch", "messages", "folds", "head", "fold_head"))
