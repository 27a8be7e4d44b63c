"""The compressor contract: what every compressor promises, what a strategy is handed
and what it hands back.

- :class:`Compressor` is what users call: ``compress`` / ``acompress``.
- :class:`Strategy` is a compressor whose selection can be run on its own, through the
  public :meth:`Strategy.compact`, so that layers such as reversible compaction wrap it
  without reaching into it. It declares what those layers need to know: the roles it
  pins, its overflow policy, and whether its output lists the identifiers it folds.
- :class:`Conversation` is what ``compact`` is handed: the messages with their token
  counts, units and budget, counted once. :class:`Compaction` is what it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from .messages import Message
from .result import CompressionResult, Decision, from_user
from .tokens import TokenCounter
from .units import Grouping, Unit, split_pinned

__all__ = [
    "Compaction",
    "Compressor",
    "Conversation",
    "CounterSpec",
    "MessageLike",
    "Overflow",
    "Pinned",
    "Prepares",
    "Strategy",
    "WordCounts",
]

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


class Pinned(NamedTuple):
    """A conversation split by a strategy's pinned roles: the pinned one-message units
    (indexes), the other units in order, and what the pinned part costs (with the
    conversation's own overhead)."""

    indexes: list[int]
    free: list[Unit]
    cost: int


@dataclass(frozen=True)
class WordCounts:
    """In how many messages of a whole conversation each content word occurs: the
    rarity a strategy scores by when it is handed only part of the conversation (a
    session's compaction sees its last note and the messages since), so that a word
    is as rare in every compaction as in the conversation."""

    documents: int
    frequency: Mapping[str, int]


@dataclass(frozen=True)
class Conversation:
    """A history known to exceed ``budget``, as a strategy is handed it: the messages,
    each one's tokens, the units (a unit is never split) and the counter."""

    messages: list[Message]
    tokens: list[int]
    grouping: Grouping
    budget: int
    counter: TokenCounter
    overhead: int = field(default=0)  # the tokens of an empty conversation
    rarity: WordCounts | None = None  # of the whole conversation, when this is a part
    task: str = ""  # what the user first said in the whole conversation, when this is a
    # part that may have folded it (a session's compaction sees its last note instead)

    @classmethod
    def of(
        cls,
        messages: list[Message],
        *,
        budget: int,
        counter: TokenCounter,
        grouping: Grouping,
        rarity: WordCounts | None = None,
        tokens: Sequence[int] | None = None,
        task: str = "",
    ) -> Conversation:
        """Count every message once; ``tokens``: their counts when the caller knows
        them already (a session keeps its history's counts), which must be what
        ``counter.count_message`` gives each."""
        if tokens is not None and len(tokens) != len(messages):
            raise ValueError(f"{len(tokens)} token counts given for {len(messages)} messages")
        counts = [counter.count_message(m) for m in messages] if tokens is None else list(tokens)
        overhead = counter.count_messages([])
        return cls(messages, counts, grouping, budget, counter, overhead, rarity, task)

    def user_task(self) -> str:
        """What the user first said: :attr:`task`, else this part's first user message
        (not a note), else nothing."""
        return self.task or next((m.text for m in self.messages if from_user(m)), "")

    def with_budget(self, budget: int) -> Conversation:
        """The same conversation, to fit another budget."""
        return replace(self, budget=budget)

    def pinned(self, roles: Sequence[str]) -> Pinned:
        """The one-message units of ``roles`` (never an earlier round's note), the other
        units, and the pinned part's cost."""
        indexes, free = split_pinned(self.messages, self.grouping, roles)
        return Pinned(indexes, free, self.overhead + sum(self.tokens[i] for i in indexes))

    def cost(self, unit: Unit) -> int:
        """The tokens of one unit's messages."""
        return sum(self.tokens[i] for i in unit.indices)


class Compaction(NamedTuple):
    """What a strategy's selection returns: the output messages, one decision per input
    message, and the tokens each step saved (``{"whitespace": 126, ...}``)."""

    messages: Sequence[Message]
    trace: Sequence[Decision]
    savings: Mapping[str, int]


@runtime_checkable
class Strategy(Compressor, Protocol):
    """A compressor whose selection layers can wrap (reversible compaction does).

    ``pin_roles`` are the roles it always keeps, ``overflow`` its policy when they
    cannot fit, and ``lists_identifiers`` whether its output lists the identifiers of
    what it folds (``auto``'s note does: a reversible round then adds no reference list
    of its own).
    """

    @property
    def pin_roles(self) -> tuple[str, ...]:
        """Roles whose messages are always kept."""
        ...

    @property
    def overflow(self) -> Overflow:
        """What happens when the pinned content cannot fit."""
        ...

    @property
    def lists_identifiers(self) -> bool:
        """Whether the output lists the identifiers of what was folded."""
        ...

    def compact(self, conversation: Conversation) -> Compaction:
        """Select for ``conversation.budget``: the strategy itself, without the
        contract's bookkeeping (stats, hooks) or any layer around it."""
        ...


@runtime_checkable
class Prepares(Protocol):
    """A strategy that can do part of its work on messages as they arrive (``auto``
    analyses each message alone, memoized by content): a :class:`ctxfold.Session` calls
    it on new messages, so that a compaction does only what depends on the whole."""

    def prepare(self, messages: Sequence[Message], tokens: Sequence[int]) -> None:
        """Work ahead on ``messages`` (``tokens``: what each costs)."""
        ...
