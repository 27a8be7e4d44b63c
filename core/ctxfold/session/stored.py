"""A session's life in its store: read from it (and read again after another writer
wrote), the record of its current compaction that a history kept elsewhere carries
and its verification when taken up, starting over (``clear``, ``truncate``) and
deletion. :class:`ctxfold.Session` builds on it with the verbs of use (``add``,
``render``, ``text``, ``expand``, ``search``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from ..contract import Strategy
from ..exceptions import ConfigurationError
from ..reversible.rounds import RoundSettings
from ..storage.store import VerbatimStore, deleting, get_session_store, session_store
from .fold import Fold
from .log import SessionLog
from .resume import Outcome, Resumed, adopted, resume_record, verifying_keys
from .retention import delete_session, drop_cleared
from .state import SessionState

__all__ = ["StoredSession"]


class StoredSession(SessionState):
    """The part of a session that reads and writes its store (see the module)."""

    session_id: str
    store: VerbatimStore
    strategy: Strategy
    _lock: threading.RLock

    def reload(self) -> None:
        """Read the session again from its store, dropping what this object held: after
        a :class:`ctxfold.exceptions.ConcurrentWriteError` (another writer wrote the
        session since this one read it), to take up what it wrote and write again."""
        with self._lock:
            self._load()

    def _load(self) -> None:
        """Read the history and the compactions of the session from its store."""
        self._log = SessionLog(self.store, self.session_id)
        self._rounds = RoundSettings(store=self._log.store)
        self._reset()
        messages, rows = self._log.load()
        last: Fold | None = None
        for fold, counts in self._log.compactions():  # one at a time: there are thousands
            k = len(self._history)  # what it took in after the one before, counted then
            self._extend(messages[k : fold.upto], rows[k : fold.upto], counts)
            if last is not None:
                self._traced(last)  # only the newest one's prefix is counted
            last = fold
        k = len(self._history)
        self._extend(messages[k:], rows[k:])
        if last is not None:
            self._apply(last)

    #: What :meth:`resume` did with the record it was given (``Outcome.NONE`` for a
    #: session not resumed, or resumed with none).
    resumed: Resumed = Resumed(Outcome.NONE)
    _adopted: tuple[Fold, dict[str, Any]] | None = None  # the fold taken up, as given

    @property
    def compaction(self) -> dict[str, Any] | None:
        """The current compaction as a JSON-able record (``None`` before the first), to
        keep beside the history and give to :meth:`resume`."""
        with self._lock:
            fold = self._fold
            if fold is None:
                return None
            if self._adopted is not None and self._adopted[0] is fold:
                given: dict[str, Any] = json.loads(json.dumps(self._adopted[1]))
                return given  # as it verified
            covers = self._covering.digest(self._history, fold.upto)
            return resume_record(fold, covers, self.store, self.session_id)

    def _adopt(self, compaction: Mapping[str, Any]) -> None:
        """Make the recorded compaction current after verifying it (a
        :class:`ctxfold.exceptions.CorruptRecordError` when it does not verify)."""
        with self._lock:
            fold = adopted(
                compaction,
                self._history,
                covering=self._covering,
                keys=verifying_keys(self.store, session_store()),
                pinned=self.strategy.pin_roles,
                store=self.store,
                session_id=self.session_id,
            )
            given = {k: compaction[k] for k in ("version", "fold", "covers", "session", "mac")}
            self._adopted = (fold, json.loads(json.dumps(given)))  # the caller's may change
            self._log.add_fold(fold, self._counts(self._upto(), fold.upto))
            self._apply(fold)

    def clear(self, *, drop_originals: bool = False) -> None:
        """Start over with an empty history, in a new epoch of the session's log.

        By default the store keeps everything: the cleared history's records (unseen by
        the session, also after a restart), the compactions' originals and, with
        ``redact``, the unmasked originals, all readable by whoever reads the store
        (``expand`` of an earlier render still works). ``drop_originals=True`` then
        deletes what nothing in the new epoch refers to: every record of the earlier
        epochs and every stored original and round tag of the session (earlier
        renders' ``[expand]`` and ``[secret]`` marks then find nothing); the log's
        epoch markers and the session's keys stay, so it reads as before. The store
        must be able to delete (:class:`ctxfold.storage.Deletes`)."""
        if not isinstance(drop_originals, bool):
            raise ConfigurationError(
                f"drop_originals must be True or False, got {drop_originals!r}"
            )
        with self._lock:
            if drop_originals:
                deleting(self.store)  # before anything is written
            self._log.clear()
            if drop_originals:
                drop_cleared(self._log)
            self._reset()

    def truncate(self, keep: int) -> None:
        """Drop the history's messages after the first ``keep`` (a history edited or
        cut back there), and the compactions that took in any of them; ``keep=0``
        is :meth:`clear`. The store writes two records whatever the length of what
        is kept: a new epoch of the log holds the kept messages and compactions by
        reference, checked as the rest (:mod:`ctxfold.session.log`); the dropped ones
        stay in the store, unseen, as a clear leaves them."""
        if type(keep) is not int or keep < 0:
            raise ConfigurationError(f"keep must be an integer of at least 0, got {keep!r}")
        with self._lock:
            if keep > len(self._history):
                raise ConfigurationError(
                    f"keep={keep}, but the history holds {len(self._history)} messages"
                )
            if keep == len(self._history):
                return
            if keep == 0:
                self.clear()
                return
            self._log.truncate(keep)
            self._load()

    @classmethod
    def delete(cls, session_id: str, *, store: VerbatimStore | str | None = None) -> int:
        """Delete every record of the session ``session_id`` from ``store`` (as the
        constructor reads it; ``None``: the process's memory sessions): its history
        and compactions in every epoch, its originals and its keys. Afterwards
        :meth:`load` raises :class:`ctxfold.exceptions.SessionNotFoundError` and
        ``Session(session_id, store=...)`` starts empty. Returns how many entries
        were deleted (0 for a session the store does not hold). Delete a session no
        ``Session`` object is still writing."""
        if not isinstance(session_id, str) or not session_id:
            raise ConfigurationError(f"session_id must be a non-empty string, got {session_id!r}")
        return delete_session(get_session_store(store), session_id)
