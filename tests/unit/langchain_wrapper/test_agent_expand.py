"""CompressionMiddleware's expand tool and store: the agent's model reads what a round
folded, in the same process and after a restart, never another thread's; and a budget
as a fraction of the model's context window."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

import ctxfold
from conftest import example_conversations
from langchain_ctx import CompressionMiddleware, from_langchain, to_langchain
from langchain_ctx.testing import ScriptedChatModel

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")

ROUND = re.compile(r"\[ctxfold round (\w+)")
PAGE = re.compile(r"\[page \d+ of \d+; call expand")
NAMES = ["Oksana", "Bertrand", "Ikechukwu", "Marisol", "Tadeusz", "Yevgenia", "Lorcan", "Anouk"]
BUDGET = 900


def _turn(k: int) -> str:
    """A user turn of ~150 tokens holding one fact of its own."""
    line = "the depot logs list crates, pallets and forklifts."
    filler = " ".join(f"Line {k}.{j}: {line}" for j in range(8))
    return f"Depot {k}: the courier on duty is {NAMES[k % len(NAMES)]}{k}. {filler}"


def _config(thread: str = "t1") -> Any:
    return {"configurable": {"thread_id": thread}}


def _agent(model: ScriptedChatModel, middleware: CompressionMiddleware, saver: Any) -> Any:
    return create_agent(model, [], middleware=[middleware], checkpointer=saver)


def _chat(agent: Any, model: ScriptedChatModel, turns: int, thread: str = "t1") -> None:
    model.responses.extend(AIMessage(f"Noted depot {k}.") for k in range(turns))
    for k in range(turns):
        agent.invoke({"messages": [HumanMessage(_turn(k))]}, _config(thread))


#: A turn the round folds (the first, the task, is kept whole).
FOLDED = _turn(2)


def _folded_round(model: ScriptedChatModel) -> str:
    """The round id the model's last call shows; the turn ``FOLDED`` is folded."""
    seen = "\n".join(str(m.content) for m in model.calls[-1].messages)
    assert FOLDED not in seen  # folded away from the model's view
    found = ROUND.search(seen)
    assert found, seen[:500]
    return found.group(1)


def _ask_expand(
    agent: Any, model: ScriptedChatModel, rid: str, thread: str = "t1", page: int = 1
) -> str:
    """The scripted model calls the expand tool with ``rid``; the tool's answer."""
    call_id = f"call_expand_{len(model.calls)}"
    args = {"id": rid, "page": page}
    call = {"name": "expand", "args": args, "id": call_id, "type": "tool_call"}
    model.responses.extend([AIMessage("", tool_calls=[call]), AIMessage("Ikechukwu2 it was.")])
    ask = {"messages": [HumanMessage("Who was on duty at depot 2?")]}
    state = agent.invoke(ask, _config(thread))
    answer = state["messages"][-2]
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == call_id
    # the model's next call received the tool's answer
    sent = model.calls[-1].messages
    assert any(isinstance(m, ToolMessage) and m.tool_call_id == call_id for m in sent)
    return str(answer.content)


def _ask_search(agent: Any, model: ScriptedChatModel, query: str, thread: str = "t1") -> str:
    """The scripted model calls the expand tool with a ``query`` and no id; the answer."""
    call_id = f"call_search_{len(model.calls)}"
    call = {"name": "expand", "args": {"query": query}, "id": call_id, "type": "tool_call"}
    model.responses.extend([AIMessage("", tool_calls=[call]), AIMessage("Found it.")])
    state = agent.invoke({"messages": [HumanMessage("Who was at depot 2?")]}, _config(thread))
    answer = state["messages"][-2]
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == call_id
    return str(answer.content)


def _read_back(agent: Any, model: ScriptedChatModel, rid: str, thread: str = "t1") -> str:
    """The model expands ``rid`` page by page, then each older round the answers name
    (a round folds the note of the round before it), until it reads ``FOLDED``: all
    it read."""
    read, this, page = "", "", 1
    for _ in range(12):
        answer = _ask_expand(agent, model, rid, thread, page)
        read, this = read + answer, this + answer
        if PAGE.search(answer):  # more pages of this round
            page += 1
            continue
        older = ROUND.search(this)
        if FOLDED in read or older is None:
            return read
        rid, this, page = older.group(1), "", 1
    return read


def test_the_model_reads_a_folded_round_through_the_middlewares_tool() -> None:
    model, saver = ScriptedChatModel(), InMemorySaver()
    agent = _agent(model, CompressionMiddleware(budget=BUDGET), saver)
    _chat(agent, model, 8)
    assert "expand" in [t["function"]["name"] for t in model.calls[-1].tools]
    rid = _folded_round(model)
    answer = _read_back(agent, model, rid)
    assert FOLDED in answer


def test_the_tool_reads_rounds_after_a_restart_from_a_sqlite_store(tmp_path: Path) -> None:
    spec = f"sqlite:///{tmp_path / 'rounds.db'}"
    model, saver = ScriptedChatModel(), InMemorySaver()
    _chat(_agent(model, CompressionMiddleware(budget=BUDGET, store=spec), saver), model, 8)
    rid = _folded_round(model)
    # a new process: a new middleware, the same checkpoints and store file
    restarted = _agent(model, CompressionMiddleware(budget=BUDGET, store=spec), saver)
    answer = _read_back(restarted, model, rid)
    assert FOLDED in answer


def test_the_tool_pages_a_long_round_within_its_max_tokens() -> None:
    model, saver = ScriptedChatModel(), InMemorySaver()
    agent = _agent(model, CompressionMiddleware(budget=BUDGET, expand_max_tokens=200), saver)
    _chat(agent, model, 8)
    rid = _folded_round(model)
    answer = _ask_expand(agent, model, rid)
    assert ctxfold.TiktokenCounter().count_text(answer) <= 200
    assert "page=2" in answer
    if "Ikechukwu2" not in answer:  # the round opens with the task the note carries
        answer = _ask_expand(agent, model, rid, page=2)
        assert ctxfold.TiktokenCounter().count_text(answer) <= 200
    assert "Ikechukwu2" in answer


def test_a_round_of_another_thread_is_not_found(tmp_path: Path) -> None:
    spec = f"sqlite:///{tmp_path / 'rounds.db'}"
    model, saver = ScriptedChatModel(), InMemorySaver()
    agent = _agent(model, CompressionMiddleware(budget=BUDGET, store=spec), saver)
    _chat(agent, model, 8, thread="t1")
    rid = _folded_round(model)
    model.responses.append(AIMessage("Hello."))
    agent.invoke({"messages": [HumanMessage("Hi")]}, _config("t2"))
    answer = _ask_expand(agent, model, rid, thread="t2")
    assert "Ikechukwu2" not in answer and "nothing is stored" in answer


def test_the_model_finds_a_folded_fact_by_a_search_without_an_id() -> None:
    model, saver = ScriptedChatModel(), InMemorySaver()
    agent = _agent(model, CompressionMiddleware(budget=BUDGET, expand_max_tokens=300), saver)
    _chat(agent, model, 8)
    _folded_round(model)  # depot 2's courier is folded away from the model's view
    schema = next(t for t in model.calls[-1].tools if t["function"]["name"] == "expand")
    assert "query" in schema["function"]["parameters"]["properties"]
    answer = _ask_search(agent, model, "courier on duty at depot 2")
    assert "Ikechukwu2" in answer
    assert ctxfold.TiktokenCounter().count_text(answer) <= 300
    assert "Nothing in the conversation matches" in _ask_search(agent, model, "zeppelin hangar")


def test_a_search_never_finds_another_threads_history(tmp_path: Path) -> None:
    spec = f"sqlite:///{tmp_path / 'rounds.db'}"
    model, saver = ScriptedChatModel(), InMemorySaver()
    agent = _agent(model, CompressionMiddleware(budget=BUDGET, store=spec), saver)
    _chat(agent, model, 8, thread="t1")
    model.responses.append(AIMessage("Hello."))
    agent.invoke({"messages": [HumanMessage("Hi")]}, _config("t2"))
    answer = _ask_search(agent, model, "Ikechukwu2 courier", thread="t2")
    assert "courier" not in answer  # t2's own lines at most ("depot 2?"), none of t1's


def test_without_the_tool_the_model_gets_no_expand_schema() -> None:
    model, saver = ScriptedChatModel(), InMemorySaver()
    _chat(_agent(model, CompressionMiddleware(budget=BUDGET, expand_tool=False), saver), model, 2)
    assert all(not c.tools for c in model.calls)
    with pytest.raises(ctxfold.ConfigurationError, match="expand_tool"):
        CompressionMiddleware(budget=BUDGET, expand_tool="yes")  # type: ignore[arg-type]


def test_ctxfold_expand_reads_what_the_state_holds_given_the_store(tmp_path: Path) -> None:
    spec = f"sqlite:///{tmp_path / 'rounds.db'}"
    model, saver = ScriptedChatModel(), InMemorySaver()
    agent = _agent(model, CompressionMiddleware(budget=BUDGET, store=spec), saver)
    _chat(agent, model, 8)
    rid = _folded_round(model)
    record = agent.get_state(_config()).values["ctxfold"]
    text = ctxfold.expand(record, store=spec)  # the state's record: its round's originals
    assert text == ctxfold.expand(rid, store=spec)  # the round id the model was shown
    older = ROUND.search(text)  # the round before, whose note it folded
    assert older and FOLDED in ctxfold.expand(older.group(1), store=spec)
    back = ctxfold.expand(model.calls[-1].messages, store=spec)  # what the model was sent
    assert back.complete and back.rounds >= 1
    assert FOLDED in [m.text for m in back.messages]
    with pytest.raises(ctxfold.ExpandError):
        ctxfold.expand(rid)  # the process's store does not have it


# ---------------------------------------------------------------- budget as a fraction


def _profiled(window: int | None) -> ScriptedChatModel:
    model = ScriptedChatModel()
    if window is not None:
        model.profile = {"max_input_tokens": window}
    return model


@pytest.mark.parametrize("budget", [BUDGET, ("tokens", BUDGET), ("fraction", 0.5)])
def test_a_budget_in_tokens_or_as_a_fraction_of_the_models_window(budget: Any) -> None:
    model = _profiled(2 * BUDGET)
    _chat(_agent(model, CompressionMiddleware(budget=budget), InMemorySaver()), model, 8)
    assert [c.problems(BUDGET) for c in model.calls] == [[]] * len(model.calls)
    assert max(c.tokens() for c in model.calls) > 0.8 * BUDGET


def test_the_fraction_is_of_the_window_of_the_model_each_call_uses() -> None:
    middleware = CompressionMiddleware(budget=("fraction", 0.5))
    small, large = _profiled(1000), _profiled(8000)
    _chat(_agent(small, middleware, InMemorySaver()), small, 8, thread="a")
    _chat(_agent(large, middleware, InMemorySaver()), large, 8, thread="b")
    assert max(c.tokens() for c in small.calls) <= 500
    assert max(c.tokens() for c in large.calls) > 1000  # all 8 turns fit in 4000


def test_a_fraction_without_the_models_window_says_to_pass_tokens() -> None:
    model = _profiled(None)
    agent = _agent(model, CompressionMiddleware(budget=("fraction", 0.8)), InMemorySaver())
    with pytest.raises(ctxfold.ConfigurationError, match=r"max_input_tokens.*budget=8000"):
        agent.invoke({"messages": [HumanMessage("Hi")]}, _config())


@pytest.mark.parametrize(
    "budget", [("fraction", 0), ("fraction", 1.5), ("fraction", True), ("messages", 20), (), 0]
)
def test_a_bad_budget_fails_when_the_middleware_is_made(budget: Any) -> None:
    with pytest.raises(ctxfold.ConfigurationError):
        CompressionMiddleware(budget=budget)


def test_calls_kept_in_a_compressed_history_cost_what_langchain_sends() -> None:
    # LangChain keeps tool-call arguments as objects and writes them back with
    # json.dumps's default form: arguments compacted further were counted a token
    # short per call, and a view filled to its budget went over it.
    counter = ctxfold.TiktokenCounter()
    checked = 0
    for _, msgs in example_conversations():
        for share in (0.5, 0.25, 0.1):
            budget = counter.count_messages(msgs[:1]) + int(share * counter.count_messages(msgs))
            out = ctxfold.compress(to_langchain(msgs), budget=budget).messages
            for m in from_langchain(list(out)):
                if m.tool_calls:
                    back = from_langchain(to_langchain([m]))[0]
                    assert counter.count_message(back) == counter.count_message(m), m.tool_calls
                    checked += 1
    assert checked >= 5
