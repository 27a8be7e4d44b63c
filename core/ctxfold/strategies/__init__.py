"""Strategies: what to keep of a history that exceeds its budget. Each one is a
:class:`~ctxfold.Strategy` built on :class:`.base.BaseCompressor`, which keeps the
contract and declares the shared options; :mod:`.registry` names them, reads options
and configuration files, and holds the profiles.

- ``auto`` (:mod:`.auto`, a pipeline of stages): the default engine;
- ``sliding_window``, ``summarize``, ``semantic``, ``hierarchical``;
- ``hybrid``: a chain of the others.
"""

from .auto import AutoCompressor
from .base import BaseCompressor
from .hierarchical import DEFAULT_WEIGHTS, HierarchicalCompressor
from .hybrid import HybridCompressor
from .registry import (
    PROFILES,
    load_config,
    normalize,
    register_strategy,
    registered,
    resolve_strategy,
)
from .semantic import SemanticCompressor
from .sliding_window import SlidingWindow
from .summarizing import SummarizingCompressor

__all__ = [
    "DEFAULT_WEIGHTS",
    "PROFILES",
    "AutoCompressor",
    "BaseCompressor",
    "HierarchicalCompressor",
    "HybridCompressor",
    "SemanticCompressor",
    "SlidingWindow",
    "SummarizingCompressor",
    "load_config",
    "normalize",
    "register_strategy",
    "registered",
    "resolve_strategy",
]
