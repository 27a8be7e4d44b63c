"""The LangChain and LlamaIndex converters: lossless both ways, and usable with compress."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys

import pytest
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from llama_index.core.base.llms.types import ChatMessage as LIChatMessage
from llama_index.core.base.llms.types import ImageBlock, TextBlock, ToolCallBlock

import ctxfold
from conftest import example_conversations, example_records, shared_records
from langchain_ctx import from_langchain, to_langchain
from llamaindex_ctx import from_llamaindex, to_llamaindex


def _parsed(m: ctxfold.Message):
    return (
        m.role,
        m.content,
        m.name,
        m.tool_call_id,
        [(c.id, c.name, json.loads(c.arguments)) for c in m.tool_calls],
    )


def test_langchain_round_trip_on_examples():
    for record in example_records():
        lc = convert_to_messages(record["messages"])
        assert to_langchain(from_langchain(lc)) == lc


@pytest.mark.full_sweep
def test_langchain_and_llamaindex_round_trips_on_the_shared_data():
    for record in shared_records():
        msgs = ctxfold.from_openai(record["messages"])
        li = to_llamaindex(msgs)
        again = from_llamaindex(li)
        # LlamaIndex keeps tool arguments parsed, so their JSON spacing may change
        assert [_parsed(m) for m in again] == [_parsed(m) for m in msgs]
        assert [m.model_dump() for m in to_llamaindex(again)] == [m.model_dump() for m in li]
        lc = convert_to_messages(record["messages"])
        assert to_langchain(from_langchain(lc)) == lc


def test_langchain_fields_the_model_does_not_see_survive():
    lc = [
        SystemMessage("be brief", id="s1"),
        HumanMessage([{"type": "text", "text": "hi"}, "plain"], name="ann"),
        AIMessage(
            "",
            tool_calls=[{"name": "ls", "args": {"path": "/tmp"}, "id": "c1"}],
            invalid_tool_calls=[
                {
                    "type": "invalid_tool_call",
                    "name": "rm",
                    "args": "{bad",
                    "id": "c2",
                    "error": "bad json",
                }
            ],
            usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
            response_metadata={"model_name": "fake"},
            additional_kwargs={"reasoning_content": "think"},
        ),
        ToolMessage("a b c", tool_call_id="c1", status="error", artifact={"raw": [1, 2]}),
        ChatMessage(role="developer", content="dev note"),
    ]
    msgs = from_langchain(lc)
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "developer"]
    assert [c.id for c in msgs[2].tool_calls] == ["c1", "c2"]
    assert json.loads(msgs[2].tool_calls[0].arguments) == {"path": "/tmp"}
    back = to_langchain(msgs)
    assert back[:2] == [
        lc[0],
        HumanMessage(
            [{"type": "text", "text": "hi"}, {"type": "text", "text": "plain"}], name="ann"
        ),
    ]
    assert back[2:] == lc[2:]


def test_llamaindex_blocks_kwargs_and_tool_calls_survive():
    li = [
        LIChatMessage(role="system", content="be brief"),
        LIChatMessage(
            role="user",
            blocks=[TextBlock(text="what is this?"), ImageBlock(url="https://x.test/a.png")],
        ),
        LIChatMessage(
            role="assistant",
            blocks=[
                TextBlock(text="let me look"),
                ToolCallBlock(tool_call_id="t1", tool_name="zoom", tool_kwargs={"x": 2}),
            ],
        ),
        LIChatMessage(role="tool", content="a cat", additional_kwargs={"tool_call_id": "t1"}),
        LIChatMessage(
            role="assistant",
            content="",
            additional_kwargs={
                "tool_calls": [
                    {
                        "id": "t2",
                        "type": "function",
                        "function": {"name": "save", "arguments": "{}"},
                    }
                ],
                "custom": 1,
            },
        ),
        LIChatMessage(role="tool", content="saved", additional_kwargs={"tool_call_id": "t2"}),
    ]
    msgs = from_llamaindex(li)
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert msgs[1].content[1].type == "image"
    assert msgs[2].tool_calls == (ctxfold.ToolCall("t1", "zoom", '{"x": 2}'),)
    assert msgs[3].tool_call_id == "t1" and msgs[4].tool_calls[0].id == "t2"
    assert [m.model_dump() for m in to_llamaindex(msgs)] == [m.model_dump() for m in li]
    assert ctxfold.group_units(msgs).dangling_calls == ()


def test_compress_between_conversions_keeps_framework_messages_valid():
    record = example_records()[0]
    lc = convert_to_messages(record["messages"])
    result = ctxfold.compress(from_langchain(lc), budget=1500)
    out = to_langchain(result.messages)
    assert out[0] == lc[0] and out[-1] == lc[-1]
    called = {c["id"] for m in out if isinstance(m, AIMessage) for c in m.tool_calls}
    assert all(m.tool_call_id in called for m in out if isinstance(m, ToolMessage))
    li = to_llamaindex(result.messages)
    assert li[0].role.value == "system"


@pytest.mark.parametrize(
    ("package", "blocked", "extra"),
    [
        ("langchain_ctx", "langchain_core", "langchain"),
        ("llamaindex_ctx", "llama_index", "llamaindex"),
    ],
)
def test_missing_extra_names_the_install_command(package, blocked, extra):
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "try:\n"
        f"    import {package}\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.startswith("MissingDependencyError")
    assert f"pip install 'ctxfold[{extra}]'" in done.stdout


@pytest.mark.parametrize(
    ("name", "blocked"),
    [
        ("CompressionMiddleware", "langchain"),
        ("CompressionMiddleware", "langgraph"),
        ("pre_model_hook", "langgraph"),  # needs no more than langgraph
    ],
)
def test_the_agent_parts_name_their_extra_and_the_rest_still_imports(name, blocked):
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "import langchain_ctx\n"
        "assert langchain_ctx.compress_messages\n"
        "try:\n"
        f"    langchain_ctx.{name}\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.startswith("MissingDependencyError"), done.stderr
    assert "pip install 'ctxfold[agents]'" in done.stdout


def test_wrong_object_types_are_rejected_clearly():
    with pytest.raises(ctxfold.InvalidMessageError, match="LangChain cannot read a object"):
        from_langchain([object()])
    with pytest.raises(ctxfold.InvalidMessageError, match="LlamaIndex ChatMessage"):
        from_llamaindex(["x"])  # type: ignore[list-item]


def test_framework_tools_are_described_for_the_coalesced_rendering():
    from langchain_core.tools import tool
    from llama_index.core.tools import FunctionTool

    @tool
    def grep(pattern: str, path: str = ".") -> str:
        """Grep the repository.

        Details."""
        return pattern

    def search(query: str, limit: int = 5) -> list:
        """Search the code base.

        Details."""
        return []

    out, _ = ctxfold.render([], tools=[grep, FunctionTool.from_defaults(fn=search)])
    tools = out[1].text.split("## Tools\n", 1)[1].splitlines()
    assert tools[0] == "- grep(pattern, path): Grep the repository."
    # LlamaIndex's description opens with the signature (as it writes it): used as the head
    assert tools[1].startswith("- search(query: ") and "limit: " in tools[1]
    assert tools[1].endswith(": Search the code base.") and len(tools) == 2


def test_compress_takes_framework_messages_and_gives_back_their_kind():
    from langchain_core.messages import BaseMessage
    from langchain_core.prompts import ChatPromptTemplate
    from llama_index.core.llms import ChatMessage

    from langchain_ctx import compress_messages

    _, msgs = next((n, m) for n, m in example_conversations() if "sqlfluff" in n)
    budget = ctxfold.TiktokenCounter().count_messages(msgs) // 4
    core = ctxfold.compress(msgs, budget=budget)
    assert core.as_given() == list(core.messages)
    assert ctxfold.compress(ctxfold.to_openai(msgs), budget=budget).as_given() == core.to_openai()

    def shown(result):  # round names hash the metadata, which LangChain's adds to
        return [(m.role, re.sub(r"round \w+", "", m.text)) for m in result.messages]

    lc = ctxfold.compress(to_langchain(msgs), budget=budget)
    assert shown(lc) == shown(core)
    given = lc.as_given()
    assert all(isinstance(m, BaseMessage) for m in given)
    assert given == compress_messages(to_langchain(msgs), budget=budget)

    li = ctxfold.compress(to_llamaindex(msgs), budget=budget)
    assert shown(li) == shown(core)
    assert all(isinstance(m, ChatMessage) for m in li.as_given())

    prompt = ChatPromptTemplate.from_messages([("system", "Be brief."), ("human", "{q}")])
    value = prompt.invoke({"q": "Hello?"})
    assert [m.content for m in ctxfold.compress(value, budget=1000).as_given()] == [
        "Be brief.",
        "Hello?",
    ]


def test_async_compress_and_a_session_give_back_the_kind_given():
    from langchain_core.messages import BaseMessage

    _, msgs = next((n, m) for n, m in example_conversations() if "sqlfluff" in n)
    lc = to_langchain(msgs)
    budget = ctxfold.TiktokenCounter().count_messages(msgs) // 4
    compressor = ctxfold.AutoCompressor()
    done = asyncio.run(compressor.acompress(iter(lc), budget=budget))
    assert done.as_given() == compressor.compress(lc, budget=budget).as_given()
    session = ctxfold.Session(budget=budget, store=ctxfold.MemoryStore())
    session.add(lc)
    assert all(isinstance(m, BaseMessage) for m in session.render().as_given())


def test_plain_messages_import_no_framework_and_langchain_needs_no_wrapper_import():
    code = (
        "import sys, ctxfold\n"
        "r = ctxfold.compress([{'role': 'user', 'content': 'hi'}], budget=100)\n"
        "assert not {'langchain_core', 'llama_index'} & set(sys.modules), 'imported'\n"
        "from langchain_core.messages import HumanMessage\n"
        "r = ctxfold.compress([HumanMessage('hi')], budget=100)\n"
        "print(type(r.as_given()[0]).__name__, 'llama_index' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["HumanMessage", "False"], done.stderr
