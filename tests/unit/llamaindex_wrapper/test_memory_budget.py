"""CompressedChatMemory's budget: a history put at once fills the limit as ``compress``
does, and what is sent beside the history (the new input, a reserve) comes off it."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole

import ctxfold
from conftest import long_chat
from ctxfold.storage import MemoryStore
from llamaindex_ctx import CompressedChatMemory, from_llamaindex, to_llamaindex

COUNTER = ctxfold.TiktokenCounter()
LIMIT = 1500


def _tokens(messages: list[ChatMessage]) -> int:
    return COUNTER.count_messages(from_llamaindex(messages))


def _bulk(**settings: Any) -> CompressedChatMemory:
    memory = CompressedChatMemory(token_limit=LIMIT, store=MemoryStore(), **settings)
    memory.put_messages(to_llamaindex(long_chat(400)))  # about 8,000 tokens at once
    return memory


def test_a_get_after_a_bulk_put_fills_the_limit_like_compress() -> None:
    memory = _bulk()
    view = memory.get()
    assert 0.85 * LIMIT <= _tokens(view) <= LIMIT
    whole = from_llamaindex(memory.get_all())
    assert from_llamaindex(view) == list(ctxfold.compress(whole, budget=LIMIT).messages)


def test_the_new_input_a_chat_engine_sends_after_the_history_is_counted() -> None:
    """CondensePlusContextChatEngine reads the memory with the question before it stores
    it and sends it after the history: the two together are within the limit, and the
    question recalls what it asks about."""
    memory = _bulk()
    question = "Which gym locker is mine, the one by the sauna? " * 4
    view = memory.get(input=question)
    sent = [*view, ChatMessage(role=MessageRole.USER, content=question)]
    assert 0.85 * LIMIT <= _tokens(sent) <= LIMIT
    assert "sauna" in " ".join(m.content or "" for m in view[:-1])
    # An agent stores its input first: it is in the view, not counted again.
    memory.put(ChatMessage(role=MessageRole.USER, content=question))
    stored = memory.get(input=question)
    assert stored[-1].content.endswith(question) and _tokens(stored) > 0.85 * LIMIT


def test_reserve_comes_off_the_limit() -> None:
    reserve = 400
    view = _bulk(reserve=reserve).get()
    assert 0.85 * (LIMIT - reserve) <= _tokens(view) <= LIMIT - reserve


@pytest.mark.parametrize("reserve", [-1, 2.5, LIMIT])
def test_a_reserve_that_is_no_count_or_leaves_nothing_is_refused(reserve: Any) -> None:
    # A fraction is pydantic's ValidationError, a ValueError as ConfigurationError is.
    with pytest.raises(ValueError, match="reserve"):
        CompressedChatMemory(token_limit=LIMIT, reserve=reserve)
