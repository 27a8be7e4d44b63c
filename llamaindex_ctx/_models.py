"""LlamaIndex models as ctxfold's: an LLM as a summarizer, an embedding model as an
embedder."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM

from ctxfold import ConfigurationError, Message, SummarizerError
from ctxfold.models import CallableEmbedder, CallableSummarizer
from ctxfold.models.summarizers import SUMMARY_PROMPT

from ._convert import to_llamaindex

__all__ = ["LlamaIndexEmbedder", "summarizer_from"]


def _model_id(model: Any) -> str:
    name = getattr(model, "model", None) or getattr(model, "model_name", None)
    return f"{type(model).__name__}:{name}" if isinstance(name, str) else type(model).__name__


def summarizer_from(llm: LLM, *, prompt: str = SUMMARY_PROMPT) -> CallableSummarizer:
    """A LlamaIndex LLM as a ctxfold summarizer (``summarizer=`` of ``auto``,
    ``summarize`` and the memory's strategy): it gets a system message with ``prompt``
    and a user message with the text, through ``llm.chat``; answers are cached by
    model and prompt like any summarizer's."""
    if not isinstance(llm, LLM):
        raise ConfigurationError(
            f"summarizer_from needs a LlamaIndex LLM, got {type(llm).__name__}"
        )

    def call(messages: list[Message]) -> str:
        answer = llm.chat(to_llamaindex(messages)).message.content
        if not isinstance(answer, str):
            raise SummarizerError("the summarizer LLM answered with no text")
        return answer

    return CallableSummarizer(call, prompt=prompt, cache_id=f"llamaindex:{_model_id(llm)}")


class LlamaIndexEmbedder(CallableEmbedder):
    """A LlamaIndex embedding model (``BaseEmbedding``) as a ctxfold embedder
    (``embedder=`` of ``semantic``): ``get_text_embedding_batch``, rows L2-normalized
    (needs numpy), cached text by text."""

    def __init__(self, embed_model: BaseEmbedding) -> None:
        if not isinstance(embed_model, BaseEmbedding):
            raise ConfigurationError(
                f"LlamaIndexEmbedder needs a LlamaIndex BaseEmbedding, got "
                f"{type(embed_model).__name__}"
            )
        self.embed_model = embed_model
        super().__init__(
            embed_model.get_text_embedding_batch, f"llamaindex:{_model_id(embed_model)}"
        )
