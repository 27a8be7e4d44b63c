"""ctxfold for LangChain: ``compress_messages`` (a function and a Runnable, like
``trim_messages``), ``CompressedChatMessageHistory`` (any chat history, read
compressed), LangChain models as ctxfold's summarizer, embedder and token counter,
conversion between LangChain messages and ctxfold's, and the expand tool.

Needs ``pip install 'ctxfold[langchain]'``. No compression logic lives here: the
wrapper converts, delegates to :mod:`ctxfold`, and converts back.
"""

from __future__ import annotations

from ctxfold.exceptions import MissingDependencyError

try:
    import langchain_core  # noqa: F401
except ImportError:  # pragma: no cover - exercised without the extra installed
    raise MissingDependencyError("langchain_ctx", "langchain-core", "langchain") from None

from ._convert import as_langchain_messages, from_langchain, to_langchain
from ._history import CompressedChatMessageHistory
from ._models import LangChainEmbedder, ModelTokenCounter, counter_from, summarizer_from
from ._runnable import compress_messages
from ._tools import expand_tool

__all__ = [
    "CompressedChatMessageHistory",
    "LangChainEmbedder",
    "ModelTokenCounter",
    "as_langchain_messages",
    "compress_messages",
    "counter_from",
    "expand_tool",
    "from_langchain",
    "summarizer_from",
    "to_langchain",
]
