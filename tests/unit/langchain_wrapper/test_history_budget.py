"""CompressedChatMessageHistory under RunnableWithMessageHistory: the request the model
gets, prompt included, within the budget, and the new input recalled for."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from langchain_core._api import LangChainDeprecationWarning
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable
from langchain_core.runnables.history import RunnableWithMessageHistory

import ctxfold
from ctxfold.recall.block import HEAD_LINE
from ctxfold.result import RECALL_END
from ctxfold.storage import MemoryStore
from langchain_ctx import CompressedChatMessageHistory, compressed_prompt, from_langchain
from langchain_ctx.testing import ScriptedChatModel

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")

COUNTER = ctxfold.TiktokenCounter()
BUDGET = 1500
SYSTEM = "You are Ben, a friendly assistant who remembers what Ana tells you. " * 3
LOCKER = "My gym locker number is 4471, by the way."


def _said(k: int) -> str:
    if k == 20:
        return LOCKER
    return (
        f"Day {k}: we took bus {300 + 7 * k} to platform {k % 9 + 1}, paid {12 + k} euros "
        f"at cafe {k * 13 % 97} and talked about the weather and the news for a while."
    )


def _replies(n: int) -> list[AIMessage]:
    return [
        AIMessage(f"That sounds lovely, day {k}. Tell me more about it. " * 2) for k in range(n)
    ]


def _prompt() -> ChatPromptTemplate:
    return ChatPromptTemplate.from_messages(
        [("system", SYSTEM), MessagesPlaceholder("history"), ("human", "{input}")]
    )


def _chat(chain: Runnable[Any, Any], history: CompressedChatMessageHistory) -> Runnable[Any, Any]:
    with warnings.catch_warnings():  # the user's own call: deprecated upstream
        warnings.simplefilter("ignore", LangChainDeprecationWarning)
        return RunnableWithMessageHistory(
            chain,
            lambda session_id: history,
            input_messages_key="input",
            history_messages_key="history",
        )


def _system_tokens() -> int:
    return COUNTER.count_messages(from_langchain(_prompt().invoke({"history": [], "input": ""})))


def test_a_plain_read_keeps_reserve_for_what_the_prompt_sends() -> None:
    """With ``reserve`` the size of the prompt's system message and the longest input,
    every request the model is sent, system message and input included, is within the
    budget (the history alone at ``budget`` sent up to 1,561 tokens)."""
    turns = 60
    model = ScriptedChatModel(responses=_replies(turns))
    longest = max(COUNTER.count_text(_said(k)) for k in range(turns))
    reserve = _system_tokens() + longest + 8
    history = CompressedChatMessageHistory(budget=BUDGET, reserve=reserve, store=MemoryStore())
    chat = _chat(_prompt() | model, history)
    for k in range(turns):
        chat.invoke({"input": _said(k)}, config={"configurable": {"session_id": "s"}})
    assert [c.problems(BUDGET) for c in model.calls] == [[]] * turns
    assert max(c.tokens() for c in model.calls) > 0.8 * BUDGET  # compressed, not emptied
    assert COUNTER.count_messages(from_langchain(history.history.messages)) > 2 * BUDGET


@pytest.mark.parametrize("asynchronous", [False, True])
def test_compressed_prompt_counts_the_prompt_and_recalls_for_the_new_input(
    asynchronous: bool,
) -> None:
    """``compressed_prompt(prompt)``: the request, the prompt's system message and the
    new question included, is within the budget on every turn, and a number said at
    turn 20, 130 turns before, is sent and recalled for when it is asked for (a plain
    read cannot see the question, so it recalls nothing)."""
    turns = 150
    questions = [_said(k) for k in range(turns)] + ["What is my gym locker number?"]
    config: Any = {"configurable": {"session_id": "s"}}
    sent = {}
    for name in ("plain", "compressed_prompt"):
        model = ScriptedChatModel(responses=_replies(turns + 1))
        history = CompressedChatMessageHistory(
            budget=BUDGET, reserve=_system_tokens() + 40, store=MemoryStore()
        )
        prompt = _prompt() if name == "plain" else compressed_prompt(_prompt())
        chat = _chat(prompt | model, history)
        for q in questions:
            if asynchronous:
                asyncio.run(chat.ainvoke({"input": q}, config=config))
            else:
                chat.invoke({"input": q}, config=config)
        sent[name] = "\n".join(str(m.content) for m in model.calls[-1].messages[1:-1])
    assert [c.problems(BUDGET) for c in model.calls] == [[]] * len(questions)
    last = model.calls[-1].messages
    assert last[0].content == SYSTEM and last[-1] == HumanMessage(questions[-1])
    # Sent, and recalled for the question: the block holds the exchange the fact was
    # said in (the note kept the line itself); a plain read has no block.
    assert "4471" in sent["compressed_prompt"]
    block = sent["compressed_prompt"].split(HEAD_LINE, 1)[1].split(RECALL_END, 1)[0]
    assert "day 20." in block and HEAD_LINE not in sent["plain"]
    stored = history.history.messages
    assert len(stored) == 2 * len(questions)  # the wrapped history keeps every turn whole
    assert stored[-2] == HumanMessage(questions[-1])


def test_compressed_prompt_needs_the_compressed_history() -> None:
    from langchain_core.chat_history import InMemoryChatMessageHistory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LangChainDeprecationWarning)
        plain = InMemoryChatMessageHistory()
        chat = RunnableWithMessageHistory(
            compressed_prompt(_prompt()) | ScriptedChatModel(),
            lambda session_id: plain,
            input_messages_key="input",
            history_messages_key="history",
        )
    with pytest.raises(ctxfold.ConfigurationError, match="CompressedChatMessageHistory"):
        chat.invoke({"input": "hi"}, config={"configurable": {"session_id": "s"}})


@pytest.mark.parametrize("reserve", [-1, 1.5, True, BUDGET])
def test_a_reserve_that_is_no_count_or_leaves_nothing_is_refused(reserve: Any) -> None:
    with pytest.raises(ctxfold.ConfigurationError, match="reserve"):
        CompressedChatMessageHistory(budget=BUDGET, reserve=reserve)
