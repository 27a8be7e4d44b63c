"""ctxfold for LlamaIndex: ``CompressedChatMemory`` (a chat memory whose view is
compressed), ``CompressedHistoryBlock`` (the older history, compressed, as a block of
LlamaIndex's ``Memory``), ``CompressionPostprocessor`` (retrieved nodes fitted to a
budget), LlamaIndex models as ctxfold's summarizer and embedder, conversion between
LlamaIndex chat messages and ctxfold's, and the expand tool.

Needs ``pip install 'ctxfold[llamaindex]'``. No compression logic lives here: the
wrapper converts, delegates to :mod:`ctxfold`, and converts back.
"""

from __future__ import annotations

from ctxfold.exceptions import MissingDependencyError

try:
    import llama_index.core  # noqa: F401
except ImportError:  # pragma: no cover - exercised without the extra installed
    raise MissingDependencyError("llamaindex_ctx", "llama-index-core", "llamaindex") from None

from ._block import CompressedHistoryBlock
from ._convert import from_llamaindex, to_llamaindex
from ._memory import CompressedChatMemory
from ._models import LlamaIndexEmbedder, summarizer_from
from ._postprocessor import CompressionPostprocessor
from ._tools import expand_tool

__all__ = [
    "CompressedChatMemory",
    "CompressedHistoryBlock",
    "CompressionPostprocessor",
    "LlamaIndexEmbedder",
    "expand_tool",
    "from_llamaindex",
    "summarizer_from",
    "to_llamaindex",
]
