"""LangChain models as ctxfold's: a chat model (or any Runnable) as a summarizer,
``Embeddings`` as an embedder, a model's own token counting as a counter."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxfold import ConfigurationError, Message, SummarizerError
from ctxfold.models import CallableEmbedder
from ctxfold.models.summarizers import SUMMARY_PROMPT, CallableSummarizer
from ctxfold.tokens import TokenCounter

from ._convert import to_langchain

__all__ = [
    "LangChainEmbedder",
    "ModelTokenCounter",
    "counter_from",
    "summarizer_from",
    "tool_schema_tokens",
]

#: Tags on a summarizer's model calls: LangGraph leaves runs tagged "nostream" out of
#: a graph's message stream, so the user never sees the summary being written.
SUMMARIZER_TAGS = ("nostream", "ctxfold:summarizer")


def _model_id(model: Any) -> str:
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    return f"{type(model).__name__}:{name}" if isinstance(name, str) else type(model).__name__


def summarizer_from(
    model: Runnable[Any, Any], *, prompt: str = SUMMARY_PROMPT
) -> CallableSummarizer:
    """A chat model, LLM or any Runnable that takes messages, as a ctxfold summarizer
    (``summarizer=`` of ``auto``, ``summarize`` and the session). It gets a system
    message with ``prompt`` and a human message with the text; its calls are tagged
    ``nostream`` (a LangGraph stream leaves them out) and ``ctxfold:summarizer``, and
    cached by model and prompt like any summarizer's."""
    if not isinstance(model, Runnable):
        raise ConfigurationError(
            f"summarizer_from needs a LangChain chat model or Runnable, got {type(model).__name__}"
        )
    config: RunnableConfig = {"tags": list(SUMMARIZER_TAGS), "run_name": "ctxfold_summarizer"}

    def call(messages: list[Message]) -> str:
        out = model.invoke(to_langchain(messages), config=config)
        if isinstance(out, BaseMessage):
            return out.text
        if isinstance(out, str):
            return out
        raise SummarizerError(
            f"the summarizer model returned a {type(out).__name__}; a message or text was expected"
        )

    return CallableSummarizer(call, prompt=prompt, cache_id=f"langchain:{_model_id(model)}")


class LangChainEmbedder(CallableEmbedder):
    """LangChain ``Embeddings`` as a ctxfold embedder (``embedder=`` of ``semantic``):
    ``embed_documents``, rows L2-normalized (needs numpy). A text's vector does not
    depend on the batch, so vectors are cached text by text."""

    def __init__(self, embeddings: Embeddings) -> None:
        if not isinstance(embeddings, Embeddings):
            raise ConfigurationError(
                f"LangChainEmbedder needs LangChain Embeddings, got {type(embeddings).__name__}"
            )
        self.embeddings = embeddings
        super().__init__(embeddings.embed_documents, f"langchain:{_model_id(embeddings)}")


class ModelTokenCounter:
    """A LangChain model's own token counting as a ctxfold counter: a message costs
    what ``get_num_tokens_from_messages`` says of it (beyond what an empty list costs,
    the reply priming), a text what ``get_num_tokens`` says; counts are cached by
    content. A model whose counting calls its provider makes a call per new message."""

    def __init__(self, model: BaseLanguageModel[Any], *, cache_size: int = 65536) -> None:
        if not isinstance(model, BaseLanguageModel):
            raise ConfigurationError(
                f"counter_from needs a LangChain chat model or LLM, got {type(model).__name__}"
            )
        self.model = model
        self.name = _model_id(model)
        self._priming = model.get_num_tokens_from_messages([])
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._cache_size = cache_size

    def count_text(self, text: str) -> int:
        """Tokens in ``text``, by the model."""
        return self.model.get_num_tokens(text) if text else 0

    def count_message(self, message: Message) -> int:
        """Tokens ``message`` costs, by the model (cached by its fingerprint)."""
        key = message.fingerprint
        hit = self._cache.get(key)
        if hit is None:
            hit = self.model.get_num_tokens_from_messages(to_langchain([message])) - self._priming
            self._cache[key] = hit
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return hit

    def count_messages(self, messages: Sequence[Message]) -> int:
        """Tokens the conversation costs: the priming plus every message."""
        return self._priming + sum(self.count_message(m) for m in messages)


def counter_from(model: BaseLanguageModel[Any]) -> ModelTokenCounter:
    """A chat model's (or LLM's) own token counting as a ctxfold counter (``counter=``
    of every entry point); see :class:`ModelTokenCounter`."""
    return ModelTokenCounter(model)


def tool_schema_tokens(counter: TokenCounter, tools: Sequence[BaseTool | dict[str, Any]]) -> int:
    """Tokens the schemas of ``tools`` take in a model call (as OpenAI function schemas,
    the form every provider's is close to); 0 for no tools."""
    if not tools:
        return 0
    schemas = [convert_to_openai_tool(t) for t in tools]
    return counter.count_text(json.dumps(schemas, sort_keys=True, ensure_ascii=False))
