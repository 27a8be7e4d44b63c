"""The LlamaIndex wrappers' settings checked as the core checks a strategy's (a
misspelt one names the closest and every valid one), and a ``token_limit`` too small
for the history said as such."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage

import ctxfold
from llamaindex_ctx import CompressedChatMemory, CompressedHistoryBlock, CompressionPostprocessor

MAKERS: dict[str, Any] = {
    "CompressedChatMemory": lambda **kw: CompressedChatMemory(**kw),
    "CompressedHistoryBlock": lambda **kw: CompressedHistoryBlock(**kw),
    "CompressionPostprocessor": lambda **kw: CompressionPostprocessor(budget=500, **kw),
}


@pytest.mark.parametrize(
    ("name", "typo", "meant"),
    [
        ("CompressedChatMemory", "stratgy", "strategy"),
        ("CompressedChatMemory", "token_limt", "token_limit"),
        ("CompressedHistoryBlock", "stratgy", "strategy"),
        ("CompressionPostprocessor", "countr", "counter"),
    ],
)
def test_a_misspelt_setting_names_the_closest_and_every_valid_one(
    name: str, typo: str, meant: str
) -> None:
    with pytest.raises(ctxfold.ConfigurationError) as err:
        MAKERS[name](**{typo: "auto"})
    message = str(err.value)
    assert message.startswith(f"{name} has no option {typo!r} (did you mean {meant!r}?)")
    assert "its options: " in message and "counter" in message


def test_from_defaults_checks_its_options_too() -> None:
    with pytest.raises(ctxfold.ConfigurationError, match="did you mean 'recall_share'"):
        CompressedChatMemory.from_defaults(recall_shar=0.2)


def _memory(token_limit: int) -> CompressedChatMemory:
    memory = CompressedChatMemory(token_limit=token_limit)
    memory.put(ChatMessage(role="user", content="What changed in the parcel P-0042 route?"))
    memory.put(ChatMessage(role="assistant", content="It now goes through Lyon. " * 12))
    return memory


@pytest.mark.parametrize(("limit", "beside"), [(5, 0), (20, 10)])
def test_a_token_limit_too_small_says_so_with_the_limit_it_needs(limit: int, beside: int) -> None:
    with pytest.raises(ctxfold.BudgetError) as err:
        _memory(limit).get(initial_token_count=beside)
    message = str(err.value)
    assert beside or "system prompt" not in message  # none was sent beside it
    assert message.startswith(f"token_limit={limit} is too small for this history")
    need = err.value.required
    assert f"raise token_limit to at least {need}" in message and need > limit
    assert _memory(need).get(initial_token_count=beside)  # the limit it names is enough
