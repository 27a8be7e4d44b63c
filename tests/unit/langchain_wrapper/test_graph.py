"""pre_model_hook: a LangGraph graph built by hand calls its model on the compressed
history, its state keeps every message."""

from __future__ import annotations

import asyncio
import re
from typing import Annotated, Any

import pytest
from langchain_core.messages import AnyMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict

import ctxfold
from conftest import example_conversations
from langchain_ctx import from_langchain, pre_model_hook
from langchain_ctx.testing import Replay

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")

COUNTER = ctxfold.TiktokenCounter()
ROUND = re.compile(r"\[ctxfold round \w+")  # its name hashes the state's new message ids


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    llm_input_messages: list[AnyMessage]
    ctxfold: dict[str, Any] | None


def _graph(
    replay: Replay,
    budget: int,
    saver: InMemorySaver,
    *,
    run_async: bool = False,
    stop: bool = False,
) -> Any:
    """START -> compress -> agent -> (tools -> compress ...) -> END: the agent calls
    the model with its system prompt, its tools and the compressed view."""
    model = replay.model.bind_tools(replay.tools)
    system = SystemMessage(replay.system_prompt or "")

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke([system, *state["llm_input_messages"]])]}

    async def aagent(state: State) -> dict[str, Any]:
        return {"messages": [await model.ainvoke([system, *state["llm_input_messages"]])]}

    hook = pre_model_hook(budget, system_prompt=system, tools=replay.tools, state_key="ctxfold")
    builder = StateGraph(State)
    builder.add_node("compress", hook)
    builder.add_node("agent", aagent if run_async else agent)
    builder.add_node("tools", ToolNode(replay.tools))
    builder.add_edge(START, "compress")
    builder.add_edge("compress", "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "compress")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver, interrupt_before=["tools"] if stop else None)


def _config() -> Any:
    return {"configurable": {"thread_id": "t1"}, "recursion_limit": 1000}


def _trajectory() -> list[ctxfold.Message]:
    return next(msgs for conv, msgs in example_conversations() if "sqlfluff" in conv)


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_hand_built_graph_calls_its_model_within_the_budget(run: str) -> None:
    msgs = _trajectory()
    budget = COUNTER.count_messages(msgs) // 4
    replay = Replay.of(msgs)
    graph = _graph(replay, budget, InMemorySaver(), run_async=run == "async")
    if run == "sync":
        state = replay.run(graph, _config())
    else:
        state = asyncio.run(replay.arun(graph, _config()))
    calls = replay.model.calls
    assert len(calls) > 30
    assert [c.problems(budget) for c in calls] == [[]] * len(calls)
    assert len(calls[-1].messages) < len(state["messages"]) / 4
    kept = [(m.role, m.text) for m in from_langchain(state["messages"])]
    assert kept[: len(replay.recorded)] == [
        (m.role, m.text) for m in from_langchain(replay.recorded)
    ]
    assert state["ctxfold"]["fold"]["round"]  # the compaction, for a restarted process


def test_a_new_hook_takes_up_the_compaction_in_the_state() -> None:
    msgs = _trajectory()
    budget = COUNTER.count_messages(msgs) // 2
    whole = Replay.of(msgs)
    whole.run(_graph(whole, budget, InMemorySaver()), _config())
    split, saver = Replay.of(msgs), InMemorySaver()
    _graph(split, budget, saver, stop=True).invoke({"messages": split.inputs[0]}, _config())
    while _graph(split, budget, saver, stop=True).get_state(_config()).next:
        _graph(split, budget, saver, stop=True).invoke(None, _config())  # nothing cached

    def views(replay: Replay) -> list[list[str]]:
        return [
            [ROUND.sub("", m.text) for m in from_langchain(c.messages)] for c in replay.model.calls
        ]

    assert views(split) == views(whole)
    assert len({v[1] for v in views(whole)}) > 2  # compacted, more than once


def test_the_hook_counts_the_system_prompt_and_tools_when_it_is_made() -> None:
    replay = Replay.of(_trajectory())
    with pytest.raises(ctxfold.BudgetError, match="system prompt and tool schemas"):
        pre_model_hook(40, system_prompt=replay.system_prompt, tools=replay.tools)


@pytest.mark.parametrize(
    "settings",
    [{"budget": -1}, {"budget": 100, "messages_key": ""}, {"budget": 100, "state_key": 3}],
)
def test_bad_settings_fail_when_the_hook_is_made(settings: dict[str, Any]) -> None:
    with pytest.raises(ctxfold.ConfigurationError):
        pre_model_hook(**settings)


def test_a_state_without_the_history_key_is_a_clear_error() -> None:
    hook = pre_model_hook(1000, messages_key="history")
    with pytest.raises(ctxfold.ConfigurationError, match="messages_key="):
        hook.invoke({"messages": []})
