"""``ctxfold.Session``: one conversation compressed turn after turn.

A session keeps the full history (never altered) and its compression state in a
store. Between compactions a render is the previous render plus the new messages,
byte for byte, so a provider's prompt cache keeps hitting; when the view would pass
the budget (the high-water mark), one reversible round compacts the previous prefix
and the messages since down to the low-water mark (60% of the budget by default).
A render does work in proportion to the new messages and the output, not the history.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar, overload

from .._registry import check_options
from .._state import owning
from ..contract import CounterSpec, MessageLike
from ..exceptions import BudgetError, ConfigurationError, CorruptRecordError, SessionNotFoundError
from ..formats import CTXFOLD, PLAIN, read_messages
from ..messages import Message, transcript
from ..models.embedders import get_embedder
from ..pipeline import Request, run
from ..recall import Query, check_query, search
from ..result import CompressionResult
from ..reversible.expand import Expansion, expand
from ..reversible.tool import ExpandTool, Search
from ..storage.store import MemoryStore, VerbatimStore, get_session_store, session_store
from ..strategies.options import check_share
from ..text.fitting import fit_text
from ..tokens import TokenCounter, check_budget, get_counter
from .resume import Outcome, Resumed
from .settings import check_strategy, check_water
from .source import SessionSource
from .stored import StoredSession

__all__ = ["Session"]

_S = TypeVar("_S", bound="Session")


_log = logging.getLogger("ctxfold")


class Session(StoredSession):
    """One conversation's full history and its compression state, behind a store.

    Args:
        session_id: names the session in its store (default: a new random id). Every
            key the session writes is in a namespace of its own.
        budget: the default token budget of :meth:`render`.
        strategy: what compacts (any form :func:`ctxfold.normalize` reads; default
            ``"auto"``); it must implement :class:`ctxfold.Strategy`.
        counter: how tokens are counted (as for :func:`ctxfold.compress`).
        store: where the history, the compactions and the originals go: ``None``,
            ``"memory"`` or ``"sqlite:///:memory:"`` (the memory store the process's
            sessions share, never capped: no entry of a session is ever dropped),
            ``"sqlite:///path.db"``, a Redis URL, or a
            :class:`ctxfold.storage.VerbatimStore`. A session's records go only with
            :meth:`delete`, :meth:`clear` ``(drop_originals=True)`` (the cleared
            history's) or :func:`ctxfold.storage.prune`.
        cache_stable: compact in blocks, down to the low-water mark, so that renders
            between compactions extend each other byte for byte (default). ``False``
            compacts to the whole budget, the tightest fit on every turn.
        low_water, high_water: shares of the budget: a render whose view would pass
            ``high_water`` (default 1.0) compacts down to ``low_water``. ``None`` (the
            default) sizes the room left for growth to the conversation: about
            ``settings.GAP_TURNS`` turns at the history's mean message size, between 10%
            and 40% of the budget (a chat of short turns keeps 90% of the budget,
            an agent whose tool results run to thousands of tokens 60%).
        recall_share: the share of the budget a render with a query keeps at most
            for the passages of the folded history it recalls (see :meth:`render`);
            ``0`` never recalls. Default ``None``: :data:`ctxfold.recall.CHAT_SHARE`
            (0.8) in a chat, 0 once the history has tool calls.
        recall_embedder: an embedder (a :class:`ctxfold.Embedder` or a name such as
            ``"wordllama"``) whose similarity to the query adds to the lexical match
            in choosing what to recall (default: none, words alone).
        redact: mask every credential-shaped value (API keys, tokens, passwords; see
            :mod:`ctxfold.text.secrets`) in what the model sees, as ``[secret <id>]``;
            the history and the store keep the originals, and ``expand`` puts them
            back. The session's expand tool masks them too.

    ``Session.load(session_id, store=...)`` reopens a stored session after a restart
    with its history and compactions, so it renders what the uninterrupted session
    would have. One writer per session id at a time.
    """

    def __new__(cls: type[_S], *args: Any, **options: Any) -> _S:
        """Check the keyword options before ``__init__`` takes them: a misspelt one is
        a :class:`ConfigurationError` naming the closest and every accepted one, as the
        wrappers and ``compress`` say it, not Python's bare ``TypeError``."""
        accepted = inspect.signature(cls.__init__).parameters
        check_options(cls.__name__, options, set(accepted) - {"self"})
        return super().__new__(cls)

    def __init__(
        self,
        session_id: str | None = None,
        *,
        budget: int | None = None,
        strategy: Any = "auto",
        counter: CounterSpec = "o200k_base",
        store: VerbatimStore | str | None = None,
        cache_stable: bool = True,
        low_water: float | None = None,
        high_water: float = 1.0,
        recall_share: float | None = None,
        recall_embedder: Any = None,
        redact: bool = False,
    ) -> None:
        if session_id is None:
            session_id = uuid.uuid4().hex
        if not isinstance(session_id, str) or not session_id:
            raise ConfigurationError(f"session_id must be a non-empty string, got {session_id!r}")
        if not isinstance(cache_stable, bool):
            raise ConfigurationError(f"cache_stable must be True or False, got {cache_stable!r}")
        if not isinstance(redact, bool):
            raise ConfigurationError(f"redact must be True or False, got {redact!r}")
        self.redact = redact
        self.session_id = session_id
        self.budget = None if budget is None else check_budget(budget)
        self.strategy = check_strategy(strategy)
        self.counter: TokenCounter = get_counter(counter)
        self._overhead = self.counter.count_messages([])  # reply priming
        self.store: VerbatimStore = get_session_store(store)  # a memory spec: never capped
        self.cache_stable = cache_stable
        self.low_water, self.high_water = check_water(low_water, high_water)
        self.recall_share = (
            None if recall_share is None else check_share("recall_share", recall_share)
        )
        self.recall_embedder = None if recall_embedder is None else get_embedder(recall_embedder)
        self._lock = threading.RLock()
        self._by: list[Any] | None = None  # see _counted_by
        self._load()

    @classmethod
    def load(cls, session_id: str, *, store: VerbatimStore | str, **settings: Any) -> Session:
        """Reopen the stored session ``session_id`` (give the settings it was made
        with: the compactions it stored were made with them). Raises
        :class:`ctxfold.exceptions.SessionNotFoundError` when the store holds nothing
        under that id; ``Session(session_id, store=...)`` opens it or starts it. Every
        record is checked as it is read (:mod:`ctxfold.session.log`): a record edited,
        missing, moved or of another format, here or in ``Session(session_id, ...)``,
        is a :class:`ctxfold.exceptions.CorruptRecordError` naming the session and the
        record (never a shorter or an empty history); a session an older ctxfold
        stored is read once :func:`ctxfold.session.migrate` has copied it."""
        session = cls(session_id, store=store, **settings)
        if not session._log.exists():
            raise SessionNotFoundError(
                f"no session {session_id!r} in {session.store!r}; check the id and the "
                f"store, or start one with Session({session_id!r}, store=...)"
            )
        return session

    @classmethod
    def resume(
        cls,
        history: Iterable[MessageLike],
        compaction: Mapping[str, Any] | None,
        **settings: Any,
    ) -> Session:
        """A new session over ``history`` whose current compaction is ``compaction``,
        a record :attr:`compaction` gave for the same history (or ``None``): for a
        history kept elsewhere (an agent's checkpointed state), so a compaction made in
        one process is taken up in another without being made again. ``settings`` are
        those of the constructor (a fresh id and a private memory store, signing with
        the key of the process's sessions, by default).

        The record is taken up only when it verifies (see :mod:`ctxfold.session.resume`):
        signed under the store's secret for this very history, every message of its
        prefix the history's own or its round's note. Any other record (edited, of an
        older format, of another history, made in another process with a memory store)
        is never rendered: the session compacts the history afresh, logs a warning on
        the ``ctxfold`` logger and says why in :attr:`resumed`. A persistent store
        (SQLite, Redis) keeps its secret, so its records verify across restarts."""
        settings.setdefault("store", MemoryStore(key=session_store().key))
        session = cls(**settings)
        session.add(list(history))
        if compaction is not None:
            try:
                session._adopt(compaction)
            except CorruptRecordError as exc:
                _log.warning("%s", exc)
                session.resumed = Resumed(Outcome.REFUSED, str(exc))
            else:
                session.resumed = Resumed(Outcome.TAKEN)
        return session

    # ------------------------------------------------------------------ the verbs

    def add(self, messages: Iterable[MessageLike] | MessageLike) -> None:
        """Append messages (OpenAI dicts, :class:`ctxfold.Message`, or a list of a
        framework's messages when its ctxfold extra is installed) to the history; they
        are stored before this returns. A render gives back the kind added last
        (:meth:`CompressionResult.as_given`; plain-text dicts, which both OpenAI's and
        Anthropic's format read alike, keep the kind added before them)."""
        one = isinstance(messages, (Mapping, Message))
        msgs, given = read_messages([messages] if one else messages)
        if not msgs:
            return
        with self._lock:
            self._extend(msgs, self._log.append(msgs))
            if given is not PLAIN or self._given is CTXFOLD:  # plain text tells no client
                self._given = given

    def render(self, budget: int | None = None, *, query: Query = None) -> CompressionResult:
        """The history as the model should see it now, in at most ``budget`` tokens
        (default: the session's). Raises :class:`ctxfold.BudgetError` when what must be
        kept cannot fit.

        ``query`` is what the model is about to answer (default: the newest user
        message when it is the last one and asks something; in an agent's run, where
        recall is off unless ``recall_share`` is set, the newest tool calls and the
        errors their results report; ``False``: none; see
        :func:`ctxfold.recall.default_query`). With a query, the passages of the
        folded history it recalls are shown in a block as late as strict chat APIs
        take it (at the head of the newest user message, most often), so all before
        it stays byte for byte.

        Recall takes the room the view leaves free (at most ``recall_share`` of the
        budget): it never compacts the view, so the cached prefix stays where the
        low-water mark put it. In a session that is not cache-stable, where every
        render is fitted anew, the view compacts into the budget less the room the
        passages want."""
        request = Request(
            self.strategy,
            self._budget(budget),
            self.counter,
            check_query(query),
            reversible=True,
            rounds=self._rounds,
            recall_share=self.recall_share,
            recall_embedder=self.recall_embedder,
        )
        with self._lock, owning(self._memo):
            return run(request, SessionSource(self))

    def text(self, max_tokens: int | None = None, *, query: Query = None) -> str:
        """The history as text of at most ``max_tokens`` tokens (default: the session's
        budget): a render written as a transcript (``role: text`` lines, see
        :func:`ctxfold.messages.transcript`), for a framework that wants a string
        (LlamaIndex's memory blocks). ``""`` for an empty session;
        :class:`ctxfold.BudgetError` when even compacted it does not fit (a transcript
        counts apart from the messages it writes: the render is made again in a room
        smaller by what it measured over)."""
        limit = self._budget(max_tokens)
        if not len(self._history):
            return ""
        written = fit_text(
            lambda room: transcript(self.render(room, query=query).messages), limit, self.counter
        )
        if not written.fits:
            need = self.counter.count_text(written.text)
            raise BudgetError(
                f"the history as text takes {need} tokens, over the {limit} asked: raise it",
                required=need,
                budget=limit,
            )
        return written.text

    async def atext(self, max_tokens: int | None = None, *, query: Query = None) -> str:
        """:meth:`text` in a worker thread; the same text."""
        return await asyncio.to_thread(self.text, max_tokens, query=query)

    async def aadd(self, messages: Iterable[MessageLike] | MessageLike) -> None:
        """:meth:`add` in a worker thread (the store may do I/O)."""
        await asyncio.to_thread(self.add, messages)

    async def arender(self, budget: int | None = None, *, query: Query = None) -> CompressionResult:
        """:meth:`render` in a worker thread; the same result."""
        return await asyncio.to_thread(self.render, budget, query=query)

    @overload
    def expand(self, target: str) -> str: ...

    @overload
    def expand(self, target: CompressionResult | Sequence[MessageLike]) -> Expansion: ...

    def expand(self, target: str | CompressionResult | Sequence[MessageLike]) -> str | Expansion:
        """:func:`ctxfold.expand` on this session's records: a render (or its messages)
        back to the history it shows, or the originals behind a round id or an
        ``[expand <id>]`` marker as text (:class:`ctxfold.ExpandError` for an id it
        never wrote)."""
        back: str | Expansion = expand(target, store=self._log.store)
        return back

    def expand_tool(self, *, max_tokens: int = 4000, search: bool | Search = True) -> ExpandTool:
        """The expand tool over this session's originals, for the model: it opens a
        round's or a marker's id and, with ``search``, finds passages of this session's
        whole history by a ``query`` (:meth:`search`; a wrapper that must first bring
        the session up to date passes its own search). It masks credentials in its
        answers when the session redacts, and also when it does not but its store
        holds originals an earlier ``redact=True`` stored (a session reopened without
        it)."""
        return ExpandTool(
            self._log.store,
            max_tokens=max_tokens,
            counter=self.counter,
            redact=self.redact or None,
            search=search if callable(search) else self.search if search else None,
        )

    def search(self, query: str, max_tokens: int = 1000) -> str:
        """The passages of the whole history (what compaction folded too) that
        ``query`` finds, the best within ``max_tokens``, in time order under their
        speakers, a message shown in part followed by its ``[expand <id>]`` marker;
        empty when nothing matches. What the expand tool answers a search with."""
        if not isinstance(query, str):
            raise ConfigurationError(f"query must be a string, got {type(query).__name__}")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        return search(
            self._history,
            self._recall_index(),
            query,
            max_tokens=max_tokens,
            counter=self.counter,
            store=self._log.store,
        )

    def __len__(self) -> int:
        return len(self._history)

    def __repr__(self) -> str:
        return (
            f"Session({self.session_id!r}, {len(self._history)} messages, "
            f"strategy={self.strategy.name!r}, store={self.store!r})"
        )

    # ------------------------------------------------------------------ rendering

    def _budget(self, budget: int | None) -> int:
        if budget is None:
            if self.budget is None:
                raise ConfigurationError(
                    "render needs a budget: pass render(budget=...) or Session(budget=...)"
                )
            return self.budget
        return check_budget(budget)
