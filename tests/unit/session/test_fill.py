"""How far a session's compaction fills: a history that arrived at once is fitted as
``compress`` fits it, then the renders one exchange at a time settle a prefix that
later renders extend."""

from __future__ import annotations

import json

import pytest

import ctxfold
from ctxfold import Message, to_openai
from ctxfold.result import RECALL_KEY, without_recall
from ctxfold.session import Session
from ctxfold.session.settings import Fill, exchange_start, fill_for
from ctxfold.storage import MemoryStore
from tests.conftest import example_conversations
from tests.unit.session.test_session import _asking_chat

COUNTER = ctxfold.TiktokenCounter()


def _wire(result: ctxfold.CompressionResult) -> str:
    return json.dumps(result.to_openai(), sort_keys=True)


def _cases() -> list[tuple[str, list[Message]]]:
    """A chat and an agent's run, each long enough to pass 1,500 tokens at its middle."""
    agent = next(msgs for name, msgs in example_conversations() if "deepseek" in name)
    return [("chat", _asking_chat()), ("agent", agent)]


@pytest.mark.parametrize("name,msgs", _cases(), ids=lambda x: x if isinstance(x, str) else "")
def test_a_render_after_a_bulk_arrival_fills_like_compress_then_settles(
    name: str, msgs: list[Message]
) -> None:
    """A cache-stable session given half a long history at once has no rendered prefix
    to keep: its render is what ``compress`` returns (the whole budget, not the
    low-water mark). Fed one exchange at a time after it, it compacts once more, to the
    low-water mark, and the renders that follow extend that prefix byte for byte."""
    budget = 1500
    end = next(k for k in range(len(msgs) // 2, len(msgs)) if not msgs[k - 1].tool_calls)
    session = Session(budget=budget, store=MemoryStore())
    session.add(msgs[:end])
    first = session.render()
    assert COUNTER.count_messages(msgs[:end]) > 1.5 * budget
    assert first.stats.tokens_after >= 0.85 * budget
    assert _wire(first) == _wire(ctxfold.compress(msgs[:end], budget=budget))
    renders = [first]
    for m in msgs[end:]:
        if m.role == "assistant":
            renders.append(session.render())
        session.add(m)
    rounds = [k for k in range(1, len(renders)) if renders[k].round_id != renders[k - 1].round_id]
    settled = renders[rounds[0]]
    assert settled.stats.tokens_after <= session._low_share(budget) * budget  # the gap
    # The renders until the next compaction extend the settled one.
    stop = rounds[1] if len(rounds) > 1 else len(renders)
    assert stop - rounds[0] >= 3
    for prev, cur in zip(renders[rounds[0] : stop], renders[rounds[0] + 1 : stop], strict=False):
        view = to_openai(without_recall(prev.messages))
        assert to_openai(without_recall(cur.messages))[: len(view)] == view
        assert not any(RECALL_KEY in m.metadata for m in prev.messages[: len(view) - 1])


def test_a_session_reopened_before_its_first_render_fills_as_the_live_one() -> None:
    """The fill is a function of the stored history: a session loaded from the store
    renders, after a bulk arrival, exactly what the live session renders."""
    msgs = _asking_chat()
    live = Session("bulk", budget=1500, store=MemoryStore())
    live.add(msgs)
    store = MemoryStore()
    Session("bulk", store=store).add(msgs)  # stored, never rendered
    reopened = Session.load("bulk", store=store, budget=1500)
    assert _wire(reopened.render()) == _wire(live.render())


def test_the_newest_exchange_is_a_reply_with_what_brought_it_and_what_followed() -> None:
    u, a = Message("user", "q"), Message("assistant", "r")
    call = Message(
        "assistant", "", tool_calls=(ctxfold.ToolCall("c1", "look", "{}"),)
    )  # an agent's step: the call and its result
    result = Message("tool", "found", tool_call_id="c1")
    assert exchange_start([u, a, u, a, u], 0) == 2  # a chat engine: put the question, get
    assert exchange_start([u, a, u, a], 0) == 2  # LangChain: read before the question
    assert exchange_start([u, a, call, result], 0) == 2  # an agent's step
    assert exchange_start([u, a, u, a], 3) == 3  # only what the compaction did not take in
    assert exchange_start([u, u], 0) == 0  # no reply yet


def test_only_a_view_over_the_budget_before_its_newest_exchange_fills_the_room() -> None:
    assert fill_for(True, 1501, 1500, unsettled=False) is Fill.ROOM
    assert fill_for(True, 1500, 1500, unsettled=False) is Fill.LOW_WATER
    assert fill_for(True, 0, 1500, unsettled=True) is Fill.ROOM
    assert fill_for(False, 0, 1500, unsettled=False) is Fill.ROOM


def test_a_question_asked_right_after_a_bulk_render_gets_its_room() -> None:
    """The bulk render fills the budget; a question asked before anything new arrives
    is fitted as ``compress`` fits it (room for what it recalls), not left the little
    the full view leaves free."""
    msgs = _asking_chat()[:-1]
    session = Session(budget=1500, store=MemoryStore())
    session.add(msgs)
    assert session.render().stats.tokens_after >= 0.85 * 1500
    asked = session.render(query="What is my gym locker code?")
    assert any(RECALL_KEY in m.metadata for m in asked.messages)  # passages recalled
    assert "4471" in "\n".join(m.text for m in asked.messages)
    assert asked.stats.tokens_after <= 1500
