"""compress_messages: the core's compression as a LangChain function and Runnable."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.tracers.base import BaseTracer

import ctxfold
from conftest import example_records, long_chat, shared_conversations
from ctxfold.testing import check_tool_integrity
from ctxfold.validity import turn_order_problems
from langchain_ctx import compress_messages, from_langchain, to_langchain

COUNTER = ctxfold.TiktokenCounter()


def _history() -> list[BaseMessage]:
    """A real agent trajectory from examples/, as LangChain messages."""
    record = next(r for r in example_records() if "sqlfluff" in r["id"])
    return to_langchain(ctxfold.from_openai(record["messages"]))


def _tokens(messages: list[BaseMessage]) -> int:
    return COUNTER.count_messages(from_langchain(messages))


def test_called_with_messages_it_equals_the_core() -> None:
    history = _history()
    budget = _tokens(history) // 4
    out = compress_messages(history, budget=budget)
    core = ctxfold.compress(from_langchain(history), budget=budget)
    assert all(isinstance(m, BaseMessage) for m in out)
    assert [m.text for m in from_langchain(out)] == [m.text for m in core.messages]
    assert _tokens(out) <= budget
    check_tool_integrity(from_langchain(history), from_langchain(out))


def test_in_a_chain_the_model_gets_the_compressed_history() -> None:
    history = _history()
    budget = _tokens(history) // 4
    seen: list[list[BaseMessage]] = []

    def record(value: Any) -> Any:
        seen.append(value.to_messages() if hasattr(value, "to_messages") else value)
        return value

    model = GenericFakeChatModel(messages=iter([AIMessage("done")]))
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You fix bugs."), MessagesPlaceholder("history")]
    )
    chain = prompt | compress_messages(budget=budget) | RunnableLambda(record) | model
    reply = chain.invoke({"history": history[1:]})
    assert reply.content == "done"
    (sent,) = seen
    assert _tokens(sent) <= budget
    assert isinstance(sent[0], SystemMessage) and sent[0].content.startswith("You fix bugs.")
    assert not turn_order_problems(from_langchain(sent))


def test_invoke_ainvoke_batch_and_stream_agree() -> None:
    history = _history()
    runnable = compress_messages(budget=_tokens(history) // 3).with_config(run_name="fold")
    once = runnable.invoke(history)
    assert asyncio.run(runnable.ainvoke(history)) == once
    assert runnable.batch([history, history]) == [once, once]
    assert [chunk for chunk in runnable.stream(history)] == [once]


def test_a_dict_with_messages_keeps_its_other_keys() -> None:
    history = _history()
    state = {"messages": history, "user_id": "u1"}
    out = compress_messages(state, budget=_tokens(history) // 3)
    assert out["user_id"] == "u1"
    assert out["messages"] == compress_messages(history, budget=_tokens(history) // 3)
    assert state["messages"] is history  # the input is left as it was


def test_a_history_that_fits_comes_back_as_it_was() -> None:
    history = [SystemMessage("Be brief."), HumanMessage("hi"), AIMessage("hello")]
    assert compress_messages(history, budget=1000) == history


def test_bad_settings_fail_when_the_runnable_is_made() -> None:
    with pytest.raises(ctxfold.ConfigurationError, match="budget"):
        compress_messages(budget=-5)
    with pytest.raises(ctxfold.ConfigurationError):
        compress_messages(budget=100, strategy="no_such_strategy")
    with pytest.raises(ctxfold.ConfigurationError):
        compress_messages(budget=100, no_such_option=1)


def test_what_cannot_fit_is_a_budget_error() -> None:
    history = [SystemMessage("Follow the policy. " * 200), HumanMessage("hi")]
    with pytest.raises(ctxfold.BudgetError):
        compress_messages(budget=50).invoke(history)


@pytest.mark.full_sweep
def test_on_the_shared_data_it_equals_the_core() -> None:
    """The wrapper adds no logic: its output is the core's on the same messages, and
    the core given the LangChain messages themselves gives them back alike."""
    for name, msgs in shared_conversations():
        history = to_langchain(msgs)
        budget = _tokens(history) // 4
        try:
            core = ctxfold.compress(from_langchain(history), budget=budget)
        except ctxfold.BudgetError:
            with pytest.raises(ctxfold.BudgetError):
                compress_messages(history, budget=budget)
            continue
        out = compress_messages(history, budget=budget)
        assert out == to_langchain(core.messages), name
        assert out == ctxfold.compress(history, budget=budget).as_given(), name
        assert _tokens(out) <= budget, name


def test_in_a_chain_the_users_question_recalls_from_the_older_history() -> None:
    history = to_langchain(ctxfold.from_openai(long_chat()))
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are Ben."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    budget = 400
    chain = prompt | compress_messages(budget=budget, strategy="sliding_window")
    sent = chain.invoke({"history": history, "question": "Which gym locker is mine?"})
    assert "sauna" in sent[-1].content and sent[-1].content.endswith("Which gym locker is mine?")
    assert _tokens(sent) <= budget and not turn_order_problems(from_langchain(sent))
    off = prompt | compress_messages(budget=budget, strategy="sliding_window", query=False)
    plain = off.invoke({"history": history, "question": "Which gym locker is mine?"})
    assert not any("sauna" in m.content for m in plain)


class _Recorder(BaseTracer):
    """A tracer as LangSmith's is one: records each finished chain run's metadata."""

    def __init__(self) -> None:
        super().__init__()
        self.finished: dict[str, dict[str, Any]] = {}

    def _persist_run(self, run: Any) -> None:
        pass

    def _on_chain_end(self, run: Any) -> None:
        self.finished[run.name] = dict(run.metadata)


def test_a_trace_shows_what_each_call_folded() -> None:
    history = _history()
    budget = _tokens(history) // 4
    tracer = _Recorder()
    model = GenericFakeChatModel(messages=iter([AIMessage("done")]))
    chain = compress_messages(budget=budget) | model
    asyncio.run(chain.ainvoke(history, config={"callbacks": [tracer], "metadata": {"user": "u"}}))
    stats = tracer.finished["compress_messages"]["ctxfold"]
    core = ctxfold.compress(from_langchain(history), budget=budget)
    assert stats["tokens_before"] == _tokens(history) and stats["budget"] == budget
    assert stats["tokens_after"] == core.stats.tokens_after <= budget
    assert stats["decisions"] == core.decision_counts() and stats["decisions"]["summarized"] > 0
    assert stats["round_id"] and tracer.finished["compress_messages"]["user"] == "u"
