"""note_summarizer: ctxfold's note as the summary of LangChain's SummarizationMiddleware,
inside an agent of ``create_agent``, with no model call for the summary."""

from __future__ import annotations

import asyncio
import re

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

import ctxfold
from conftest import example_conversations
from langchain_ctx import from_langchain, note_summarizer, to_langchain
from langchain_ctx.testing import Replay

COUNTER = ctxfold.TiktokenCounter()
SUMMARY_HEAD = "Here is a summary of the conversation to date"


def _airline() -> list[ctxfold.Message]:
    return next(msgs for conv, msgs in example_conversations() if "airline" in conv)


def _agent(replay: Replay, max_tokens: int) -> object:
    middleware = SummarizationMiddleware(
        replay.model,
        trigger=("tokens", 1500),
        keep=("messages", 4),
        summarizer=note_summarizer(max_tokens=max_tokens),
        trim_tokens_to_summarize=None,
    )
    return create_agent(
        replay.model,
        replay.tools,
        system_prompt=replay.system_prompt,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


@pytest.mark.parametrize("run", ["sync", "async"])
def test_the_agent_summarizes_with_the_note_and_never_calls_a_model_for_it(run: str) -> None:
    msgs = _airline()
    replay = Replay.of(msgs)
    agent = _agent(replay, max_tokens=300)
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 200}
    state = replay.run(agent, config) if run == "sync" else asyncio.run(replay.arun(agent, config))
    plain = Replay.of(msgs)
    plain.run(
        create_agent(
            plain.model,
            plain.tools,
            system_prompt=plain.system_prompt,
            checkpointer=InMemorySaver(),
        ),
        config,
    )
    # every call the model got was a turn of the agent, as without the middleware
    assert len(replay.model.calls) == len(plain.model.calls)
    assert not any("Context Extraction" in str(c.messages) for c in replay.model.calls)
    summaries = [
        m.content
        for m in state["messages"]
        if isinstance(m, HumanMessage) and str(m.content).startswith(SUMMARY_HEAD)
    ]
    assert summaries, "the history passed the trigger: it must have been summarized"
    note = str(summaries[-1]).split("\n\n", 1)[1]
    assert COUNTER.count_text(note) <= 300
    assert "sophia_silva_7557" in note  # the user id the agent looked up early on
    sent = [COUNTER.count_messages(from_langchain(c.messages)) for c in replay.model.calls]
    sent_plain = [COUNTER.count_messages(from_langchain(c.messages)) for c in plain.model.calls]
    assert max(sent) < max(sent_plain)  # the last calls were sent the summary instead


def test_the_summary_keeps_identifiers_the_default_trim_would_drop() -> None:
    history = [m for m in _airline() if m.role != "system"][:-4]
    text = note_summarizer(max_tokens=400).invoke(to_langchain(history))
    assert COUNTER.count_text(text) <= 400
    for ident in ("sophia_silva_7557", "H8Q05L", "credit_card_4196779"):
        assert re.search(rf"(?<!\w){ident}(?!\w)", text), ident


def test_a_short_history_is_given_whole_and_a_bad_size_is_refused_at_once() -> None:
    short = to_langchain([{"role": "user", "content": "Book HAT039 for Ana."}])
    assert note_summarizer(max_tokens=100).invoke(short) == "user: Book HAT039 for Ana."
    assert asyncio.run(note_summarizer(max_tokens=100).ainvoke(short)) == (
        "user: Book HAT039 for Ana."
    )
    with pytest.raises(ctxfold.ConfigurationError, match="max_tokens must be a positive"):
        note_summarizer(max_tokens=0)
    with pytest.raises(ctxfold.ConfigurationError, match="did you mean 'recent_share'"):
        note_summarizer(recent_shar=0.1)
