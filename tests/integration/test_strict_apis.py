"""Compressed histories are valid requests for strict chat APIs, not only OpenAI's:
LangChain's ChatAnthropic builds its request payload from every output (offline: the
payload is built, nothing is sent), a note never splits the system block, and user and
assistant turns alternate (Gemini and most open-model chat templates require it)."""

from __future__ import annotations

import pytest

import ctxfold
from conftest import example_conversations, examples_and_shared
from ctxfold.testing.doubles import FakeEmbedder

anthropic = pytest.importorskip(
    "langchain_anthropic", reason="the dev extra installs it: pip install -e '.[dev]'"
)
from langchain_ctx import to_langchain  # noqa: E402

STRATEGIES = {
    "auto": {},
    "sliding_window": {"overflow": "best_effort", "reversible": True},
    "summarize": {"reversible": True},
    "semantic": {"overflow": "best_effort", "embedder": FakeEmbedder()},
    "hierarchical": {"overflow": "best_effort", "summarizer": lambda msgs: "A summary."},
    "hybrid": {},
}


def chat_anthropic():
    return anthropic.ChatAnthropic(model="claude-sonnet-4-5", api_key="sk-offline-test")


def chat_openai():
    openai = pytest.importorskip("langchain_openai", reason="the dev extra installs it")
    return openai.ChatOpenAI(model="gpt-4o", api_key="sk-offline-test")


def conversations():
    return examples_and_shared()


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_chat_anthropic_and_chat_openai_accept_every_compressed_history(strategy):
    model, openai_model = chat_anthropic(), chat_openai()
    compressor = ctxfold.strategies.resolve_strategy(strategy, **STRATEGIES[strategy])
    checked = 0
    for _, msgs in conversations():
        systems = [m.role == "system" for m in msgs]
        if systems != sorted(systems, reverse=True):
            continue  # the input itself has a system message after a turn
        total = ctxfold.get_counter("o200k_base").count_messages(msgs)
        for fraction in (0.25, 0.1):
            try:
                result = compressor.compress(msgs, budget=int(total * fraction))
            except ctxfold.BudgetError:
                continue
            # raises ValueError("Received multiple non-consecutive system messages.") for
            # a note placed after a user turn
            model._get_request_payload(to_langchain(result.messages))
            openai_model._get_request_payload(to_langchain(result.messages))
            if not ctxfold.validity.turn_order_problems(msgs):
                assert not ctxfold.validity.turn_order_problems(list(result.messages))
            checked += 1
    assert checked


def test_a_note_before_an_assistant_turn_speaks_as_the_user():
    msgs = next(m for name, m in example_conversations() if "sqlfluff" in name)
    result = ctxfold.compress(msgs, budget=3000)
    roles = [m.role for m in result.messages]
    assert roles[:3] == ["system", "user", "assistant"] and "system" not in roles[1:]
    assert result.messages[1].text.startswith("[ctxfold round ")
    assert ctxfold.expand(result).to_openai() == ctxfold.to_openai(msgs)


def test_a_note_before_a_user_turn_joins_the_system_block():
    msgs = [ctxfold.Message("system", "You answer questions about the logbook.")]
    for k in range(40):
        msgs.append(ctxfold.Message("user", f"Entry {k}: boiler {k} read {k * 7} bar at {k}:00."))
        msgs.append(ctxfold.Message("assistant", f"Noted entry {k}."))
    msgs.append(ctxfold.Message("user", "Which boiler read 91 bar?"))
    result = ctxfold.compress(msgs, budget=400, task_share=0)
    roles = [m.role for m in result.messages]
    assert result.messages[1].text.startswith("[ctxfold")
    assert roles[:3] == ["system", "system", "user"] and "system" not in roles[2:]
    assert not ctxfold.validity.turn_order_problems(list(result.messages))


def test_chat_anthropic_accepts_every_render_of_a_session():
    model = chat_anthropic()
    for _, msgs in example_conversations():
        session = ctxfold.Session(budget=2500, store=ctxfold.MemoryStore())
        for m in msgs:
            if m.role == "assistant":
                model._get_request_payload(to_langchain(session.render().messages))
            session.add(m)
