"""langchain_ctx takes every input LangChain itself takes, and gives clear errors."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.prompts import ChatPromptTemplate

import ctxfold
from langchain_ctx import as_langchain_messages, from_langchain, to_langchain

OPENAI = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Read setup.cfg"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read", "arguments": json.dumps({"path": "setup.cfg"})},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "[metadata]\nname = demo"},
    {"role": "assistant", "content": "It names the package demo."},
]


def _seen(messages: list[ctxfold.Message]) -> list[tuple[object, ...]]:
    """What a model sees of each message."""
    return [
        (m.role, m.text, m.tool_call_id, [(c.id, c.name, json.loads(c.arguments)) for c in calls])
        for m in messages
        for calls in [m.tool_calls]
    ]


@pytest.mark.parametrize(
    "given",
    [
        [("system", "You are terse."), ("human", "hi"), ("ai", "hello")],
        ["hi", ("ai", "hello")],
        OPENAI,
        [{"type": "human", "content": "hi"}, {"type": "ai", "content": "hello"}],
        [HumanMessage("hi"), AIMessageChunk(content="hel") + AIMessageChunk(content="lo")],
    ],
    ids=["tuples", "strings", "openai-dicts", "langchain-dicts", "chunks"],
)
def test_every_form_langchain_accepts_converts_as_langchain_reads_it(given: list[object]) -> None:
    ours = from_langchain(given)
    theirs = from_langchain(convert_to_messages(given))  # LangChain's own reading
    assert _seen(ours) == _seen(theirs)
    assert all(isinstance(m, ctxfold.Message) for m in ours)


def test_a_chunk_becomes_the_message_it_makes() -> None:
    chunk = AIMessageChunk(content="The answer", id="run-1") + AIMessageChunk(content=" is 42.")
    (m,) = from_langchain([chunk])
    assert (m.role, m.text, m.id) == ("assistant", "The answer is 42.", "run-1")
    (back,) = to_langchain([m])
    assert type(back) is AIMessage and back.content == "The answer is 42."


def test_a_prompt_value_is_its_messages() -> None:
    prompt = ChatPromptTemplate.from_messages([("system", "Be brief."), ("human", "{q}")])
    value = prompt.invoke({"q": "Where is setup.cfg?"})
    assert _seen(from_langchain(value)) == _seen(from_langchain(value.to_messages()))
    assert as_langchain_messages(value) == value.to_messages()


def test_openai_dicts_convert_to_langchain_as_langchain_converts_them() -> None:
    ours = to_langchain(OPENAI)
    theirs = convert_to_messages(OPENAI)
    kinds = [SystemMessage, HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert [type(m) for m in ours] == kinds
    assert [m.content for m in ours] == [m.content for m in theirs]
    assert ours[2].tool_calls == theirs[2].tool_calls  # type: ignore[attr-defined]
    assert ours[3].tool_call_id == "c1"
    assert to_langchain(ctxfold.from_openai(OPENAI)) == ours


def test_ctxfold_messages_pass_through_and_keep_their_place() -> None:
    ours = ctxfold.Message("user", "first")
    # A call without an id gets one made of its message's index: the index in the list.
    call = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": None}])
    out = from_langchain([ours, call])
    assert out[0] is ours
    assert out[1].tool_calls[0].id == "call_1_0"


@pytest.mark.parametrize(
    "given, match",
    [
        ("hi", "got str .put a single message in a list"),
        (HumanMessage("hi"), "got HumanMessage .put a single message in a list"),
        (42, "got int"),
        ([HumanMessage("hi"), object()], "message 1.*LangChain cannot read a object"),
        ([{"role": "wizard", "content": "x"}], "message 0.*LangChain cannot read a dict"),
    ],
)
def test_what_langchain_cannot_read_is_a_clear_error(given: object, match: str) -> None:
    with pytest.raises(ctxfold.InvalidMessageError, match=match):
        from_langchain(given)


def test_to_langchain_rejects_what_is_not_a_message() -> None:
    with pytest.raises(ctxfold.InvalidMessageError, match="message 0"):
        to_langchain([42])  # type: ignore[list-item]


def test_anthropic_dicts_are_read_with_their_tool_structure():
    """LangChain's own reading leaves tool_use / tool_result blocks as opaque content:
    the wrapper reads Anthropic dicts by their shape into calls and tool messages."""
    from langchain_core.messages import AIMessage, ToolMessage

    from langchain_ctx import as_langchain_messages

    turns = [
        {"role": "user", "content": "Fix src/app/views.py"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": "a"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
    ]
    read = as_langchain_messages(turns)
    assert isinstance(read[1], AIMessage) and read[1].tool_calls[0]["name"] == "Read"
    assert isinstance(read[2], ToolMessage) and read[2].tool_call_id == "t1"
