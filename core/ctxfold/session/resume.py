"""The record of a session's current compaction that a history kept elsewhere carries
(an agent's checkpointed state): made by :attr:`Session.compaction`, checked against
the history by :meth:`Session.resume` before it is taken up."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..exceptions import CorruptRecordError
from ..messages import Message
from ..reversible.records import encode
from .log import Fold

__all__ = ["RECORD_VERSION", "adopted", "resume_record"]

RECORD_VERSION = 2  # of the record :func:`resume_record` gives (1: no digest)


def _digest(fold: Mapping[str, Any], last: str) -> str:
    """The digest a compaction record carries: of its fold and the last message it
    covers, as they are encoded for the store."""
    return hashlib.sha256(encode({"fold": fold, "last": last})).hexdigest()


def resume_record(fold: Fold, history: Sequence[Message]) -> dict[str, Any]:
    """``fold``, the compaction of ``history``, as a JSON-able record."""
    last = history[fold.upto - 1].fingerprint if fold.upto else ""
    record = fold.record()
    return {
        "version": RECORD_VERSION,
        "fold": record,
        "last": last,
        "digest": _digest(record, last),
    }


def adopted(
    compaction: Mapping[str, Any],
    history: Sequence[Message],
    pinned: Collection[str],
    session_id: str,
) -> Fold:
    """The fold ``compaction`` records, checked to be a compaction of ``history``
    (messages of the ``pinned`` roles kept byte for byte); else a
    :class:`CorruptRecordError` naming the session ``session_id``."""
    try:
        version = compaction.get("version")
        if version not in (1, RECORD_VERSION):
            raise ValueError(f"format {version!r}, which this ctxfold does not know: upgrade it")
        if version == RECORD_VERSION and compaction.get("digest") != _digest(
            compaction["fold"], compaction["last"]
        ):
            raise ValueError("its digest does not match what it holds")
        fold = Fold.from_record(dict(compaction["fold"]))
        n, last = len(history), compaction["last"]
        if not 0 <= fold.upto <= n or any(
            i is not None and not 0 <= i < fold.upto for i in fold.sources
        ):
            raise ValueError("indices outside the history")
        if any(not 0 <= d.index < fold.upto for d in fold.decisions):
            raise ValueError("decisions outside the history")
        if fold.upto and history[fold.upto - 1].fingerprint != last:
            raise ValueError("the history differs")
        _check_kept(fold, history, pinned)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptRecordError(
            f"session {session_id!r}: the compaction record does not belong to "
            f"this history ({exc}); resume with compaction=None to compact afresh"
        ) from None
    return fold


def _check_kept(fold: Fold, history: Sequence[Message], pinned: Collection[str]) -> None:
    """Each prefix message that stands for a history message has its role, and one of
    a pinned role (the system prompt) is that message byte for byte: a record whose
    system prompt was rewritten is not a compaction of this history."""
    for m, i in zip(fold.prefix, fold.sources, strict=True):
        if i is None:
            continue
        was = history[i]
        if m.role != was.role or (was.role in pinned and m.fingerprint != was.fingerprint):
            raise ValueError(f"its message standing for message {i} is not that message")
