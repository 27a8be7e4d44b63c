"""LangChain models as ctxfold's summarizer, embedder and token counter."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

import ctxfold
from conftest import example_conversations
from langchain_ctx import LangChainEmbedder, counter_from, summarizer_from, to_langchain

SUMMARY = "SUMMARY: the agent made rule L060 name the function to use, and tested it."


class _Calls(BaseCallbackHandler):
    """What each chat model run was given: its messages and its tags."""

    def __init__(self) -> None:
        self.runs: list[tuple[list[Any], list[str]]] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.runs.append((messages[0], list(kwargs.get("tags") or [])))


def _agent() -> list[ctxfold.Message]:
    return next(msgs for name, msgs in example_conversations() if "sqlfluff" in name)


def test_a_chat_model_summarizes_untagged_for_the_stream() -> None:
    calls = _Calls()
    model = GenericFakeChatModel(messages=itertools.cycle([AIMessage(SUMMARY)]))
    summarizer = summarizer_from(model.with_config(callbacks=[calls]))
    msgs = _agent()
    budget = ctxfold.TiktokenCounter().count_messages(msgs) // 4
    result = ctxfold.compress(msgs, budget=budget, strategy="summarize", summarizer=summarizer)
    assert any(SUMMARY in m.text for m in result.messages)
    (given, tags), *_ = calls.runs
    assert "nostream" in tags and "ctxfold:summarizer" in tags
    assert isinstance(given[0], SystemMessage) and "summary" in given[0].content.lower()
    assert isinstance(given[1], HumanMessage) and "Rule L060" in given[1].content


def test_embeddings_embed_unit_rows_and_serve_the_semantic_strategy() -> None:
    embedder = LangChainEmbedder(DeterministicFakeEmbedding(size=16))
    rows = embedder.embed(["a path", "another path", ""])
    assert rows.shape == (3, 16) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0)
    assert embedder.embed([]).shape == (0, 16)
    msgs = _agent()
    budget = ctxfold.TiktokenCounter().count_messages(msgs) // 3
    result = ctxfold.compress(msgs, budget=budget, strategy="semantic", embedder=embedder)
    assert result.stats.tokens_after <= budget


def test_a_models_own_counting_bounds_the_output() -> None:
    model = GenericFakeChatModel(messages=iter([]), custom_get_token_ids=lambda t: t.split())
    counter = counter_from(model)
    msgs = _agent()
    whole = model.get_num_tokens_from_messages(to_langchain(msgs))
    assert counter.count_messages(msgs) == whole  # the model's count, message by message
    result = ctxfold.compress(msgs, budget=whole // 4, counter=counter)
    assert model.get_num_tokens_from_messages(to_langchain(result.messages)) <= whole // 4
    assert result.stats.counter == counter.name


@pytest.mark.parametrize("make", [summarizer_from, LangChainEmbedder, counter_from])
def test_what_is_not_a_langchain_model_is_refused_clearly(make: Any) -> None:
    with pytest.raises(ctxfold.ConfigurationError, match="LangChain"):
        make(42)
