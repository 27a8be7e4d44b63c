"""CompressedChatMemory: LlamaIndex chat engines and agents get the compressed history,
the chat store keeps every message."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    MessageRole,
    ToolCallBlock,
)
from llama_index.core.chat_engine import CondensePlusContextChatEngine, SimpleChatEngine
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.schema import TextNode
from llama_index.core.storage.chat_store import SimpleChatStore
from llama_index.core.tools import FunctionTool
from pydantic import Field

import ctxfold
from conftest import example_conversations, examples_and_shared, long_chat
from ctxfold.storage import MemoryStore
from ctxfold.validity import tool_pairing_problems, turn_order_problems
from llamaindex_ctx import CompressedChatMemory, from_llamaindex, to_llamaindex

COUNTER = ctxfold.TiktokenCounter()

# LlamaIndex's agent workflows read pydantic fields the deprecated way when built.
pytestmark = [
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20"),
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211"),
]


class RecordingLLM(CustomLLM):
    """A chat model that answers from a script and records what it was sent."""

    answers: list[str] = Field(default_factory=list)
    seen: list[list[ChatMessage]] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=True, context_window=8000)

    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        self.seen.append(list(messages))
        answer = self.answers[len(self.seen) - 1] if len(self.seen) <= len(self.answers) else "Ok."
        return ChatResponse(message=ChatMessage(role="assistant", content=answer))

    async def achat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        return self.chat(messages, **kwargs)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=prompt)

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        yield CompletionResponse(text=prompt, delta=prompt)


def _turn(k: int) -> tuple[str, str]:
    question = f"Day {k}: what did we decide about release {k}.0 and ticket OPS-{100 + k}?"
    answer = (
        f"For release {k}.0 we ship on day {k + 3}; ticket OPS-{100 + k} moves to Priya, "
        f"and the config lives in deploy/release_{k}.yaml. " * 3
    )
    return question, answer


def _tokens(messages: list[ChatMessage]) -> int:
    return COUNTER.count_messages(from_llamaindex(messages))


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_simple_chat_engine_of_30_turns_sends_at_most_the_limit(run: str) -> None:
    limit = 800
    llm = RecordingLLM(answers=[_turn(k)[1] for k in range(30)])
    memory = CompressedChatMemory.from_defaults(token_limit=limit, store=MemoryStore())
    system = "You keep the release log of the team."
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt=system)
    for k in range(30):
        if run == "sync":
            engine.chat(_turn(k)[0])
        else:
            asyncio.run(engine.achat(_turn(k)[0]))
    assert len(llm.seen) == 30
    assert max(_tokens(sent) for sent in llm.seen) <= limit
    assert max(_tokens(sent) for sent in llm.seen) > 0.6 * limit
    for sent in llm.seen:
        assert sent[0].role == MessageRole.SYSTEM and sent[0].content == system
        # The question is there, last (a recall block may open its message).
        assert sent[-1].role == MessageRole.USER and "what did we decide" in sent[-1].content
        assert sent[-1].content.rsplit("\n\n", 1)[-1].startswith("Day ")
        assert turn_order_problems(from_llamaindex(sent)) == []
    assert len(memory.get_all()) == 60  # the store keeps every message
    assert len(llm.seen[-1]) < 20


def test_a_condense_plus_context_engine_reads_the_memory_with_the_question() -> None:
    nodes = [TextNode(text=f"Release {k}.0 ships on day {k + 3}.") for k in range(5)]
    index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    llm = RecordingLLM(answers=[_turn(k)[1] for k in range(12)])
    memory = CompressedChatMemory(token_limit=600, store=MemoryStore())
    engine = CondensePlusContextChatEngine.from_defaults(
        retriever=index.as_retriever(similarity_top_k=2),
        llm=llm,
        memory=memory,
        skip_condense=True,
    )
    for k in range(12):
        engine.chat(_turn(k)[0])
    assert len(memory.get_all()) == 24
    last = llm.seen[-1]
    assert "Day 11" in last[-1].content and len(last) < 24


def test_a_function_agent_keeps_its_tool_calls_whole() -> None:
    def lookup(ticket: str) -> str:
        """Look a ticket up."""
        return (
            f"Ticket {ticket}: assigned to Priya, due on day 14, config deploy/{ticket}.yaml. " * 8
        )

    def script(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        if messages[-1].role == MessageRole.TOOL:
            return ChatMessage(role="assistant", content="Done: it is assigned to Priya.")
        ticket = messages[-1].content.split()[-1].rstrip("?")
        call = ToolCallBlock(
            tool_call_id=f"c_{ticket}", tool_name="lookup", tool_kwargs={"ticket": ticket}
        )
        return ChatMessage(role="assistant", blocks=[call])

    agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(fn=lookup)],
        llm=MockFunctionCallingLLM(response_generator=script),
        system_prompt="You track tickets.",
    )
    memory = CompressedChatMemory(token_limit=700, store=MemoryStore())

    async def run() -> None:
        for k in range(8):
            out = await agent.run(user_msg=f"Who has OPS-{100 + k}?", memory=memory)
            assert "Priya" in str(out)

    asyncio.run(run())
    workflow = AgentWorkflow(agents=[agent], root_agent=agent.name)
    again = CompressedChatMemory(token_limit=700, store=MemoryStore())

    async def run_workflow() -> str:
        return str(await workflow.run(user_msg="Who has OPS-100?", memory=again))

    assert "Priya" in asyncio.run(run_workflow())
    assert len(again.get_all()) == 4
    stored = memory.get_all()
    assert [m.role.value for m in stored[:4]] == ["user", "assistant", "tool", "assistant"]
    assert len(stored) == 32
    view = from_llamaindex(memory.get())
    assert COUNTER.count_messages(view) <= 700
    assert tool_pairing_problems(view) == [] and turn_order_problems(view) == []


def test_a_message_longer_than_the_limit_is_shortened_not_dropped() -> None:
    memory = CompressedChatMemory(token_limit=300, store=MemoryStore())
    memory.put(ChatMessage(role="user", content="Please read the log."))
    log = "".join(f"12:00:{i % 60:02d} INFO step {i} ok\n" for i in range(400))
    log += "12:09:00 ERROR could not open /data/input.csv: permission denied\n"
    memory.put(ChatMessage(role="assistant", content=log))
    memory.put(ChatMessage(role="user", content="What failed?"))
    view = memory.get()
    assert view and _tokens(view) <= 300
    assert "/data/input.csv" in "\n".join(m.content or "" for m in view)


@pytest.mark.parametrize("name,msgs", examples_and_shared(4), ids=lambda x: str(x)[:40])
def test_it_renders_what_a_session_renders(name: str, msgs: list[ctxfold.Message]) -> None:
    system = [m for m in msgs if m.role == "system"]
    limit = COUNTER.count_messages(system) + COUNTER.count_messages(msgs) // 4
    memory = CompressedChatMemory(token_limit=limit, store=MemoryStore())
    session = ctxfold.Session(budget=limit, store=MemoryStore())
    for m in to_llamaindex(msgs):
        memory.put(m)
        session.add(from_llamaindex([m]))  # the core on the same messages
        if m.role == MessageRole.USER:
            view = from_llamaindex(memory.get())
            assert [x.text for x in view] == [x.text for x in session.render().messages]
    assert len(memory.get_all()) == len(msgs)


def test_async_twins_agree_with_sync() -> None:
    _, msgs = next((n, m) for n, m in example_conversations() if "sqlfluff" in n)
    limit = COUNTER.count_messages(msgs) // 3
    sync = CompressedChatMemory(token_limit=limit, store=MemoryStore())
    sync.put_messages(to_llamaindex(msgs))

    async def run() -> tuple[list[ChatMessage], list[ChatMessage]]:
        other = CompressedChatMemory(token_limit=limit, store=MemoryStore())
        await other.aput_messages(to_llamaindex(msgs))
        got = await other.aget()
        await other.areset()
        return got, await other.aget_all()

    got, after_reset = asyncio.run(run())
    assert [m.content for m in got] == [m.content for m in sync.get()]
    assert after_reset == []


def test_from_defaults_and_bad_settings() -> None:
    llm = RecordingLLM()
    memory = CompressedChatMemory.from_defaults(
        chat_history=[ChatMessage(role="user", content="hi")], llm=llm, chat_store=SimpleChatStore()
    )
    assert memory.token_limit == 6000 and len(memory.get_all()) == 1
    for bad in ({"token_limit": -5}, {"strategy": "nope"}, {"low_water": 2.0}):
        with pytest.raises(ctxfold.ConfigurationError):
            CompressedChatMemory(**bad)
    with pytest.raises(ValueError, match="stratgy"):
        CompressedChatMemory(stratgy="auto")  # misspelt: refused, not ignored
    with pytest.raises(ctxfold.BudgetError, match="token_limit"):
        memory.get(initial_token_count=6000)


def test_the_memorys_expand_tool_reads_back_what_a_note_folded() -> None:
    _, msgs = next((n, m) for n, m in example_conversations() if "sqlfluff" in n)
    memory = CompressedChatMemory(token_limit=3000, store=MemoryStore())
    memory.put_messages(to_llamaindex(msgs))
    note = from_llamaindex(memory.get())[1].text
    round_id = note.split()[2].rstrip(":]")
    tool = memory.expand_tool()
    text = tool.call(id=round_id).content
    assert "Rule L060" in text and "[ctxfold round" not in text.splitlines()[0]
    assert asyncio.run(tool.acall(id=round_id)).content == text


def test_to_llamaindex_takes_openai_dicts() -> None:
    out = to_llamaindex([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    assert [(m.role.value, m.content) for m in out] == [("user", "hi"), ("assistant", "yo")]


def test_the_question_given_to_get_recalls_what_it_needs_from_long_ago() -> None:
    limit = 500
    memory = CompressedChatMemory(token_limit=limit, strategy="sliding_window", store=MemoryStore())
    memory.set(to_llamaindex(long_chat()))
    question = "Which gym locker is mine?"
    plain = memory.get()
    asked = memory.get(input=question)  # as CondensePlusContextChatEngine asks
    assert "sauna" not in " ".join(m.content or "" for m in plain)
    assert "sauna" in " ".join(m.content or "" for m in asked)
    assert _tokens(asked) <= limit
    sent = from_llamaindex([*asked, ChatMessage(role=MessageRole.USER, content=question)])
    assert turn_order_problems(sent) == []  # the engine adds the question after it
    assert len(memory.get_all()) == 120  # the store keeps every message as it was


def test_it_is_a_chat_store_memory_whose_store_holds_every_message_as_given() -> None:
    from llama_index.core.memory.types import BaseChatStoreMemory

    store = SimpleChatStore()
    memory = CompressedChatMemory.from_defaults(
        chat_store=store, chat_store_key="ana", token_limit=120, store=MemoryStore()
    )
    assert isinstance(memory, BaseChatStoreMemory)  # LlamaIndex's own contract
    said = [
        ChatMessage(role="user", content=f"Note {k}: the code is {1000 + k}.") for k in range(30)
    ]
    memory.put_messages(said)
    assert store.get_messages("ana") == said == memory.get_all()  # the record, whole
    assert _tokens(memory.get()) <= 120 < _tokens(said)  # the view, compressed
    asyncio.run(memory.aset(said[:3]))
    assert memory.get() == said[:3]  # replaced: the session follows


def test_a_memory_reads_set_and_in_place_edits_of_its_store() -> None:
    """``set`` and edits of the chat store's messages in place (the length and the
    last message the same) are read again: the old text never stays in view."""
    memory = CompressedChatMemory.from_defaults(token_limit=3000, store=MemoryStore())
    chat = [
        ChatMessage(role=MessageRole.USER, content="card 4111 1111 1111 1111"),
        ChatMessage(role=MessageRole.ASSISTANT, content="Noted."),
        ChatMessage(role=MessageRole.USER, content="Thanks."),
    ]
    memory.set(chat)
    assert "4111" in memory.get()[0].content
    memory.set([ChatMessage(role=MessageRole.USER, content="[removed]"), *chat[1:]])
    assert memory.get()[0].content == "[removed]"
    stored = memory.chat_store.get_messages(memory.chat_store_key)
    stored[1].blocks[0].text = "Noted, card on file."  # in place, in the store
    assert memory.get()[1].content == "Noted, card on file."


# ------------------------------------------------- two writers; a memory per request


def _said(k: int) -> ChatMessage:
    role = MessageRole.USER if k % 2 == 0 else MessageRole.ASSISTANT
    return ChatMessage(
        role=role, content=f"Message {k}: release {k}.0 ships on day {k + 3}; OPS-{100 + k}."
    )


def test_two_memories_on_one_session_take_up_each_others_writes(tmp_path: Path) -> None:
    """Two memories over one chat store and key, one session id and SQLite file: the
    one that writes second reads the session again and writes what is new, never
    stuck on ConcurrentWriteError; both views hold every message (issue 47, item 12)."""
    chats, store = SimpleChatStore(), f"sqlite:///{tmp_path}/sessions.db"
    a, b = (
        CompressedChatMemory.from_defaults(
            chat_store=chats, chat_store_key="ana", session_id="ana", store=store
        )
        for _ in range(2)
    )
    for k in range(8):
        writer, reader = (a, b) if k % 2 == 0 else (b, a)
        writer.put(_said(k))
        seen = writer.get()
        assert reader.get() == seen and len(seen) == k + 1
    stored = ctxfold.Session.load("ana", store=store).history
    assert [m.text for m in stored] == [m.content for m in chats.get_messages("ana")]


def test_a_memory_made_per_request_stays_bounded() -> None:
    """A ``from_defaults(chat_store=...)`` per request (a 12-message chat read from
    its own store) leaves nothing behind: 500 more requests after 500 add under
    1 MB (each kept its session in a process-wide store before: 3 MB per 500)."""

    def request(i: int) -> None:
        chats = SimpleChatStore()
        chats.set_messages(f"user-{i}", [_said(k) for k in range(11)])
        memory = CompressedChatMemory.from_defaults(
            chat_store=chats, chat_store_key=f"user-{i}", recall_share=0
        )
        memory.put(ChatMessage(role=MessageRole.USER, content="And the next release?"))
        assert len(memory.get()) == 12

    for i in range(500):
        request(i)
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(500, 1000):
            request(i)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert grown < 1_000_000


def test_a_memory_made_again_over_a_kept_chat_store_keeps_its_history(tmp_path: Path) -> None:
    """A memory that should persist does: a new memory on the same chat store and key
    reads the whole history from it, and one with the same session id on a
    persistent store takes up the compactions too (nothing made again)."""
    chats, store = SimpleChatStore(), f"sqlite:///{tmp_path}/sessions.db"
    said = [_said(k) for k in range(40)]
    first = CompressedChatMemory.from_defaults(chat_store=chats, chat_store_key="ana")
    first.put_messages(said)
    again = CompressedChatMemory.from_defaults(chat_store=chats, chat_store_key="ana")
    assert again.get_all() == said and again.get() == first.get()
    kept = CompressedChatMemory.from_defaults(
        chat_store=chats, chat_store_key="ana", token_limit=150, session_id="ana", store=store
    )
    view = kept.get()
    assert _tokens(view) <= 150 and kept.session.compaction is not None
    taken = CompressedChatMemory.from_defaults(
        chat_store=chats, chat_store_key="ana", token_limit=150, session_id="ana", store=store
    )
    assert len(taken.session.history) == 40  # taken up from the store, not added again
    assert taken.get() == view


def test_the_memorys_expand_tool_searches_its_history() -> None:
    _, msgs = next((n, m) for n, m in example_conversations() if "sqlfluff" in n)
    memory = CompressedChatMemory(token_limit=3000, store=MemoryStore())
    memory.put_messages(to_llamaindex(msgs))
    tool = memory.expand_tool(max_tokens=400)
    text = tool.call(query="ModuleNotFoundError sqlfluff").content
    assert "No module named 'sqlfluff'" in text
    assert asyncio.run(tool.acall(query="ModuleNotFoundError sqlfluff")).content == text
