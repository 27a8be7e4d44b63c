"""ctxfold for LangChain: ``compress_messages`` (a function and a Runnable, like
``trim_messages``), ``CompressedChatMessageHistory`` (any chat history, read
compressed), ``CompressionMiddleware`` (an agent of ``create_agent`` sends its model the
compressed history), ``pre_model_hook`` (the same for a LangGraph graph built by hand),
LangChain models as ctxfold's summarizer, embedder and token counter, ctxfold's note as
``SummarizationMiddleware``'s summarizer (``note_summarizer``), conversion between
LangChain messages and ctxfold's, and the expand tool.

Needs ``pip install 'ctxfold[langchain]'``; the middleware and the hook need
``'ctxfold[agents]'`` (``langchain`` and ``langgraph``) and load on first use. No
compression logic lives here: the wrapper converts, delegates to :mod:`ctxfold`, and
converts back.
"""

from __future__ import annotations

import importlib
from typing import Any

from ctxfold.exceptions import MissingDependencyError

try:
    import langchain_core  # noqa: F401
except ImportError:  # pragma: no cover - exercised without the extra installed
    raise MissingDependencyError("langchain_ctx", "langchain-core", "langchain") from None

from ._convert import as_langchain_messages, from_langchain, to_langchain
from ._history import CompressedChatMessageHistory, compressed_prompt
from ._models import LangChainEmbedder, ModelTokenCounter, counter_from, summarizer_from
from ._runnable import compress_messages
from ._summarizer import note_summarizer
from ._tools import expand_tool

#: What loads on first use, from the module that needs ``langchain`` / ``langgraph``.
_AGENTS = {
    "CompressionMiddleware": "_agent",
    "CompressionState": "_agent",
    "pre_model_hook": "_graph",
}


def __getattr__(name: str) -> Any:
    module = _AGENTS.get(name)
    if module is None:
        raise AttributeError(f"module 'langchain_ctx' has no attribute {name!r}")
    try:
        loaded = importlib.import_module(f"{__name__}.{module}")
    except ImportError as exc:
        if exc.name not in ("langchain", "langgraph") and not str(exc.name).startswith(
            ("langchain.", "langgraph.")
        ):
            raise
        raise MissingDependencyError(f"langchain_ctx.{name}", "langchain", "agents") from None
    return getattr(loaded, name)


__all__ = [
    "CompressedChatMessageHistory",
    "CompressionMiddleware",
    "CompressionState",
    "LangChainEmbedder",
    "ModelTokenCounter",
    "as_langchain_messages",
    "compress_messages",
    "compressed_prompt",
    "counter_from",
    "expand_tool",
    "from_langchain",
    "note_summarizer",
    "pre_model_hook",
    "summarizer_from",
    "to_langchain",
]
