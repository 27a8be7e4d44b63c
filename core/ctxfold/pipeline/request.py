"""What one call asks of the pipeline: a frozen value the entry point checks and builds
(``compress`` from its arguments and the compressor's options, a session's render
from its settings), which no stage changes."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..contract import Strategy
from ..models.embedders import Embedder
from ..recall import Query, check_query
from ..reversible.rounds import RoundSettings
from ..tokens import TokenCounter

__all__ = ["Query", "Request", "check_query"]


@dataclass(frozen=True)
class Request:
    """One call: what compacts, into how many tokens, counted how, for what query.

    Attributes:
        strategy: compacts a history (its ``name`` names the call in stats and hooks).
        budget: the tokens the result may take.
        counter: counts them.
        query: what the result should answer (``None``: the default query, ``False``:
            none; see :func:`ctxfold.recall.resolve_query`).
        reversible: whether a compaction stores its originals (a session's always do).
        rounds: where a reversible round's originals go, and its references' room.
        recall_share: the share of the budget at most kept for what the query
            recalls (``None``: the source's default for its history).
    """

    strategy: Strategy
    budget: int
    counter: TokenCounter
    query: Query = None
    reversible: bool = False
    rounds: RoundSettings = field(default_factory=RoundSettings)
    recall_share: float | None = None
    recall_embedder: Embedder | None = None
