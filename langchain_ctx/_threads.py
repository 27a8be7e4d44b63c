"""Compressed views of histories kept elsewhere (an agent's checkpointed state), one
ctxfold :class:`~ctxfold.Session` per conversation thread: what the agent middleware
and the LangGraph hook share.

The history and the compaction record live in the graph's state; the sessions here are
a cache of the work done on them. A cached session is used while the messages it holds
are still the first messages of the state; otherwise it is rebuilt from the state's
messages and its stored compaction (no compaction made twice), or, when that record no
longer belongs to the history (messages edited or removed), compacted afresh.

Each session keeps its rounds' originals in its own part of the store. The store also
lists the sessions of each thread (``ctxfold:thread:<digest of the thread>:<n>``, the
id of its ``n``-th session), so the thread's expand tool reads the rounds of every
session the thread had, in any process, and no other thread's
(:meth:`ThreadViews.stores_of`). Without a ``store``, each thread has a memory store of
its own, kept while its session is (``max_threads``).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langgraph.config import get_config

from ctxfold.exceptions import ConfigurationError
from ctxfold.result import CompressionResult
from ctxfold.reversible import ExpandTool
from ctxfold.session import CompactionOptions, Follower, Session
from ctxfold.session.chain import namespace
from ctxfold.session.follow import store_for
from ctxfold.session.resume import Outcome
from ctxfold.storage import (
    MemoryStore,
    NamespacedStore,
    VerbatimStore,
    get_session_store,
    put_new,
)
from ctxfold.tokens import room_left

from ._convert import from_langchain, snapshot, to_langchain

__all__ = ["STATE_KEY", "ThreadExpandTool", "ThreadViews", "View", "thread_of"]

#: How LangGraph writes a checkpoint namespace: ``node:task_id|node:task_id``.
NS_SEP, NS_END = "|", ":"

#: The state field that holds a thread's compaction record (private to the agent).
STATE_KEY = "ctxfold"

#: Where a store lists the sessions of each thread (see the module).
THREAD_PREFIX = "ctxfold:thread:"
_SLOTS = 16  # index entries read per round trip


def thread_of() -> Hashable:
    """The conversation thread of the graph run this is called in: its ``thread_id``
    and the path of graph nodes down to the graph calling the model (``None`` outside
    a graph or without a thread id). Task ids are left out: a node's namespace has a
    new one on every step, the thread stays."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a runnable
        return None
    thread = configurable.get("thread_id")
    if thread is None:
        return None
    path = str(configurable.get("checkpoint_ns", "")).split(NS_SEP)[:-1]  # the node's graph
    return (str(thread), *(part.split(NS_END)[0] for part in path))


def _index(thread: Hashable) -> str:
    """The prefix of the store keys that list ``thread``'s sessions."""
    digest = hashlib.sha256(json.dumps(thread, default=repr).encode("utf-8")).hexdigest()
    return f"{THREAD_PREFIX}{digest[:32]}:"


def _sessions(store: VerbatimStore, thread: Hashable) -> list[str]:
    """The ids of ``thread``'s sessions ``store`` lists, oldest first."""
    prefix, found = _index(thread), list[str]()
    while True:
        keys = [f"{prefix}{n}" for n in range(len(found), len(found) + _SLOTS)]
        for value in store.get_many(keys):
            if value is None:
                return found
            found.append(value.decode("utf-8", "replace"))


def _register(store: VerbatimStore, thread: Hashable, session_id: str) -> None:
    """List ``session_id`` among ``thread``'s sessions in ``store`` (in the first free
    slot: another process may take one first)."""
    prefix, n = _index(thread), len(_sessions(store, thread))
    while put_new(store, {f"{prefix}{n}": session_id.encode("utf-8")}):
        n += 1


@dataclass
class _Thread:
    store: VerbatimStore
    lock: threading.Lock = field(default_factory=threading.Lock)
    follower: Follower[BaseMessage] | None = None
    round_id: str | None = None  # the compaction `prefix` is the LangChain form of
    prefix: list[BaseMessage] = field(default_factory=list)
    scale: float = 1.0  # how many tokens the provider counts for each one ctxfold counts
    refused: bool = False  # the state's record was refused: write the next one over it


@dataclass(frozen=True)
class View:
    """One model call's view: ``messages`` to send after the system prompt; ``record``
    the compaction to store in the state when the state holds another (else ``None``);
    ``result`` the session's render (stats and trace); ``fixed`` the tokens the call
    spends besides (system prompt, tool schemas)."""

    messages: list[BaseMessage]
    record: dict[str, Any] | None
    result: CompressionResult
    fixed: int = 0


def _round_of(saved: Mapping[str, Any] | None) -> str | None:
    fold = saved.get("fold") if isinstance(saved, Mapping) else None
    return fold.get("round") if isinstance(fold, Mapping) else None


class ThreadViews:
    """Render each thread's history within ``budget`` tokens (system prompt and tool
    schemas included), keeping the sessions of the ``max_threads`` threads used last."""

    def __init__(
        self,
        budget: int | None,
        max_threads: int,
        options: CompactionOptions,
        store: VerbatimStore | str | None = None,
    ) -> None:
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
            raise ConfigurationError(f"max_threads must be an int >= 1, got {max_threads!r}")
        settings: dict[str, Any] = dict(options)
        store = settings.pop("store", store)  # the hook's options may name it
        template = Session(budget=budget, **settings)  # checks every setting, once
        #: Where every thread's sessions write (``None``: a memory store per thread).
        self.store: VerbatimStore | None = None if store is None else get_session_store(store)
        self.budget: int | None = budget
        self.counter = template.counter
        self.redact = template.redact
        self._settings: dict[str, Any] = {
            **settings,
            "budget": budget,
            "strategy": template.strategy,
            "counter": template.counter,
        }
        self.max_threads = max_threads
        self._threads: OrderedDict[Hashable, _Thread] = OrderedDict()
        self._lock = threading.Lock()

    def fixed_tokens(self, system: SystemMessage | None, reserved: int) -> int:
        """Tokens a call spends besides the history: the system prompt and ``reserved``."""
        if system is None:
            return reserved
        return reserved + self.counter.count_message(from_langchain([system])[0])

    def check_room(self, fixed: int, scale: float = 1.0, budget: int | None = None) -> int:
        """The tokens left for the history of a call of ``budget`` tokens (default:
        the views' own) when it spends ``fixed`` besides and the provider counts
        ``scale`` tokens for each one ctxfold counts; a :class:`ctxfold.BudgetError`
        when none are."""
        budget = self.budget if budget is None else budget
        if budget is None:
            raise ConfigurationError("no budget: pass one to the view or to ThreadViews")
        return room_left(int(budget / scale), fixed, "the system prompt and tool schemas")

    def view(
        self,
        thread: Hashable,
        messages: Sequence[BaseMessage],
        *,
        fixed: int = 0,
        saved: Mapping[str, Any] | None = None,
        budget: int | None = None,
    ) -> View:
        """The view of ``messages`` (the thread's whole history, the system prompt
        aside) for a model call of ``budget`` tokens (default: the views' own) that
        spends ``fixed`` tokens besides; ``saved`` is the compaction record the state
        holds. Raises :class:`ctxfold.BudgetError` when what must be kept cannot fit."""
        state = self._state(thread)
        room = self.check_room(fixed, state.scale, budget)
        with state.lock:
            follower = self._follower(thread, state, messages, saved)
            followed = follower.follow(messages, room)
            result = followed.result
            if result.round_id != state.round_id:
                state.round_id = result.round_id
                state.prefix = to_langchain(followed.prefix)
            changed = result.round_id is not None and (
                state.refused or result.round_id != _round_of(saved)
            )
            record = follower.session.compaction if changed else None
            state.refused = state.refused and record is None
            view = followed.view(state.prefix, messages, lambda m: to_langchain([m])[0])
            return View(view, record, result, fixed)

    def anchor(self, thread: Hashable, counted: int, reported: int) -> None:
        """The provider reported ``reported`` input tokens for a call of ``thread``
        that ctxfold counted at ``counted``: when it counts more, the thread's later
        views fit the budget by its count (the room scaled down by the ratio of this
        last report; never up, where it counts less)."""
        if counted > 0 and reported > 0:
            self._state(thread).scale = max(1.0, reported / counted)

    def stores_of(self, thread: Hashable) -> list[VerbatimStore]:
        """The parts of the store that ``thread``'s sessions wrote, newest first: where
        its rounds are, and nothing of another thread's (empty for a thread this
        process no longer holds, without a ``store``)."""
        if self.store is not None:
            store: VerbatimStore = self.store
        else:
            with self._lock:
                state = self._threads.get(thread)
            if state is None:
                return []
            store = state.store
        ids = _sessions(store, thread)
        return [NamespacedStore(store, namespace(sid)) for sid in reversed(ids)]

    def search(self, thread: Hashable, query: str, max_tokens: int) -> str:
        """What ``query`` finds in ``thread``'s whole history (its session's
        :meth:`~ctxfold.Session.search`); empty for a thread this process does not
        follow yet, and never another thread's."""
        with self._lock:
            state = self._threads.get(thread)
        if state is None or state.follower is None:
            return ""
        with state.lock:
            return state.follower.session.search(query, max_tokens)

    def _state(self, thread: Hashable) -> _Thread:
        with self._lock:
            state = self._threads.pop(thread, None) or _Thread(self._new_store())
            self._threads[thread] = state  # the most recent last
            while len(self._threads) > self.max_threads:
                self._threads.popitem(last=False)
            return state

    def _new_store(self) -> VerbatimStore:
        """The store of a thread: the views' own, else a memory store of its own."""
        if self.store is not None:
            return self.store
        own = store_for(None, None)
        assert own is not None  # a memory store, when neither id nor store is given
        return get_session_store(own)

    def _follower(
        self,
        thread: Hashable,
        state: _Thread,
        messages: Sequence[BaseMessage],
        saved: Mapping[str, Any] | None,
    ) -> Follower[BaseMessage]:
        """The thread's follower, rebuilt from the state when the cached one does not
        hold the start of ``messages`` (another process, a fork, an edit), its
        session listed among the thread's in the store."""
        if state.follower is not None and state.follower.holds_start_of(messages):
            return state.follower
        state.follower = Follower.resume(
            messages, saved, from_langchain, key=snapshot, **self._settings, store=state.store
        )
        _register(state.store, thread, state.follower.session.session_id)
        state.round_id, state.prefix = None, []
        state.refused = state.follower.session.resumed.outcome is Outcome.REFUSED
        return state.follower


class ThreadExpandTool(ExpandTool):
    """The expand tool of an agent's threads: an id is read from the rounds of the
    thread the tool runs in (:func:`thread_of`), from every session it had
    (:meth:`ThreadViews.stores_of`), and a query searches that thread's whole history
    (:meth:`ThreadViews.search`), never another thread's."""

    def __init__(self, views: ThreadViews, *, max_tokens: int = 4000) -> None:
        super().__init__(
            MemoryStore(),  # read only when the thread has no session: nothing there
            max_tokens=max_tokens,
            counter=views.counter,
            redact=views.redact or None,
        )
        self.views = views

    def stores(self) -> list[VerbatimStore]:
        """The parts of the store the current thread's sessions wrote."""
        return self.views.stores_of(thread_of())

    @property
    def searches(self) -> bool:
        """It does: the current thread's history."""
        return True

    def found(self, query: str, max_tokens: int) -> str:
        """What ``query`` finds in the current thread's whole history."""
        return self.views.search(thread_of(), query, max_tokens)
