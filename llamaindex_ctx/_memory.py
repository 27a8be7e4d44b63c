"""``CompressedChatMemory``: a LlamaIndex chat memory that keeps the whole history in a
chat store and gives the model its compressed view."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY, BaseChatStoreMemory
from llama_index.core.storage.chat_store import BaseChatStore, SimpleChatStore
from llama_index.core.tools import FunctionTool
from pydantic import ConfigDict, Field, PrivateAttr

from ctxfold import BudgetError, ConfigurationError, Message
from ctxfold.session import Follower, Session
from ctxfold.session.follow import store_for
from ctxfold.strategies.options import check_count
from ctxfold.tokens import room_left

from ._convert import from_llamaindex, snapshot, to_llamaindex
from ._options import check_fields
from ._tools import as_function_tool

__all__ = ["CompressedChatMemory"]

DEFAULT_KEY = DEFAULT_CHAT_STORE_KEY


class CompressedChatMemory(BaseChatStoreMemory):
    """The whole history in ``chat_store`` (a ``SimpleChatStore`` by default, or any
    store you have), and a :class:`ctxfold.Session` that renders it within
    ``token_limit`` tokens: :meth:`get` gives the model the compressed view, a tool
    call never apart from its results, a message longer than the limit shortened
    (never an empty history), and between compactions each view is the last one plus
    what is new. Tool-call and non-text blocks are counted.

    ``token_limit`` is the whole request: what a chat engine sends beside the history
    is taken off it, the system prompt it passes as ``initial_token_count`` and the
    new ``input`` it passes before storing it (counted as a user message when the
    stored history does not already end on it, and recalled for), and ``reserve``
    tokens (default 0) for what neither tells (an agent's tool schemas).

    ``strategy``, ``counter``, ``cache_stable``, ``low_water``, ``high_water``,
    ``recall_share``, ``recall_embedder`` and ``redact`` are those of
    :class:`ctxfold.Session`,
    checked when the memory is made; ``session_id``
    and ``store`` name where the session keeps its compactions (a persistent store and
    the same id let a new process take up where the last one stopped). With neither,
    the session is the memory's own (a memory store freed with it): a memory made per
    request leaves nothing behind, and the next one reads the history from
    ``chat_store``. Two memories on one session id and store may both write it: a read
    that finds the other wrote first reads the session again and tries once more; a
    second conflict in a row raises :class:`ctxfold.exceptions.ConcurrentWriteError`.

    Works as ``memory=`` of ``SimpleChatEngine``, ``CondensePlusContextChatEngine``,
    ``FunctionAgent`` and ``AgentWorkflow``. Built on LlamaIndex's
    ``BaseChatStoreMemory``: ``put``, ``set``, ``get_all`` and their async twins are
    its own, reading and writing ``chat_store`` under ``chat_store_key``.
    """

    model_config = ConfigDict(extra="forbid")  # a misspelt setting is an error

    token_limit: int = 3000
    reserve: int = 0
    strategy: Any = "auto"
    counter: Any = "o200k_base"
    cache_stable: bool = True
    low_water: float | None = None
    high_water: float = 1.0
    recall_share: float | None = None
    recall_embedder: Any = None
    redact: bool = False
    session_id: str | None = None
    store: Any = Field(default=None, exclude=True)
    _follower: Follower[ChatMessage] = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        """Fields as above; every setting is checked here, not at first use (a bad one
        raises :class:`ctxfold.ConfigurationError`)."""
        check_fields(type(self), data)
        super().__init__(**data)
        session = Session(
            self.session_id,
            budget=self.token_limit,
            strategy=self.strategy,
            counter=self.counter,
            store=store_for(self.session_id, self.store),
            cache_stable=self.cache_stable,
            low_water=self.low_water,
            high_water=self.high_water,
            recall_share=self.recall_share,
            recall_embedder=self.recall_embedder,
            redact=self.redact,
        )
        if check_count("reserve", self.reserve) >= self.token_limit:
            raise ConfigurationError(
                f"reserve ({self.reserve}) leaves nothing of token_limit "
                f"({self.token_limit}) for the history: raise token_limit or lower reserve"
            )
        self._follower = Follower(session, from_llamaindex, key=snapshot)

    @classmethod
    def class_name(cls) -> str:
        return "CompressedChatMemory"

    @classmethod
    def from_defaults(
        cls,
        chat_history: list[ChatMessage] | None = None,
        llm: Any = None,
        chat_store: BaseChatStore | None = None,
        chat_store_key: str = DEFAULT_KEY,
        token_limit: int | None = None,
        **options: Any,
    ) -> CompressedChatMemory:
        """As LlamaIndex's own memories: ``token_limit`` defaults to three quarters of
        ``llm``'s context window (3000 without one); ``options`` are the memory's
        other settings."""
        if token_limit is None:
            window = getattr(getattr(llm, "metadata", None), "context_window", None)
            token_limit = int(window * 0.75) if isinstance(window, int) else 3000
        memory = cls(
            chat_store=chat_store or SimpleChatStore(),
            chat_store_key=chat_store_key,
            token_limit=token_limit,
            **options,
        )
        if chat_history:
            memory.set(chat_history)
        return memory

    @property
    def session(self) -> Session:
        """The session that renders the history (its store keeps the originals)."""
        return self._follower.session

    def expand_tool(self, *, max_tokens: int = 4000) -> FunctionTool:
        """The expand tool over this memory's folded originals, as a ``FunctionTool``
        for an agent: the model reads back what a note condensed, by its round id, or
        finds passages of the whole stored history by a ``query``."""
        tool = self.session.expand_tool(max_tokens=max_tokens, search=self.search)
        return as_function_tool(tool)

    def search(self, query: str, max_tokens: int = 1000) -> str:
        """What ``query`` finds in the whole stored history, the best passages within
        ``max_tokens`` (see :meth:`ctxfold.Session.search`)."""
        stored = self.chat_store.get_messages(self.chat_store_key)
        return self._follower.search(stored, query, max_tokens)

    def tokenizer_fn(self, text: str) -> list[int]:
        """Tokens of ``text`` by the memory's counter (a chat engine counts its system
        prompt with it and passes the count to :meth:`get`)."""
        return [0] * self.session.counter.count_text(text)

    def get(
        self, input: str | None = None, initial_token_count: int = 0, **kwargs: Any
    ) -> list[ChatMessage]:
        """The history compressed to ``token_limit`` less what is sent beside it: the
        system prompt a chat engine counts as ``initial_token_count`` (its message
        framing too), ``input``, the current question, when the stored history does not
        end on it (a chat engine asks before it stores it), and ``reserve``. The
        passages of the older history ``input`` recalls are shown (see
        :meth:`ctxfold.Session.render`). Raises :class:`ctxfold.BudgetError` when
        nothing is left for the history."""
        stored = self.chat_store.get_messages(self.chat_store_key)
        return self._view(stored, initial_token_count, input)

    async def aget(
        self, input: str | None = None, initial_token_count: int = 0, **kwargs: Any
    ) -> list[ChatMessage]:
        """:meth:`get`, the store read with its async method."""
        stored = await self.chat_store.aget_messages(self.chat_store_key)
        return await asyncio.to_thread(self._view, stored, initial_token_count, input)

    def _view(
        self, stored: list[ChatMessage], initial_token_count: int, query: str | None
    ) -> list[ChatMessage]:
        count = self.session.counter.count_message
        # The engine's question (CondensePlusContextChatEngine asks before it stores
        # it) is the query; without one, the newest user message when it is last.
        asked = query if isinstance(query, str) and query.strip() else None
        beside = initial_token_count + self.reserve
        if initial_token_count:
            beside += count(Message("system", ""))
        if asked is not None and not _ends_on(stored, asked):
            beside += count(Message("user", asked))  # sent after the history
        what = "the system prompt, input and reserve sent beside the history"
        room = room_left(self.token_limit, beside, what, setting="token_limit")
        try:
            rendered = self._follower.render(stored, room, query=asked)
        except BudgetError as exc:
            raise _too_small(exc, self.token_limit, beside) from None
        return to_llamaindex(rendered.messages)

    def reset(self) -> None:
        """Delete the stored history and start the session over."""
        self.chat_store.delete_messages(self.chat_store_key)
        self._follower.clear()

    async def areset(self) -> None:
        """:meth:`reset` with the store's async method."""
        await self.chat_store.adelete_messages(self.chat_store_key)
        await asyncio.to_thread(self._follower.clear)


def _too_small(exc: BudgetError, limit: int, beside: int) -> BudgetError:
    """The memory's own words for a history that does not fit its ``token_limit``
    (``beside`` of it spent on what a chat engine sends with the history)."""
    need = exc.required + beside
    spent = f", {beside} of them spent beside it (system prompt, framing)" if beside else ""
    return BudgetError(
        f"token_limit={limit} is too small for this history: even compacted (a note on "
        f"the older messages, the newest cut short) it needs {need} tokens{spent}; "
        f"raise token_limit to at least {need}",
        required=need,
        budget=limit,
    )


def _ends_on(stored: list[ChatMessage], text: str) -> bool:
    """Whether the newest user message of ``stored`` is ``text`` (an agent stores its
    input before it reads the memory; a chat engine reads first)."""
    users = (m for m in reversed(stored) if m.role.value == "user")
    newest = next(users, None)
    return newest is not None and (newest.content or "").strip() == text.strip()
