"""``CompressionPostprocessor``: retrieved nodes shortened to a token budget, each node
kept apart with its id, metadata and score."""

from __future__ import annotations

import re
from typing import Any

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from ctxfold import ConfigurationError
from ctxfold.text import shorten
from ctxfold.tokens import check_budget, get_counter

from ._options import check_fields

__all__ = ["CompressionPostprocessor"]

_SPACE = re.compile(r"\s+")


class CompressionPostprocessor(BaseNodePostprocessor):
    """Fit the retrieved nodes' text into ``budget`` tokens, for a query engine's
    ``node_postprocessors`` (or a chat engine's).

    A node whose text another, better-scored node already holds is left out; when the
    rest are over the budget, each keeps a share of it in proportion to its length
    (the best-scored first, while a share of at least ``min_tokens`` is left) and is
    shortened to its share exactly by ctxfold's shortening (its best sentences or
    lines by the engine's scoring: identifiers, numbers, names, errors, and the
    query's words when the query is given, in their order; the identifiers of what
    is cut listed after them). Every node keeps its own id, metadata and score; the order
    is the input's. No model, no network.
    """

    budget: int
    counter: Any = "o200k_base"
    min_tokens: int = 40

    def __init__(self, **data: Any) -> None:
        """Fields as above; checked here (:class:`ctxfold.ConfigurationError`)."""
        check_fields(type(self), data)
        super().__init__(**data)
        check_budget(self.budget)
        if isinstance(self.min_tokens, bool) or self.min_tokens < 1:
            raise ConfigurationError(f"min_tokens must be >= 1, got {self.min_tokens!r}")
        get_counter(self.counter)

    @classmethod
    def class_name(cls) -> str:
        return "CompressionPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        count = get_counter(self.counter)
        texts = [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
        kept = _distinct(nodes, texts)
        tokens = {k: count.count_text(texts[k]) for k in kept}
        if sum(tokens.values()) <= self.budget:
            return [nodes[k] for k in sorted(kept)]
        shares = _shares(kept, tokens, self.budget, self.min_tokens)
        goal = query_bundle.query_str if query_bundle is not None else ""
        out = []
        for k in sorted(shares):
            text = shorten(texts[k], shares[k], count, goal=goal)
            out.append(_with_text(nodes[k], text) if text != texts[k] else nodes[k])
        return out


def _distinct(nodes: list[NodeWithScore], texts: list[str]) -> list[int]:
    """The nodes to keep, best-scored first: none whose text a kept one holds."""
    order = sorted(range(len(nodes)), key=lambda k: (-(nodes[k].score or 0.0), k))
    kept: list[int] = []
    flat = [_SPACE.sub(" ", t).strip() for t in texts]
    for k in order:
        if flat[k] and not any(flat[k] in flat[j] for j in kept):
            kept.append(k)
    return kept


def _shares(kept: list[int], tokens: dict[int, int], budget: int, least: int) -> dict[int, int]:
    """Tokens for each node, in proportion to its length; the worst-scored nodes go
    while a share would fall under ``least``."""
    chosen = list(kept)
    while chosen:
        total = sum(tokens[k] for k in chosen)
        shares = {k: min(tokens[k], budget * tokens[k] // total) for k in chosen}
        if len(chosen) == 1 or all(shares[k] >= min(least, tokens[k]) for k in chosen):
            return shares
        chosen.pop()  # the worst-scored
    return {}


def _with_text(node: NodeWithScore, text: str) -> NodeWithScore:
    inner = node.node
    if isinstance(inner, TextNode):
        inner = inner.model_copy(update={"text": text})
    return NodeWithScore(node=inner, score=node.score)
