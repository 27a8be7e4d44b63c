"""The base class every built-in strategy derives from, and what a strategy does when
what it must keep does not fit (:func:`overflow`, :func:`keep_only`).

:class:`BaseCompressor` keeps the contract: its ``compress`` reads the input and runs
the one driver (:func:`ctxfold.pipeline.run`) on it, which returns a history that
fits unchanged, hands the rest to the strategy's :meth:`~BaseCompressor.compact` (or,
when reversible, to the reversible layer, which wraps it), then times, logs and
announces the result. The options every strategy takes (pinned roles, overflow
policy, model cache, reversible settings) are declared in :mod:`.options` and checked
once, in :meth:`BaseCompressor.__init__`.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

from ..contract import Compaction, Compressor, Conversation, CounterSpec, MessageLike, Overflow
from ..exceptions import BudgetError, ConfigurationError, ExpandError
from ..formats import read_messages
from ..messages import Message
from ..models.embedders import Embedder, get_embedder
from ..pipeline import Given, Query, Request, check_query, run
from ..result import CompressionResult, Decision
from ..reversible.expand import expand
from ..reversible.rounds import RoundSettings
from ..storage.cache import Cache
from ..tokens import check_budget, get_counter
from .options import PIN_ROLES, check_cache, check_choice, check_roles, check_share

__all__ = [
    "BaseCompressor",
    "check_takes",
    "compress_with",
    "keep_only",
    "overflow",
]

logger = logging.getLogger("ctxfold")

# ---------------------------------------------------------------- shared outcomes


def overflow(policy: Overflow, *, required: int, budget: int, what: str) -> None:
    """Apply an overflow policy: raise, or log that the output will be over budget."""
    if policy == "error":
        raise BudgetError(
            f"keeping {what} takes {required} tokens, over the budget of {budget}; raise "
            "the budget, use a strategy that shortens content, or pass "
            "overflow='best_effort' to accept an over-budget result",
            required=required,
            budget=budget,
        )
    logger.warning(
        "keeping %s takes %d tokens, over the budget of %d; returning a best-effort result",
        what,
        required,
        budget,
    )


def keep_only(conv: Conversation, keep: set[int], pinned: set[int], step: str) -> Compaction:
    """Keep the messages at ``keep`` (pinned ones say so) and drop the rest, with the
    trace."""
    out = [m for i, m in enumerate(conv.messages) if i in keep]
    trace = [
        Decision(i, "kept", f"pinned:{m.role}" if i in pinned else "kept", t, t, step)
        if i in keep
        else Decision(i, "dropped", "over_budget", t, 0, step)
        for i, (m, t) in enumerate(zip(conv.messages, conv.tokens, strict=True))
    ]
    return Compaction(out, trace, {})


# ---------------------------------------------------------------------- the base


class BaseCompressor(ABC):
    """Base for strategies: a subclass implements :meth:`compact` and calls
    ``super().__init__(**options)`` with the shared options it was given.

    Shared options (all keyword-only):
        pin_roles: roles always kept (default ``system`` and ``developer``).
        overflow: ``"error"`` (default) raises :class:`~ctxfold.BudgetError` when the
            content the strategy must keep cannot fit; ``"best_effort"`` returns it
            anyway, over budget.
        cache: for a strategy that calls a model: where its outputs are cached
            (``None``: the process's shared cache; ``False``: none; a spec
            :func:`ctxfold.storage.get_cache` reads).
        reversible, store, reference_share, max_references: reversible compaction
            (:class:`ctxfold.reversible.RoundSettings`): every original is stored and
            :func:`ctxfold.expand` gives it back.
        recall_share: the share of the budget at most kept for what the query
            recalls from the older history (see :meth:`compress`); ``0`` never
            recalls. Default ``None``: :func:`ctxfold.recall.default_share` (0.8 in
            a chat, 0 in an agent's run).
        recall_embedder: an embedder (a :class:`ctxfold.Embedder` or a name such as
            ``"wordllama"``) whose similarity to the query adds to the lexical
            match when choosing what to recall (default: none, words alone).

    ``compress`` reads the input (OpenAI dicts or messages), resolves the counter,
    returns a history that already fits unchanged, times the run, builds the stats
    and logs them to the ``ctxfold`` logger. ``acompress`` runs ``compress`` in a
    worker thread so an event loop is not blocked.
    """

    name: ClassVar[str] = "base"
    #: Whether ``reversible`` is on when the caller does not say.
    reversible_default: ClassVar[bool] = False
    #: Whether the strategy calls a model (and so takes a ``cache``).
    uses_cache: ClassVar[bool] = False
    #: Whether the output lists the identifiers of what it folds (see
    #: :class:`ctxfold.Strategy`).
    lists_identifiers: bool = False
    # Defaults for a subclass whose ``__init__`` does not call ``super().__init__()``.
    pin_roles: tuple[str, ...] = PIN_ROLES
    overflow: Overflow = "error"
    cache: Cache | None = None
    reversible: bool = False
    rounds: RoundSettings = RoundSettings()
    recall_share: float | None = None
    recall_embedder: Embedder | None = None
    redact: bool = False

    def __init__(
        self,
        *,
        pin_roles: Iterable[str] = PIN_ROLES,
        overflow: Overflow = "error",
        cache: Any = None,
        reversible: bool | None = None,
        store: Any = None,
        reference_share: float = 0.1,
        max_references: int | None = 200,
        recall_share: float | None = None,
        recall_embedder: Any = None,
        redact: bool = False,
    ) -> None:
        self.pin_roles = check_roles("pin_roles", pin_roles)
        if not isinstance(redact, bool):
            raise ConfigurationError(f"redact must be True or False, got {redact!r}")
        self.redact = redact
        self.recall_embedder = None if recall_embedder is None else get_embedder(recall_embedder)
        self.recall_share = (
            None if recall_share is None else check_share("recall_share", recall_share)
        )
        check_choice("overflow", overflow, ("error", "best_effort"))
        self.overflow = overflow
        if cache is not None and not self.uses_cache:
            raise ConfigurationError(f"{self.name} calls no model, so it takes no cache")
        self.cache = check_cache(cache) if self.uses_cache else None
        if reversible is None:
            reversible = self.reversible_default
        if not isinstance(reversible, bool):
            raise ConfigurationError(f"reversible must be True or False, got {reversible!r}")
        self.reversible = reversible
        self.rounds = RoundSettings.of(
            store=store, reference_share=reference_share, max_references=max_references
        )

    @property
    def store(self) -> Any:
        """The verbatim store of reversible rounds (``None``: the process's)."""
        return self.rounds.store

    def expand(self, result: CompressionResult) -> list[Message]:
        """The original history of ``result``, from this compressor's store; raises
        :class:`ctxfold.ExpandError` naming the ids the store lacks."""
        done = expand(result, store=self.rounds.store)
        if done.missing:
            raise ExpandError(f"the store lacks {', '.join(done.missing)}")
        return list(done.messages)

    def compress(
        self,
        messages: Iterable[MessageLike],
        *,
        budget: int,
        counter: CounterSpec = None,
        reversible: bool | None = None,
        query: Query = None,
    ) -> CompressionResult:
        """Return the history compressed to at most ``budget`` tokens.

        Raises :class:`BudgetError` when the content the strategy must keep cannot fit
        (unless its ``overflow`` option says otherwise); the input is never modified.
        ``reversible`` overrides the compressor's own setting for this call (a chain
        runs its steps with ``False`` and makes the whole reversible once).

        ``query`` is what the output should answer: the passages of the older history
        it recalls are shown in a recall block, in at most ``recall_share`` of the
        budget, at the head of the newest user message (see :mod:`ctxfold.recall`).
        By default it is the newest user message when that is the last message and
        asks something (in an agent's run, where recall is off unless
        ``recall_share`` is set: the newest tool calls and the errors their results
        report); ``False`` turns recall off; any text is a query.
        """
        msgs, given = read_messages(messages)
        request = Request(
            self,
            check_budget(budget),
            get_counter(counter),
            check_query(query),
            reversible=self.reversible if reversible is None else reversible,
            rounds=self.rounds,
            recall_share=self.recall_share,
            recall_embedder=self.recall_embedder,
        )
        return run(request, Given.of(msgs, request, redact_secrets=self.redact, given=given))

    async def acompress(
        self,
        messages: Iterable[MessageLike],
        *,
        budget: int,
        counter: CounterSpec = None,
        reversible: bool | None = None,
        query: Query = None,
    ) -> CompressionResult:
        """Async :meth:`compress` (run in a worker thread); same result."""
        if isinstance(messages, Iterator):
            messages = list(messages)  # consumed here, not in the worker thread
        return await asyncio.to_thread(
            self.compress,
            messages,
            budget=budget,
            counter=counter,
            reversible=reversible,
            query=query,
        )

    @abstractmethod
    def compact(self, conversation: Conversation) -> Compaction:
        """Compress a history known to exceed ``conversation.budget``: the messages,
        the trace (one decision per input message) and the tokens each step saved."""

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({opts})"


def compress_with(
    compressor: Compressor,
    messages: Iterable[MessageLike],
    *,
    budget: int,
    counter: CounterSpec = None,
    query: Query = None,
    reversible: bool | None = None,
) -> CompressionResult:
    """``compressor.compress``, with ``query`` and ``reversible`` for a
    :class:`BaseCompressor`; another compressor (any object with ``compress``) takes
    neither: a :class:`ConfigurationError` when one is given."""
    if isinstance(compressor, BaseCompressor):
        return compressor.compress(
            messages, budget=budget, counter=counter, query=query, reversible=reversible
        )
    check_takes(compressor, query, reversible)
    return compressor.compress(messages, budget=budget, counter=counter)


def check_takes(compressor: Compressor, query: Query, reversible: bool | None = None) -> None:
    """A :class:`ConfigurationError` when ``compressor`` is given a ``query`` or a
    ``reversible`` setting it does not take: only a :class:`BaseCompressor` does (any
    other object with ``compress`` takes neither)."""
    if isinstance(compressor, BaseCompressor):
        return
    if query is not None or reversible is not None:
        raise ConfigurationError(
            f"{type(compressor).__name__} takes no query and no reversible setting: "
            "those are built into the strategies that derive from ctxfold.BaseCompressor"
        )
