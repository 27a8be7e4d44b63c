"""References: the files, URLs, functions, classes, errors, commands, snippets,
decisions and other identifiers a conversation mentions, extracted
(:mod:`.extractors`) and gathered in a queryable, scored index (:mod:`.index`) so that
none of them is lost for good when messages are folded."""

from .extractors import (
    BUILTIN_TYPES,
    Extractor,
    Reference,
    extract,
    extractors,
    reference_id,
    register_extractor,
    reset_extractors,
    unregister_extractor,
)
from .index import ReferenceIndex

__all__ = [
    "BUILTIN_TYPES",
    "Extractor",
    "Reference",
    "ReferenceIndex",
    "extract",
    "extractors",
    "reference_id",
    "register_extractor",
    "reset_extractors",
    "unregister_extractor",
]
