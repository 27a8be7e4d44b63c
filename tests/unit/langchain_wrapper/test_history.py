"""CompressedChatMessageHistory: any chat history, read compressed, written whole."""

from __future__ import annotations

import asyncio
import gc
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core._api import LangChainDeprecationWarning
from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

import ctxfold
from ctxfold.exceptions import ConcurrentWriteError
from ctxfold.storage import MemoryStore, RedisStore, SQLiteStore, VerbatimStore
from ctxfold.validity import turn_order_problems
from langchain_ctx import CompressedChatMessageHistory, from_langchain

# Our own code raises no deprecation warning; the tests allow one only around a call
# a user would make themselves (RunnableWithMessageHistory is deprecated upstream).
pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")

COUNTER = ctxfold.TiktokenCounter()


def _tokens(messages: list[BaseMessage]) -> int:
    return COUNTER.count_messages(from_langchain(messages))


def _turn(k: int) -> list[BaseMessage]:
    question = f"Day {k}: what did we decide about release {k}.0 and ticket OPS-{100 + k}?"
    answer = (
        f"For release {k}.0 we ship on day {k + 3}; ticket OPS-{100 + k} moves to Priya, "
        f"and the config lives in deploy/release_{k}.yaml. " * 3
    )
    return [HumanMessage(question), AIMessage(answer)]


def _history(turns: int) -> CompressedChatMessageHistory:
    h = CompressedChatMessageHistory(budget=600, store=MemoryStore())
    for k in range(turns):
        h.add_messages(_turn(k))
    return h


def test_a_runnable_with_message_history_chat_of_20_turns_stays_in_budget() -> None:
    budget = 700
    compressed = CompressedChatMessageHistory(budget=budget, store=MemoryStore())
    replies = iter([AIMessage(_turn(k)[1].content) for k in range(20)])
    seen: list[list[BaseMessage]] = []

    def record(value: Any) -> Any:
        seen.append(value.to_messages())
        return value

    prompt = ChatPromptTemplate.from_messages(
        [("system", "You keep release notes."), MessagesPlaceholder("history"), ("human", "{q}")]
    )
    chain = prompt | RunnableLambda(record) | GenericFakeChatModel(messages=replies)
    with warnings.catch_warnings():  # the user's own call: deprecated upstream
        warnings.simplefilter("ignore", LangChainDeprecationWarning)
        chat = RunnableWithMessageHistory(
            chain,
            lambda session_id: compressed,
            input_messages_key="q",
            history_messages_key="history",
        )
    questions = [_turn(k)[0].content for k in range(20)]
    for q in questions:
        chat.invoke({"q": q}, config={"configurable": {"session_id": "s1"}})
    whole = compressed.history.messages
    assert len(whole) == 40  # the wrapped history keeps everything, as written
    assert [m.content for m in whole[::2]] == questions
    for sent in seen:
        view = sent[1:-1]  # between the prompt's system message and the new question
        assert _tokens(view) <= budget
        assert not turn_order_problems(from_langchain(sent))
    assert _tokens(seen[-1][1:-1]) > budget // 2  # compressed, not emptied
    assert _tokens(whole) > 3 * budget


def test_the_view_is_computed_once_per_change() -> None:
    h = _history(12)
    renders = 0
    render = h.session.render

    def counting(*args: Any, **kwargs: Any) -> ctxfold.CompressionResult:
        nonlocal renders
        renders += 1
        return render(*args, **kwargs)

    h.session.render = counting  # type: ignore[method-assign]
    first = h.messages
    assert h.messages == first and h.messages == first
    assert renders == 1
    h.add_messages(_turn(12))
    assert h.messages != first and renders == 2
    assert len(h.session.history) == 26  # only the new messages were added


def test_a_history_changed_behind_its_back_is_read_again() -> None:
    h = _history(12)
    h.messages  # noqa: B018 - read once
    h.history.clear()
    h.history.add_messages(_turn(50) + _turn(51))
    fresh = _history(0)
    fresh.add_messages(_turn(50) + _turn(51))
    assert h.messages == fresh.messages
    assert [m.text for m in h.session.history] == [m.text for m in fresh.session.history]
    h.history.clear()  # emptied behind its back: an empty view, the session started over
    assert h.messages == [] and h.session.history == ()


def test_writes_reach_the_wrapped_history_unchanged() -> None:
    inner = CompressedChatMessageHistory(budget=10_000, store=MemoryStore()).history
    h = CompressedChatMessageHistory(inner, budget=300, store=MemoryStore())
    turn = _turn(1)
    h.add_messages(turn)
    assert inner.messages == turn
    h.clear()
    assert inner.messages == [] and h.messages == []


def test_async_twins_agree_with_sync() -> None:
    async def run() -> tuple[list[BaseMessage], list[BaseMessage], list[BaseMessage]]:
        h = CompressedChatMessageHistory(budget=600, store=MemoryStore())
        for k in range(12):
            await h.aadd_messages(_turn(k))
        got = await h.aget_messages()
        sync = h.messages
        await h.aclear()
        return got, sync, await h.aget_messages()

    got, sync, cleared = asyncio.run(run())
    assert got == sync == _history(12).messages
    assert cleared == []


def test_a_new_process_takes_up_the_stored_session(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/sessions.db"
    first = CompressedChatMessageHistory(budget=600, session_id="u1", store=store)
    for k in range(12):
        first.add_messages(_turn(k))
    view = first.messages
    # The same wrapped history (say a database) and store, a new object.
    again = CompressedChatMessageHistory(first.history, budget=600, session_id="u1", store=store)
    assert again.messages == view
    assert len(again.session.history) == 24  # taken up, not added again
    again.add_messages(_turn(12))
    assert _tokens(again.messages) <= 600 and len(again.session.history) == 26


def test_bad_settings_are_configuration_errors() -> None:
    with pytest.raises(ctxfold.ConfigurationError):
        CompressedChatMessageHistory(budget=-1)
    with pytest.raises(ctxfold.ConfigurationError):
        CompressedChatMessageHistory(budget=100, strategy="no_such_strategy")


def test_an_earlier_message_edited_or_replaced_is_read_again() -> None:
    """The wrapped history is compared message by message on every read: a message
    replaced (the same length, the same last message) or edited in place never
    leaves its old text in the model's view."""
    from langchain_core.chat_history import InMemoryChatMessageHistory

    inner = InMemoryChatMessageHistory()
    inner.add_messages([HumanMessage("card 4111 1111 1111 1111"), AIMessage("Noted.")])
    inner.add_messages([m for k in range(3) for m in _turn(k)])
    history = CompressedChatMessageHistory(inner, budget=4000, store=MemoryStore())
    assert "4111" in history.messages[0].content
    inner.messages[0] = HumanMessage("[removed]")
    assert history.messages[0].content == "[removed]"
    inner.messages[1].content = "Noted, card on file."  # in place
    assert history.messages[1].content == "Noted, card on file."
    inner.messages[-1].content = "Edited last."  # the last message object, in place
    assert history.messages[-1].content == "Edited last."


def test_an_edit_of_a_long_history_stores_only_what_it_changed(tmp_path: Path) -> None:
    """An edit near the end of a 200-message history on a SQLite store: the store
    keeps the edited history (read back by a new object, as another process would)
    and grows by the messages from the edit on, not by the whole history again."""
    from langchain_core.chat_history import InMemoryChatMessageHistory

    inner = InMemoryChatMessageHistory()
    inner.add_messages([m for k in range(100) for m in _turn(k)])
    store = SQLiteStore(tmp_path / "h.db")
    history = CompressedChatMessageHistory(inner, budget=4000, session_id="e", store=store)
    assert len(history.messages) > 0  # read: the session now holds the history
    before = len(store.ids_with_prefix(""))
    inner.messages[196] = HumanMessage("Actually, make it Friday.")
    assert any(m.content == "Actually, make it Friday." for m in history.messages)
    assert len(store.ids_with_prefix("")) - before < 20  # 4 messages, 2 records, a compaction's few
    again = ctxfold.Session.load("e", store=SQLiteStore(tmp_path / "h.db"))
    assert [m.text for m in again.history] == [m.content for m in inner.messages]


# ---------------------------------------------------------------- two writers, one session


def _shared_inner() -> BaseChatMessageHistory:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LangChainDeprecationWarning)
        return InMemoryChatMessageHistory()


def _stored(session_id: str, store: VerbatimStore | str) -> list[str]:
    """The texts of the history stored under ``session_id``: what the store holds."""
    return [m.text for m in ctxfold.Session.load(session_id, store=store).history]


def _take_turns(stores: tuple[VerbatimStore | str, VerbatimStore | str]) -> None:
    """Two histories over one wrapped history and one session id, each with its own
    handle on the store, writing and reading in turn."""
    inner = _shared_inner()
    a, b = (
        CompressedChatMessageHistory(inner, budget=600, session_id="u1", store=store)
        for store in stores
    )
    for k in range(6):
        writer, reader = (a, b) if k % 2 == 0 else (b, a)
        writer.add_messages(_turn(k))
        seen = writer.messages
        assert reader.messages == seen  # the other's writes included, every time
    assert [m.content for m in a.messages] == [m.content for m in b.messages]
    assert _stored("u1", stores[0]) == [m.text for m in from_langchain(inner.messages)]
    assert len(a.session.history) == len(b.session.history) == 12


def test_two_histories_on_one_session_take_up_each_others_writes(tmp_path: Path) -> None:
    """Two workers, one conversation: the same wrapped history, session id and SQLite
    file. Whoever writes second reads the session again from the store and writes
    what is new; it never stays stuck on ConcurrentWriteError (issue 47, item 12)."""
    store = f"sqlite:///{tmp_path}/sessions.db"
    _take_turns((store, store))


def test_two_histories_on_one_redis_session_take_up_each_others_writes(
    redis_url: str, redis_prefix: str
) -> None:
    _take_turns(
        (RedisStore(redis_url, prefix=redis_prefix), RedisStore(redis_url, prefix=redis_prefix))
    )


def test_a_second_conflict_in_a_row_says_what_to_do(tmp_path: Path) -> None:
    """A writer that meets another's write retries once; another write in between
    (here: made while it reads the session again) reaches the caller as a
    ConcurrentWriteError saying what to do, nothing lost, and the next read works."""
    store, inner = f"sqlite:///{tmp_path}/sessions.db", _shared_inner()
    a = CompressedChatMessageHistory(inner, budget=600, session_id="u1", store=store)
    b = CompressedChatMessageHistory(inner, budget=600, session_id="u1", store=store)
    inner.add_messages(_turn(0))
    a.messages  # noqa: B018 - a writes the first turn
    reload = b.session.reload

    def other_writer_meanwhile() -> None:
        reload()
        inner.add_messages(_turn(1))
        a.messages  # noqa: B018 - a writes again before b's retry

    b.session.reload = other_writer_meanwhile  # type: ignore[method-assign]
    inner.add_messages([HumanMessage("and b's own question?")])
    with pytest.raises(ConcurrentWriteError, match="take turns") as raised:
        b.messages  # noqa: B018
    assert "session_id" in str(raised.value)
    b.session.reload = reload  # type: ignore[method-assign]
    assert [m.content for m in b.messages] == [m.content for m in inner.messages]
    assert _stored("u1", store) == [m.text for m in from_langchain(inner.messages)]


def test_two_threads_racing_on_one_session_lose_nothing(tmp_path: Path) -> None:
    """Two threads, each its own history object over one wrapped history and one
    SQLite session, adding and reading 15 turns each: every read either succeeds or
    says what to do, and at the end both views and the store hold every message."""
    store, inner = f"sqlite:///{tmp_path}/sessions.db", _shared_inner()
    histories = [
        CompressedChatMessageHistory(inner, budget=600, session_id="u1", store=store)
        for _ in range(2)
    ]
    conflicts: list[str] = []

    def work(mine: CompressedChatMessageHistory, offset: int) -> None:
        for k in range(15):
            mine.add_messages(_turn(offset + k))
            try:
                mine.messages  # noqa: B018
            except ConcurrentWriteError as exc:
                conflicts.append(str(exc))

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(work, histories, (0, 100)))
    assert all("take turns" in c for c in conflicts)
    views = [[m.content for m in h.messages] for h in histories]
    assert views[0] == views[1] and views[0][-1] == inner.messages[-1].content
    assert len(inner.messages) == 60
    assert _stored("u1", store) == [m.text for m in from_langchain(inner.messages)]


def test_a_history_made_per_request_leaves_no_session_behind() -> None:
    """Without a session id or a store, the session is the history object's own: a
    history made per request (as RunnableWithMessageHistory's factory does) is freed
    whole with it, nothing kept in a process-wide store (issue 47, item 15)."""
    inner = _shared_inner()
    inner.add_messages([m for k in range(6) for m in _turn(k)])
    h = CompressedChatMessageHistory(inner, budget=600)
    h.messages  # noqa: B018 - the session writes what it read
    kept = weakref.ref(h.session.store)
    del h
    gc.collect()
    assert kept() is None
