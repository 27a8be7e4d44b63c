"""ctxfold: keep an LLM agent's conversation inside its context window.

>>> import ctxfold
>>> result = ctxfold.compress(messages, budget=4000)        # doctest: +SKIP
>>> result.to_openai(), result.stats.ratio                  # doctest: +SKIP

The top level holds what a user needs; each family has its own subpackage:
:mod:`ctxfold.strategies` (the strategies, their registry and profiles),
:mod:`ctxfold.reversible` (rounds, expand, the expand tool), :mod:`ctxfold.recall`
(what a question needs from the older history), :mod:`ctxfold.rendering`
(turns and renderers), :mod:`ctxfold.session` (:class:`Session`: a growing
conversation compressed turn after turn), :mod:`ctxfold.references`,
:mod:`ctxfold.storage` (cache and verbatim stores), :mod:`ctxfold.models` (summarizers,
embedders), :mod:`ctxfold.text` (layers, adapters, scoring), :mod:`ctxfold.testing` (the
contract suite).

Importing ctxfold loads only the standard library; tiktoken loads on first count.
"""

from __future__ import annotations

import logging
from typing import Any

from ._api import Compression, compress, condense
from ._state import clear_caches, pause_gc
from .contract import Compressor, Strategy
from .exceptions import (
    BudgetError,
    CacheError,
    ConfigurationError,
    CtxfoldError,
    ExpandError,
    InvalidMessageError,
    MissingDependencyError,
    SummarizerError,
)
from .messages import Message, ToolCall
from .rendering import Turn, render
from .result import CompressionResult
from .reversible import expand, expand_tool
from .session import Session
from .storage import MemoryStore, RedisStore, SQLiteStore, get_store
from .strategies import (
    AutoCompressor,
    BaseCompressor,
    HierarchicalCompressor,
    HybridCompressor,
    SemanticCompressor,
    SlidingWindow,
    SummarizingCompressor,
    normalize,
    register_strategy,
)
from .tokens import get_counter, share_budget
from .wire import from_anthropic, to_anthropic
from .wire.openai import from_openai, to_openai

# isort: split
# Re-exported because the README's examples use them here; not part of ``__all__``.
from . import exceptions as exceptions
from .hooks import on as on
from .messages import ContentPart as ContentPart
from .models import SUMMARY_PROMPT as SUMMARY_PROMPT
from .references import ReferenceIndex as ReferenceIndex
from .references import register_extractor as register_extractor
from .rendering import Renderer as Renderer
from .rendering import ToolUse as ToolUse
from .rendering import normalize_renderer as normalize_renderer
from .rendering import register_renderer as register_renderer
from .rendering import turns_from_messages as turns_from_messages
from .result import CompressionStats as CompressionStats
from .result import Decision as Decision
from .reversible import uncompress as uncompress
from .storage import DEFAULT_MAX_BYTES as DEFAULT_MAX_BYTES
from .storage import Cache as Cache
from .strategies import load_config as load_config
from .text import ExtractiveSummarizer as ExtractiveSummarizer
from .text import Layers as Layers
from .text import decode as decode
from .text import register_adapter as register_adapter
from .tokens import TiktokenCounter as TiktokenCounter
from .units import group_units as group_units

__version__ = "0.1.0"

__all__ = [
    "AutoCompressor",
    "BaseCompressor",
    "BudgetError",
    "CacheError",
    "Compression",
    "CompressionResult",
    "Compressor",
    "ConfigurationError",
    "CtxfoldError",
    "ExpandError",
    "HierarchicalCompressor",
    "HybridCompressor",
    "InvalidMessageError",
    "MemoryStore",
    "Message",
    "MissingDependencyError",
    "RedisStore",
    "SQLiteStore",
    "SemanticCompressor",
    "Session",
    "SlidingWindow",
    "Strategy",
    "SummarizerError",
    "SummarizingCompressor",
    "ToolCall",
    "Turn",
    "__version__",
    "clear_caches",
    "compress",
    "condense",
    "expand",
    "expand_tool",
    "from_anthropic",
    "from_openai",
    "get_counter",
    "get_store",
    "normalize",
    "pause_gc",
    "register_strategy",
    "render",
    "share_budget",
    "to_anthropic",
    "to_openai",
]

#: Where the names the top level no longer holds live now.
_MOVED = {
    **dict.fromkeys(
        ("PROFILES", "DEFAULT_WEIGHTS", "resolve_strategy", "registered"), "ctxfold.strategies"
    ),
    **dict.fromkeys(("EVENTS", "Event", "off"), "ctxfold.hooks"),
    **dict.fromkeys(
        (
            "CallableSummarizer",
            "as_summarizer",
            "Summarizer",
            "Embedder",
            "TfidfEmbedder",
            "WordLlamaEmbedder",
            "get_embedder",
        ),
        "ctxfold.models",
    ),
    **dict.fromkeys(
        ("Reference", "extractors", "reference_id", "reset_extractors", "unregister_extractor"),
        "ctxfold.references",
    ),
    **dict.fromkeys(
        (
            "DEFAULT_SYSTEM",
            "BaseRenderer",
            "FullHistory",
            "PressureTriggered",
            "RenderStats",
            "SingleUserCoalesced",
            "as_turns",
            "renderers",
        ),
        "ctxfold.rendering",
    ),
    **dict.fromkeys(("ExpandTool", "Expansion"), "ctxfold.reversible"),
    **dict.fromkeys(
        (
            "CacheBackend",
            "CacheStats",
            "MemoryBackend",
            "RedisBackend",
            "SQLiteBackend",
            "VerbatimStore",
            "cache_key",
            "get_cache",
        ),
        "ctxfold.storage",
    ),
    **dict.fromkeys(
        ("BaseAdapter", "Codebook", "FormatAdapter", "Piece", "adapters", "unregister_adapter"),
        "ctxfold.text",
    ),
    **dict.fromkeys(("ApproxCounter", "CallableCounter", "TokenCounter"), "ctxfold.tokens"),
    **dict.fromkeys(("Grouping", "Unit"), "ctxfold.units"),
    **dict.fromkeys(("as_messages",), "ctxfold.wire"),
    **dict.fromkeys(("CacheEntryError", "InvalidTurnError"), "ctxfold.exceptions"),
}


def __getattr__(name: str) -> Any:
    where = _MOVED.get(name)
    if where is None:
        raise AttributeError(f"module 'ctxfold' has no attribute {name!r}")
    raise AttributeError(f"ctxfold.{name} lives in {where}: use {where}.{name}")


logging.getLogger("ctxfold").addHandler(logging.NullHandler())
