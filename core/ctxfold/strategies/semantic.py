"""The semantic strategy: near-duplicate units merged into one representative."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..contract import Compaction, Conversation
from ..exceptions import ConfigurationError
from ..messages import Message, transcript
from ..models.embedders import embed, get_embedder
from ..models.similarity import leader_clusters
from ..result import Action, Decision
from ..units import Unit
from .alternation import alternate
from .base import BaseCompressor, overflow
from .options import CachedOptions, check_choice, check_count

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["SemanticCompressor"]

Keep = Literal["latest", "first"]
_FALLBACK_THRESHOLD = 0.9  # for an embedder without a duplicate_threshold of its own
Fit = Literal["drop_oldest", "none"]


class SemanticCompressor(BaseCompressor):
    """Embed each unit, cluster near-duplicates, keep one representative per cluster.

    Units whose embeddings have a cosine similarity of at least ``threshold`` with a
    cluster's first unit join that cluster; the cluster keeps its newest unit (the
    latest state; ``keep="first"`` keeps the oldest) and every other member is recorded
    in the trace as ``deduplicated`` with reason ``merged_into:<index>``. Nothing is
    merged silently, and the output stays in time order.

    If the history is still over budget, the oldest remaining units are dropped
    (``fit="drop_oldest"``, the default); with ``fit="none"`` the deduplicated history
    is returned as it is, over budget, for the next step of a chain.

    Args:
        embedder: a :class:`ctxfold.Embedder` or a name (``"tfidf"``, the default;
            ``"wordllama"`` with the extra installed).
        threshold: the cosine similarity from which two units are duplicates; default:
            the embedder's ``duplicate_threshold`` (0.8 for TF-IDF, 0.96 for WordLlama;
            0.9 for an embedder that has none), since each embedder has its own scale.
        min_tokens: shorter units are never merged ("yes" means different things).
        keep: which member of a cluster stays.
        cache: embeddings cache (see :class:`ctxfold.SummarizingCompressor`).
    """

    name: ClassVar[str] = "semantic"

    uses_cache: ClassVar[bool] = True

    def __init__(
        self,
        *,
        embedder: Any = None,
        threshold: float | None = None,
        min_tokens: int = 20,
        keep: Keep = "latest",
        fit: Fit = "drop_oldest",
        **options: Unpack[CachedOptions],
    ) -> None:
        super().__init__(**options)
        self.embedder = get_embedder(embedder)
        if threshold is None:
            threshold = getattr(self.embedder, "duplicate_threshold", _FALLBACK_THRESHOLD)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise ConfigurationError(f"threshold must be a number in (0, 1], got {threshold!r}")
        if not 0 < threshold <= 1:
            raise ConfigurationError(f"threshold must be a number in (0, 1], got {threshold!r}")
        self.threshold = float(threshold)
        self.min_tokens = check_count("min_tokens", min_tokens)
        check_choice("keep", keep, ("latest", "first"))
        self.keep: Keep = keep
        check_choice("fit", fit, ("drop_oldest", "none"))
        self.fit: Fit = fit

    def clusters(self, messages: Sequence[Message], units: Sequence[Unit]) -> list[list[Unit]]:
        """Groups of near-duplicate units (each in time order), singletons left out."""
        if len(units) < 2:
            return []
        vectors = embed(
            self.embedder,
            [transcript([messages[i] for i in u.indices]) for u in units],
            cache=self.cache,
        )
        groups = leader_clusters(vectors, self.threshold)
        return [[units[k] for k in group] for group in groups if len(group) > 1]

    def compact(self, conv: Conversation) -> Compaction:
        messages, tokens, budget = conv.messages, conv.tokens, conv.budget
        pinned, free, _ = conv.pinned(self.pin_roles)
        candidates = [u for u in free if sum(tokens[i] for i in u.indices) >= self.min_tokens]
        reason: dict[int, tuple[Action, str]] = {}  # message index -> (action, reason)
        merged_into: dict[int, int] = {}  # message index -> the unit start it merged into
        for group in self.clusters(messages, candidates):
            stay = group[-1] if self.keep == "latest" else group[0]
            for u in group:
                if u is not stay:
                    for i in u.indices:
                        reason[i] = ("deduplicated", f"merged_into:{stay.start}")
                        merged_into[i] = stay.start
        deduped = sum(tokens[i] for i in reason)
        total = conv.overhead + sum(tokens) - deduped
        if total > budget and self.fit == "drop_oldest":
            alive = [u for u in free if u.start not in reason]
            for u in alive[:-1]:  # the newest unit always stays
                if total <= budget:
                    break
                for i in u.indices:
                    reason[i] = ("dropped", "over_budget")
                    total -= tokens[i]
            # A unit merged into one that was dropped is gone too: never point at it.
            for i, target in merged_into.items():
                if reason.get(target):
                    reason[i] = ("dropped", "over_budget")
            if total > budget:
                overflow(
                    self.overflow,
                    required=total,
                    budget=budget,
                    what="the pinned messages and the newest unit",
                )
        out: list[Message] = []
        trace: list[Decision] = []
        pinned_set = set(pinned)
        for i, m in enumerate(messages):
            if i in reason:
                action, why = reason[i]
                trace.append(Decision(i, action, why, tokens[i], 0, self.name))
            else:
                out.append(m)
                why = f"pinned:{m.role}" if i in pinned_set else "unique"
                trace.append(Decision(i, "kept", why, tokens[i], tokens[i], self.name))
        done = Compaction(out, trace, {"semantic_dedup": deduped} if deduped else {})
        return alternate(conv, done, self.name, self.overflow, make_room=self.fit == "drop_oldest")
