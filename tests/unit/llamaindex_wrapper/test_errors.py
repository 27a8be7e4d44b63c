"""The LlamaIndex wrappers' settings checked as the core checks a strategy's (a
misspelt one names the closest and every valid one)."""

from __future__ import annotations

from typing import Any

import pytest

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
