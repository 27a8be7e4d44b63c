"""Pluggable models: summarizers (:mod:`.summarizers`: the protocol, adapters for
callables and async objects, cached and counted calls) and embedders
(:mod:`.embedders`: TF-IDF by default, WordLlama offline), with the usage they cost
counted per compression (:mod:`.usage`)."""

from .embedders import (
    CallableEmbedder,
    Embedder,
    TfidfEmbedder,
    WordLlamaEmbedder,
    get_embedder,
)
from .summarizers import SUMMARY_PROMPT, CallableSummarizer, Summarizer, as_summarizer

__all__ = [
    "SUMMARY_PROMPT",
    "CallableEmbedder",
    "CallableSummarizer",
    "Embedder",
    "Summarizer",
    "TfidfEmbedder",
    "WordLlamaEmbedder",
    "as_summarizer",
    "get_embedder",
]
