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
from ._cache import (
    Cache,
    CacheBackend,
    CacheStats,
    MemoryBackend,
    RedisBackend,
    SQLiteBackend,
    cache_key,
    get_cache,
)
from ._compressor import BaseCompressor, Compressor
from ._embed import Embedder, TfidfEmbedder, WordLlamaEmbedder, get_embedder
from ._hierarchical import DEFAULT_WEIGHTS, HierarchicalCompressor
from ._hooks import EVENTS, Event, off, on
from ._hybrid import HybridCompressor
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
from ._models import SUMMARY_PROMPT, CallableSummarizer, as_summarizer
from ._references import (
    Reference,
    ReferenceIndex,
    extractors,
    reference_id,
    register_extractor,
    reset_extractors,
    unregister_extractor,
)
from ._registry import (
    PROFILES,
    load_config,
    normalize,
    register_strategy,
    resolve_strategy,
    strategies,
)
from ._render import (
    DEFAULT_SYSTEM,
    BaseRenderer,
    FullHistory,
    PressureTriggered,
    Renderer,
    RenderStats,
    SingleUserCoalesced,
    normalize_renderer,
    register_renderer,
    render,
    renderers,
)
from ._result import CompressionResult, CompressionStats, Decision
from ._reversible import Expansion, expand, uncompress
from ._semantic import SemanticCompressor
from ._sliding_window import SlidingWindow
from ._store import (
    DEFAULT_MAX_BYTES,
    MemoryStore,
    RedisStore,
    SQLiteStore,
    VerbatimStore,
    get_store,
)
from ._summarize import ExtractiveSummarizer, Summarizer
from ._summarizing import SummarizingCompressor
from ._tokens import ApproxCounter, CallableCounter, TiktokenCounter, TokenCounter, get_counter
from ._tool import ExpandTool, expand_tool
from ._turns import ToolUse, Turn, as_turns, turns_from_messages
from ._units import Grouping, Unit, group_units
from .exceptions import (
    BudgetError,
    CacheEntryError,
    CacheError,
    ConfigurationError,
    CtxfoldError,
    ExpandError,
    InvalidMessageError,
    InvalidTurnError,
    MissingDependencyError,
    SummarizerError,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_SYSTEM",
    "DEFAULT_WEIGHTS",
    "EVENTS",
    "PROFILES",
    "SUMMARY_PROMPT",
    "ApproxCounter",
    "AutoCompressor",
    "BaseAdapter",
    "BaseCompressor",
    "BaseRenderer",
    "BudgetError",
    "Cache",
    "CacheBackend",
    "CacheEntryError",
    "CacheError",
    "CacheStats",
    "CallableCounter",
    "CallableSummarizer",
    "Codebook",
    "CompressionResult",
    "CompressionStats",
    "Compressor",
    "ConfigurationError",
    "ContentPart",
    "CtxfoldError",
    "Decision",
    "Embedder",
    "Event",
    "ExpandError",
    "ExpandTool",
    "Expansion",
    "ExtractiveSummarizer",
    "FormatAdapter",
    "FullHistory",
    "Grouping",
    "HierarchicalCompressor",
    "HybridCompressor",
    "InvalidMessageError",
    "InvalidTurnError",
    "Layers",
    "MemoryBackend",
    "MemoryStore",
    "Message",
    "MissingDependencyError",
    "Piece",
    "PressureTriggered",
    "RedisBackend",
    "RedisStore",
    "Reference",
    "ReferenceIndex",
    "RenderStats",
    "Renderer",
    "SQLiteBackend",
    "SQLiteStore",
    "SemanticCompressor",
    "SingleUserCoalesced",
    "SlidingWindow",
    "Summarizer",
    "SummarizerError",
    "SummarizingCompressor",
    "TfidfEmbedder",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCall",
    "ToolUse",
    "Turn",
    "Unit",
    "VerbatimStore",
    "WordLlamaEmbedder",
    "__version__",
    "adapters",
    "as_messages",
    "as_summarizer",
    "as_turns",
    "cache_key",
    "clear_caches",
    "compress",
    "decode",
    "expand",
    "expand_tool",
    "extractors",
    "from_anthropic",
    "from_openai",
    "get_cache",
    "get_counter",
    "get_embedder",
    "get_store",
    "group_units",
    "load_config",
    "normalize",
    "normalize_renderer",
    "off",
    "on",
    "reference_id",
    "register_adapter",
    "register_extractor",
    "register_renderer",
    "register_strategy",
    "render",
    "renderers",
    "reset_extractors",
    "resolve_strategy",
    "strategies",
    "to_anthropic",
    "to_openai",
    "turns_from_messages",
    "uncompress",
    "unregister_adapter",
    "unregister_extractor",
]

logging.getLogger("ctxfold").addHandler(logging.NullHandler())
