"""``CompressedChatMessageHistory``: any LangChain chat history, read compressed."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Sequence
from typing import Any

from langchain_core._api import LangChainDeprecationWarning
from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.messages import BaseMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import BasePromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from typing_extensions import Unpack

from ctxfold import ConfigurationError
from ctxfold.recall import Query, default_query
from ctxfold.session import CompactionOptions, Follower, Session
from ctxfold.session.follow import store_for
from ctxfold.storage import VerbatimStore
from ctxfold.strategies.options import check_count
from ctxfold.tokens import room_left

from ._convert import from_langchain, snapshot, to_langchain
from ._options import check_settings

__all__ = ["CompressedChatMessageHistory", "compressed_prompt"]


def _in_memory() -> BaseChatMessageHistory:
    """LangChain's in-memory history; its deprecation concerns the class the user did
    not choose here, so it is not passed on."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LangChainDeprecationWarning)
        return InMemoryChatMessageHistory()


class CompressedChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history whose ``messages`` is the compressed view of another.

    Writes go to the wrapped ``history`` unchanged (``InMemoryChatMessageHistory`` by
    default; any SQL, Redis or file history works), so it keeps the whole record.
    Reads render it through a :class:`ctxfold.Session` to at most ``budget`` tokens:
    the view is computed once per change of the wrapped history (a
    ``RunnableWithMessageHistory`` that reads twice in a turn gets one list), only the
    messages added since the last read are new to the session, and between
    compactions each view is the last one plus what is new (a cache-stable prefix).
    A history changed otherwise (cleared, edited) is read again from the start.

    ``session_id`` and ``store`` name where the session keeps its compactions: with a
    persistent store (``"sqlite:///path.db"``, a Redis URL) and the same id, a new
    process takes up where the last one stopped. With neither, the session is the
    history object's own (a memory store freed with it), so one made per request
    leaves nothing behind; with an id alone, it is in the process's memory store for
    the life of the process. The other settings are those of :class:`ctxfold.Session`.

    ``budget`` is the whole request: ``reserve`` of it (default 0) is kept for what
    the prompt and the model call send beside the history (the prompt's system
    message, the model's tool schemas), so a read renders within ``budget - reserve``.
    ``RunnableWithMessageHistory`` reads the history before the new input joins it, so
    a plain read neither counts that input nor recalls for it: put
    :func:`compressed_prompt` in place of the prompt, or call :meth:`messages_for`
    with the messages you send beside the history, and the view is rendered within
    what they leave, recalling what the new input asks about.

    Two histories on one session id and store (two workers on one conversation) may
    both write it: a read that finds the other wrote first reads the session again
    from the store and tries once more (see :class:`ctxfold.session.Follower`); a
    second conflict in a row raises :class:`ctxfold.exceptions.ConcurrentWriteError`, nothing
    lost, and the next read tries again.
    """

    def __init__(
        self,
        history: BaseChatMessageHistory | None = None,
        *,
        budget: int,
        reserve: int = 0,
        session_id: str | None = None,
        store: VerbatimStore | str | None = None,
        **options: Unpack[CompactionOptions],
    ) -> None:
        check_settings(CompressedChatMessageHistory.__init__, options)
        self.history = _in_memory() if history is None else history
        self.session = Session(
            session_id, budget=budget, store=store_for(session_id, store), **options
        )
        self.reserve = check_count("reserve", reserve)
        if self.reserve >= budget:
            raise ConfigurationError(
                f"reserve ({reserve}) leaves nothing of the budget ({budget}) for the "
                "history: raise the budget or lower reserve"
            )
        self._follower = Follower(self.session, from_langchain, key=snapshot)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The wrapped history, compressed to the budget."""
        return self._view_of(self.history.messages)

    async def aget_messages(self) -> list[BaseMessage]:
        """:attr:`messages`, reading the wrapped history with its own async method."""
        wrapped = await self.history.aget_messages()
        return await asyncio.to_thread(self._view_of, wrapped)

    def messages_for(self, sent: Sequence[BaseMessage]) -> list[BaseMessage]:
        """The view to send with ``sent``, the messages a prompt puts beside the
        history (its system message, the new input, not yet in the history): rendered
        within ``budget - reserve`` less what ``sent`` takes, recalling for the newest
        input when it is last in ``sent`` and asks something (see
        :func:`ctxfold.recall.default_query`)."""
        return self._view_of(self.history.messages, sent)

    async def amessages_for(self, sent: Sequence[BaseMessage]) -> list[BaseMessage]:
        """:meth:`messages_for`, reading the wrapped history with its async method."""
        wrapped = await self.history.aget_messages()
        return await asyncio.to_thread(self._view_of, wrapped, sent)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Add ``messages`` to the wrapped history, as they are."""
        self.history.add_messages(messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """:meth:`add_messages` with the wrapped history's async method."""
        await self.history.aadd_messages(messages)

    def clear(self) -> None:
        """Clear the wrapped history and start the session over."""
        self.history.clear()
        self._follower.clear()

    async def aclear(self) -> None:
        """:meth:`clear` with the wrapped history's async method."""
        await self.history.aclear()
        await asyncio.to_thread(self._follower.clear)

    def _view_of(
        self, wrapped: list[BaseMessage], sent: Sequence[BaseMessage] = ()
    ) -> list[BaseMessage]:
        budget, counter = self.session.budget or 0, self.session.counter
        beside = from_langchain(list(sent))
        # The reply's priming is counted once, in the view.
        sent_too = self.reserve
        if beside:
            sent_too += counter.count_messages(beside) - counter.count_messages([])
        room = room_left(
            budget, sent_too, "what the prompt sends beside the history (reserve included)"
        )
        query: Query = default_query(beside) if beside else None
        return to_langchain(self._follower.render(wrapped, room, query=query).messages)


def compressed_prompt(
    prompt: BasePromptTemplate[Any], *, history_messages_key: str = "history"
) -> Runnable[dict[str, Any], PromptValue]:
    """``prompt`` with its ``history_messages_key`` placeholder filled by a
    :class:`CompressedChatMessageHistory` for the request it is part of, for the chain
    a ``RunnableWithMessageHistory`` wraps (``compressed_prompt(prompt) | model``).

    The prompt is formatted once without the history, to count what it adds (its
    system message, the new input); the history is then rendered within the budget
    less that and less its ``reserve``, recalling what the new input asks about, and
    the prompt formatted with it. The history is the one ``RunnableWithMessageHistory``
    passes the chain in its run's config (``configurable["message_history"]``, where
    its own steps read it); anything else there is a
    :class:`ctxfold.ConfigurationError`."""

    def history_of(config: RunnableConfig) -> CompressedChatMessageHistory:
        history = (config.get("configurable") or {}).get("message_history")
        if not isinstance(history, CompressedChatMessageHistory):
            raise ConfigurationError(
                "compressed_prompt fills the history of a RunnableWithMessageHistory "
                "whose get_session_history returns a CompressedChatMessageHistory; got "
                f"{type(history).__name__}: wrap the chain in RunnableWithMessageHistory "
                "with such a history"
            )
        return history

    def fill(value: dict[str, Any], config: RunnableConfig) -> PromptValue:
        history = history_of(config)
        bare = prompt.invoke({**value, history_messages_key: []}, config).to_messages()
        view = history.messages_for(bare)
        return prompt.invoke({**value, history_messages_key: view}, config)

    async def afill(value: dict[str, Any], config: RunnableConfig) -> PromptValue:
        history = history_of(config)
        bare = (await prompt.ainvoke({**value, history_messages_key: []}, config)).to_messages()
        view = await history.amessages_for(bare)
        return await prompt.ainvoke({**value, history_messages_key: view}, config)

    return RunnableLambda(fill, afill, name="compressed_prompt")
