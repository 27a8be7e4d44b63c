"""The LangChain wrappers' settings checked as the core checks a strategy's: a misspelt
one is a ctxfold ConfigurationError naming the closest setting and every one, and
``compress_messages`` takes every strategy form ``ctxfold.normalize`` reads."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

import ctxfold
from langchain_ctx import (
    CompressedChatMessageHistory,
    CompressionMiddleware,
    compress_messages,
    pre_model_hook,
)

MAKERS: dict[str, Any] = {
    "CompressionMiddleware": lambda **kw: CompressionMiddleware(1000, **kw),
    "CompressedChatMessageHistory": lambda **kw: CompressedChatMessageHistory(budget=1000, **kw),
    "pre_model_hook": lambda **kw: pre_model_hook(1000, **kw),
}


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_misspelt_setting_names_the_closest_and_every_valid_one(name: str) -> None:
    with pytest.raises(ctxfold.ConfigurationError) as err:
        MAKERS[name](stratgy="auto")
    message = str(err.value)
    assert message.startswith(f"{name} has no option 'stratgy' (did you mean 'strategy'?)")
    assert "its options: " in message and "high_water" in message and "budget" in message
    assert "TypeError" not in message and "__init__" not in message


def _history() -> list[Any]:
    out: list[Any] = []
    for k in range(12):
        out.append(HumanMessage(f"Question {k} about the invoice INV-{k:04d} and its total?"))
        out.append(AIMessage(f"The invoice INV-{k:04d} totals {k * 37} euros. " * 3))
    return out


@pytest.mark.parametrize(
    "strategy",
    [
        "fast",
        "balanced",
        "quality",
        "cost",
        ("sliding_window", {"keep_first": 1}),
        {"strategy": "sliding_window", "keep_first": 2},
        {"profile": "fast"},
    ],
)
def test_compress_messages_takes_profiles_tuples_and_dicts(strategy: Any) -> None:
    history = _history()
    kept = compress_messages(history, budget=200, strategy=strategy, query=False)
    assert 0 < len(kept) < len(history)
    chained = compress_messages(budget=200, strategy=strategy, query=False).invoke(history)
    assert [m.content for m in chained] == [m.content for m in kept]


def test_compress_messages_names_the_closest_strategy_or_profile() -> None:
    with pytest.raises(ctxfold.ConfigurationError, match="did you mean 'quality'"):
        compress_messages(budget=200, strategy="qualty")
