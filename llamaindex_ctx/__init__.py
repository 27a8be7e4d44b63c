"""ctxfold for LlamaIndex: ``CompressedChatMemory`` (a chat memory whose view is
compressed), conversion between LlamaIndex chat messages and ctxfold's, and the expand
tool.

Needs ``pip install 'ctxfold[llamaindex]'``. No compression logic lives here: the
wrapper converts, delegates to :mod:`ctxfold`, and converts back.
"""

from __future__ import annotations

from ctxfold.exceptions import MissingDependencyError

try:
    import llama_index.core  # noqa: F401
except ImportError:  # pragma: no cover - exercised without the extra installed
    raise MissingDependencyError("llamaindex_ctx", "llama-index-core", "llamaindex") from None

from ._convert import from_llamaindex, to_llamaindex
from ._memory import CompressedChatMemory
from ._tools import expand_tool

__all__ = ["CompressedChatMemory", "expand_tool", "from_llamaindex", "to_llamaindex"]
