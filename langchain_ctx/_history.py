"""``CompressedChatMessageHistory``: any LangChain chat history, read compressed."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Sequence

from langchain_core._api import LangChainDeprecationWarning
from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.messages import BaseMessage
from typing_extensions import Unpack

from ctxfold.session import CompactionOptions, Follower, Session
from ctxfold.session.follow import store_for
from ctxfold.storage import VerbatimStore

from ._convert import from_langchain, snapshot, to_langchain
from ._options import check_settings

__all__ = ["CompressedChatMessageHistory"]


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
        session_id: str | None = None,
        store: VerbatimStore | str | None = None,
        **options: Unpack[CompactionOptions],
    ) -> None:
        check_settings(CompressedChatMessageHistory.__init__, options)
        self.history = _in_memory() if history is None else history
        self.session = Session(
            session_id, budget=budget, store=store_for(session_id, store), **options
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

    def _view_of(self, wrapped: list[BaseMessage]) -> list[BaseMessage]:
        return to_langchain(self._follower.render(wrapped).messages)
