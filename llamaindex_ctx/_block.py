"""``CompressedHistoryBlock``: a memory block for LlamaIndex's ``Memory`` that gives its
context the older history, compressed, instead of dropping it."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import BaseMemoryBlock
from pydantic import ConfigDict, PrivateAttr

from ctxfold import BudgetError
from ctxfold.recall import default_query
from ctxfold.session import Session
from ctxfold.session.follow import store_for

from ._convert import from_llamaindex
from ._options import check_fields

__all__ = ["CompressedHistoryBlock"]


class CompressedHistoryBlock(BaseMemoryBlock[str]):
    """The messages ``Memory`` flushes out of its short-term history, kept in a
    :class:`ctxfold.Session` and rendered into the memory's context as one text of at
    most ``token_limit`` tokens: the older turns condensed speaker by speaker, with
    the identifiers (paths, ids, numbers) of what was folded listed at the end.

    ``Memory.from_defaults(memory_blocks=[CompressedHistoryBlock(token_limit=800)])``.
    ``strategy`` and ``counter`` are those of :class:`ctxfold.Session`; ``store`` where
    it keeps the originals (by default a memory store of the block's own, freed with
    it). ``priority`` is 1 (LlamaIndex's 0 would mean never
    truncated): when the blocks and the short-term history pass ``Memory``'s
    ``token_limit``, the block renders again within the tokens it may keep.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    name: str = "compressed_history"
    description: str | None = "Earlier conversation, condensed."
    priority: int = 1
    token_limit: int = 1000
    strategy: Any = "auto"
    counter: Any = "o200k_base"
    store: Any = None
    _session: Session = PrivateAttr()
    _query: str | bool = PrivateAttr(default=False)  # of the last get

    def __init__(self, **data: Any) -> None:
        """Fields as above; settings are checked here (``ctxfold.ConfigurationError``)."""
        check_fields(type(self), data)
        super().__init__(**data)
        self._session = Session(
            budget=self.token_limit,
            strategy=self.strategy,
            counter=self.counter,
            store=store_for(None, self.store),
        )

    @property
    def session(self) -> Session:
        """The session holding every flushed message."""
        return self._session

    async def _aput(self, messages: list[ChatMessage]) -> None:
        await self._session.aadd(from_llamaindex(messages))

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        # The query is the memory's newest message when it is the user's and asks (the
        # flushed history's own last message is no query: it was answered long ago).
        self._query = default_query(from_llamaindex(messages or [])) or False
        return await self._text(self.token_limit)

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """The block again within ``tokens_to_truncate`` fewer tokens (``None`` when
        nothing would be left)."""
        keep = self._session.counter.count_text(content) - tokens_to_truncate
        try:
            return await self._text(keep) if keep > 0 else None
        except BudgetError:  # even compacted it does not fit: leave the block out
            return None

    async def _text(self, budget: int) -> str:
        """The history as text within ``budget`` tokens (:meth:`ctxfold.Session.text`)."""
        return await self._session.atext(budget, query=self._query)
