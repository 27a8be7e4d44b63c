"""ctxfold: keep an LLM agent's conversation inside its context window.

>>> import ctxfold
>>> result = ctxfold.compress(messages, budget=4000)        # doctest: +SKIP
>>> result.to_openai(), result.stats.ratio                  # doctest: +SKIP

Importing ctxfold loads only the standard library; tiktoken loads on first count.
"""

from __future__ import annotations

import logging

from ._adapters import (
    BaseAdapter,
    FormatAdapter,
    Piece,
    adapters,
    register_adapter,
    unregister_adapter,
)
from ._api import compress
from ._auto import AutoCompressor, clear_caches
from ._compressor import BaseCompressor, Compressor
from ._layers import Codebook, Layers, decode
from ._messages import (
    ContentPart,
    Message,
    ToolCall,
    as_messages,
    from_anthropic,
    from_openai,
    to_anthropic,
    to_openai,
)
from ._registry import register_strategy, resolve_strategy, strategies
from ._result import CompressionResult, CompressionStats, Decision
from ._sliding_window import SlidingWindow
from ._summarize import ExtractiveSummarizer, Summarizer
from ._tokens import ApproxCounter, CallableCounter, TiktokenCounter, TokenCounter, get_counter
from ._units import Grouping, Unit, group_units
from .exceptions import (
    BudgetError,
    ConfigurationError,
    CtxfoldError,
    InvalidMessageError,
    MissingDependencyError,
)

__version__ = "0.1.0"

__all__ = [
    "ApproxCounter",
    "AutoCompressor",
    "BaseAdapter",
    "BaseCompressor",
    "BudgetError",
    "CallableCounter",
    "Codebook",
    "CompressionResult",
    "CompressionStats",
    "Compressor",
    "ConfigurationError",
    "ContentPart",
    "CtxfoldError",
    "Decision",
    "ExtractiveSummarizer",
    "FormatAdapter",
    "Grouping",
    "InvalidMessageError",
    "Layers",
    "Message",
    "MissingDependencyError",
    "Piece",
    "SlidingWindow",
    "Summarizer",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCall",
    "Unit",
    "__version__",
    "adapters",
    "as_messages",
    "clear_caches",
    "compress",
    "decode",
    "from_anthropic",
    "from_openai",
    "get_counter",
    "group_units",
    "register_adapter",
    "register_strategy",
    "resolve_strategy",
    "strategies",
    "to_anthropic",
    "to_openai",
    "unregister_adapter",
]

logging.getLogger("ctxfold").addHandler(logging.NullHandler())
