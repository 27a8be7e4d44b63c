"""Text processing, message by message: primitives (:mod:`.primitives`: identifiers,
sentences, protected spans), the encoding layers (:mod:`.layers`: dedup, whitespace,
JSON, truncation, codebooks), the format adapters (:mod:`.adapters`: code, logs, JSON,
YAML, XML, Markdown, CSV) and the extractive scoring they feed (:mod:`.scoring`).
Word lists live as data in ``words/``."""

from .adapters import (
    BaseAdapter,
    FormatAdapter,
    Piece,
    adapters,
    register_adapter,
    unregister_adapter,
)
from .layers import Codebook, Layers, decode
from .scoring import ExtractiveSummarizer
from .shortening import shorten

__all__ = [
    "BaseAdapter",
    "Codebook",
    "ExtractiveSummarizer",
    "FormatAdapter",
    "Layers",
    "Piece",
    "adapters",
    "decode",
    "register_adapter",
    "shorten",
    "unregister_adapter",
]
