"""The base class every built-in strategy derives from, the options they all share,
and the checks of settings they use.

:class:`BaseCompressor` keeps the contract and the stats: it reads the input, returns a
history that already fits unchanged, hands the rest to the strategy's
:meth:`~BaseCompressor.compact` (or, when reversible, to the reversible layer, which
wraps it), then times, logs and announces the result. The options every strategy takes
(pinned roles, overflow policy, model cache, reversible settings) are declared once,
as the typed dicts below, and checked once, in :meth:`BaseCompressor.__init__`.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar, TypedDict

from ..contract import Compaction, Compressor, Conversation, CounterSpec, MessageLike, Overflow
from ..exceptions import BudgetError, ConfigurationError, ExpandError
from ..formats import read_messages
from ..messages import ROLES, Message
from ..models.embedders import Embedder, get_embedder
from ..pipeline import Given, Query, Request, check_query, run
from ..result import (
    CompressionResult,
    Decision,
    earlier,
    note_message,
)
from ..reversible.expand import expand
from ..reversible.rounds import RoundSettings
from ..storage.cache import Cache, get_cache
from ..tokens import check_budget, get_counter
from ..validity import SYSTEM_ROLES, clashes, turn_order_problems

__all__ = [
    "BaseCompressor",
    "CachedOptions",
    "ReversibleOptions",
    "SharedOptions",
    "alternate",
    "check_choice",
    "check_count",
    "check_roles",
    "check_share",
    "check_takes",
    "compress_with",
    "keep_only",
    "overflow",
]

logger = logging.getLogger("ctxfold")

PIN_ROLES = SYSTEM_ROLES


class ReversibleOptions(TypedDict, total=False):
    """Reversible compaction (see :class:`ctxfold.reversible.RoundSettings`)."""

    reversible: bool
    store: Any
    reference_share: float
    max_references: int | None


class SharedOptions(ReversibleOptions, total=False):
    """What every strategy that selects messages takes."""

    pin_roles: Iterable[str]
    overflow: Overflow
    recall_share: float | None
    recall_embedder: Any
    redact: bool


class CachedOptions(SharedOptions, total=False):
    """...and, for a strategy that calls a model, where its outputs are cached."""

    cache: Any


# ------------------------------------------------------------------------- checks


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


def check_count(label: str, value: object) -> int:
    """Validate a count: an ``int`` >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{label} must be an integer >= 0, got {value!r}")
    return value


def check_cache(cache: object) -> Cache | None:
    """A ``cache`` option: ``None``/``True`` -> the shared default cache, ``False`` ->
    no cache, anything else as :func:`ctxfold.storage.get_cache` reads it."""
    if cache is False:
        return None
    return get_cache(None if cache is True else cache)  # type: ignore[arg-type]


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


def alternate(
    conv: Conversation,
    done: Compaction,
    step: str,
    policy: Overflow,
    protect: Iterable[int] = (),
    *,
    make_room: bool = True,
) -> Compaction:
    """``done`` as a request strict chat APIs accept, when the input is one: where
    leaving messages out put two turns of one role side by side (or an assistant turn
    right after the system block), a one-line note in the other role says how many
    messages were left out there, so turns alternate and the conversation opens with
    the user. When the notes do not fit, the oldest kept units make room for them (never
    a pinned message, a note, a unit in ``protect`` or the newest unit); when nothing
    can, ``policy`` decides. ``make_room=False`` returns the notes over the budget
    instead, for a strategy that selects again with less room."""
    if turn_order_problems(conv.messages):
        return done  # the input itself is not a strict request: nothing to keep
    where = {id(m): i for i, m in enumerate(conv.messages)}
    unit_of = {i: u for u in conv.grouping.units for i in u.indices}
    fixed = {unit_of[i].start for i in protect}
    if done.messages and id(done.messages[-1]) in where:
        fixed.add(unit_of[where[id(done.messages[-1])]].start)
    out = list(done.messages)
    hidden = {d.index for d in done.trace if d.tokens_after == 0}
    dropped: set[int] = set()
    while True:
        bridged, back = _bridged(conv, out, where, hidden)
        need = conv.counter.count_messages(bridged)
        if len(bridged) == len(out) or need <= conv.budget or not make_room:
            break
        spare = next(
            (
                unit_of[where[id(m)]]
                for m in out
                if id(m) in where
                and m.role not in SYSTEM_ROLES
                and unit_of[where[id(m)]].start not in fixed
            ),
            None,
        )
        if spare is None:
            overflow(policy, required=need, budget=conv.budget, what="notes that keep turns apart")
            break
        dropped.update(spare.indices)
        hidden.update(spare.indices)
        out = [m for m in out if where.get(id(m), -1) not in spare.indices]
    trace = [
        Decision(d.index, "dropped", "over_budget", d.tokens_before, 0, step)
        if d.index in dropped
        else Decision(d.index, "kept", "turn_order", d.tokens_before, d.tokens_before, step)
        if d.index in back
        else d
        for d in done.trace
    ]
    return Compaction(bridged, trace, done.savings)


def _bridged(
    conv: Conversation, out: list[Message], where: dict[int, int], hidden: set[int]
) -> tuple[list[Message], set[int]]:
    """``out`` with a turn of the other role wherever two turns of one role meet (or an
    assistant turn follows the system block), and the input indexes brought back for
    it: the left-out message right before, when it has that role and costs no more
    than a note (a real turn says more), else a note: ``[ctxfold: 3 earlier messages
    left out]``."""
    messages, tokens = conv.messages, conv.tokens
    result: list[Message] = []
    back: set[int] = set()
    last_at = -1  # the input index of the newest input message so far
    for m in out:
        before = result[-1].role if result else None
        at = where.get(id(m))
        if clashes(before, m.role):
            gap = (at - last_at - 1) if at is not None else 0
            role = "assistant" if m.role == "user" else "user"
            what = f"{earlier(gap)} left out" if gap > 0 else "earlier messages left out"
            note = note_message(role, "note", what, "", left_out=gap)
            j = at - 1 if at is not None else -1  # the message right before, if left out
            real = (
                j
                if j > last_at
                and j in hidden
                and messages[j].role == role
                and not messages[j].tool_calls
                and tokens[j] <= conv.counter.count_message(note)
                else None
            )
            if real is None:
                result.append(note)
            else:
                result.append(messages[real])
                back.add(real)
        result.append(m)
        if at is not None:
            last_at = at
    return result, back


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
