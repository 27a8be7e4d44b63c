"""The compressor contract and the base class that keeps its shared promises."""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from ._cache import Cache, get_cache
from ._hooks import emit
from ._messages import ROLES, Message, as_messages
from ._result import CompressionResult, CompressionStats, Decision
from ._tokens import TokenCounter, get_counter
from ._units import Grouping, group_units
from ._usage import run_usage
from .exceptions import BudgetError, ConfigurationError, ExpandError

__all__ = ["BaseCompressor", "Compressor", "CounterSpec", "MessageLike", "Overflow"]

logger = logging.getLogger("ctxfold")

MessageLike = Message | Mapping[str, Any]
CounterSpec = str | TokenCounter | Callable[[str], int] | None
#: What a strategy does when the content it must keep cannot fit the budget:
#: ``"error"`` raises :class:`BudgetError`; ``"best_effort"`` returns the smallest
#: output it can make (over budget; ``stats.fits`` is False and a warning is logged).
Overflow = Literal["error", "best_effort"]


@runtime_checkable
class Compressor(Protocol):
    """Compresses a message history to a token budget. This is a Protocol: any object
    with these members is a compressor.

    Every compressor keeps the invariants in the design: never more tokens than the
    input (a history that fits comes back unchanged); fits the budget or raises
    :class:`BudgetError`; tool calls keep their results; system messages kept and order
    preserved; deterministic; the input is not mutated; ``acompress`` equals
    ``compress``. :class:`ctxfold.testing.CompressorContract` checks them.
    """

    @property
    def name(self) -> str:
        """The strategy's name, as recorded in results and traces."""
        ...

    def compress(
        self, messages: Iterable[MessageLike], *, budget: int, counter: CounterSpec = None
    ) -> CompressionResult:
        """Return the history compressed to at most ``budget`` tokens."""
        ...

    async def acompress(
        self, messages: Iterable[MessageLike], *, budget: int, counter: CounterSpec = None
    ) -> CompressionResult:
        """Async :meth:`compress`; same result."""
        ...


def check_budget(budget: object) -> int:
    """Validate a token budget (an ``int`` >= 0)."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ConfigurationError(f"budget must be a whole number of tokens >= 0, got {budget!r}")
    return budget


def check_choice(label: str, value: object, choices: Sequence[str]) -> None:
    """Raise :class:`ConfigurationError` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ConfigurationError(
            f"{label} must be one of {', '.join(repr(c) for c in choices)}, got {value!r}"
        )


def check_roles(label: str, roles: Iterable[str]) -> tuple[str, ...]:
    """Validate a collection of roles; return it as a tuple."""
    if isinstance(roles, str):
        raise ConfigurationError(f"{label} must be a list of roles, not one string")
    out = tuple(roles)
    unknown = set(out) - ROLES
    if unknown:
        raise ConfigurationError(
            f"{label} has unknown roles {sorted(unknown)}; use {sorted(ROLES)}"
        )
    return out


def check_share(label: str, value: object) -> float:
    """Validate a share of the budget: a number in ``[0, 1)``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ConfigurationError(f"{label} must be a number in [0, 1), got {value!r}")
    return float(value)


def check_cache(cache: object) -> Cache | None:
    """A strategy's ``cache`` option: ``None``/``True`` -> the shared default cache,
    ``False`` -> no cache, anything else as :func:`ctxfold.get_cache` reads it."""
    if cache is False:
        return None
    return get_cache(None if cache is True else cache)  # type: ignore[arg-type]


def keep_only(
    messages: Sequence[Message],
    tokens: Sequence[int],
    keep: set[int],
    pinned: set[int],
    step: str,
) -> tuple[list[Message], list[Decision]]:
    """Keep the messages at ``keep`` (pinned ones say so) and drop the rest, with the
    trace."""
    out = [m for i, m in enumerate(messages) if i in keep]
    trace = [
        Decision(i, "kept", f"pinned:{m.role}" if i in pinned else "kept", t, t, step)
        if i in keep
        else Decision(i, "dropped", "over_budget", t, 0, step)
        for i, (m, t) in enumerate(zip(messages, tokens, strict=True))
    ]
    return out, trace


class BaseCompressor(ABC):
    """Base for strategies: subclasses implement :meth:`_compress` only.

    The base reads the input (OpenAI dicts or messages), resolves the counter, returns a
    history that already fits unchanged, times the run, builds the stats, and logs them
    to the ``ctxfold`` logger. ``acompress`` runs ``compress`` in a worker thread so an
    event loop is not blocked.
    """

    name: ClassVar[str] = "base"
    #: Reversible compaction (see :meth:`set_reversible`): off unless a strategy or
    #: its caller turns it on.
    reversible: bool = False
    store: Any = None
    reference_share: float = 0.1
    max_references: int | None = 200
    #: Whether the strategy's output lists the identifiers of what it folds (``auto``'s
    #: note does): a reversible round then adds no references of its own (the note's
    #: list is them) and reserves room only for the round's name.
    lists_identifiers: bool = False

    def set_reversible(
        self,
        reversible: bool,
        *,
        store: Any = None,
        reference_share: float = 0.1,
        max_references: int | None = 200,
    ) -> None:
        """Configure reversible compaction (every strategy's constructor takes these).

        With ``reversible``, every input message of a round goes to ``store``
        (``None``: the process's memory store, capped at
        :data:`ctxfold.DEFAULT_MAX_BYTES`; ``"sqlite:///path.db"``, ``"redis://..."``
        or a :class:`ctxfold.VerbatimStore`), one line names the round (the first
        line of the strategy's note, or a block after the system messages), each
        rewritten message is marked ``[expand <id>]``, and the references of what the
        model no longer sees in full (at most ``max_references``) follow the round's
        line; the line and the references take at most ``reference_share`` of the
        budget. :func:`ctxfold.expand` gives back the original.
        """
        from ._references import check_max_references
        from ._store import get_store

        if not isinstance(reversible, bool):
            raise ConfigurationError(f"reversible must be True or False, got {reversible!r}")
        self.reversible = reversible
        self.store = None if store is None else get_store(store)
        self.reference_share = check_share("reference_share", reference_share)
        self.max_references = check_max_references(max_references)

    def expand(self, result: CompressionResult) -> list[Message]:
        """The original history of ``result``, from this compressor's store; raises
        :class:`ctxfold.ExpandError` naming the ids the store lacks."""
        from ._reversible import expand

        done = expand(result, store=self.store)
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
    ) -> CompressionResult:
        """Return the history compressed to at most ``budget`` tokens.

        Raises :class:`BudgetError` when the content the strategy must keep cannot fit
        (unless its ``overflow`` option says otherwise); the input is never modified.
        ``reversible`` overrides the compressor's own setting for this call (a chain
        runs its steps with ``False`` and makes the whole reversible once).
        """
        started = time.perf_counter()
        msgs = as_messages(messages)
        budget = check_budget(budget)
        cnt = get_counter(counter)
        grouping = group_units(msgs)
        before = cnt.count_messages(msgs)
        savings: Mapping[str, int] = {}
        notes: tuple[str, ...] = ()
        round_id: str | None = None
        emit(
            "compaction_started",
            strategy=self.name,
            messages=len(msgs),
            tokens=before,
            budget=budget,
        )
        with run_usage() as usage:
            if before <= budget:
                out: Sequence[Message] = msgs
                trace = [
                    Decision(i, "kept", "fits_budget", t, t, self.name)
                    for i, t in enumerate(cnt.count_message(m) for m in msgs)
                ]
            elif self.reversible if reversible is None else reversible:
                from ._reversible import compress_reversibly

                out, trace, savings, notes, round_id = compress_reversibly(
                    self, msgs, budget=budget, counter=cnt, grouping=grouping
                )
            else:
                out, trace, savings = self._compress(
                    msgs, budget=budget, counter=cnt, grouping=grouping
                )
        after = cnt.count_messages(out)
        stats = CompressionStats(
            strategy=self.name,
            counter=cnt.name,
            budget=budget,
            tokens_before=before,
            tokens_after=after,
            messages_before=len(msgs),
            messages_after=len(out),
            elapsed_ms=(time.perf_counter() - started) * 1000.0,
            savings=savings,
            usage=dict(usage),
        )
        result = CompressionResult(
            messages=tuple(out),
            stats=stats,
            trace=tuple(trace),
            strategy=self.name,
            warnings=grouping.warnings() + notes,
            round_id=round_id,
        )
        _log(result)
        emit("compaction_completed", result=result)
        return result

    async def acompress(
        self,
        messages: Iterable[MessageLike],
        *,
        budget: int,
        counter: CounterSpec = None,
        reversible: bool | None = None,
    ) -> CompressionResult:
        """Async :meth:`compress` (run in a worker thread); same result."""
        msgs = as_messages(messages)
        return await asyncio.to_thread(
            self.compress, msgs, budget=budget, counter=counter, reversible=reversible
        )

    @abstractmethod
    def _compress(
        self,
        messages: list[Message],
        *,
        budget: int,
        counter: TokenCounter,
        grouping: Grouping,
    ) -> tuple[Sequence[Message], list[Decision], Mapping[str, int]]:
        """Compress a history known to exceed ``budget``; return the messages, the trace
        (one decision per input message) and the tokens each step saved."""

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({opts})"


def _log(result: CompressionResult) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return
    s = result.stats
    logger.info(
        "%s: %d -> %d tokens (%.2fx, budget %d%s), %d -> %d messages, %.1f ms",
        s.strategy,
        s.tokens_before,
        s.tokens_after,
        s.ratio,
        s.budget,
        "" if s.fits else ", OVER BUDGET",
        s.messages_before,
        s.messages_after,
        s.elapsed_ms,
        extra={"ctxfold_stats": s.as_dict()},
    )


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
