"""The top-level verbs: ``ctxfold.compress`` and ``ctxfold.condense``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .contract import CounterSpec, MessageLike
from .exceptions import ConfigurationError
from .formats import read_messages
from .messages import Message, transcript
from .models.summarizers import fit_summary
from .recall import Query, check_query
from .result import CompressionResult, is_note
from .strategies.base import check_takes, compress_with
from .strategies.registry import resolve_strategy
from .text.fitting import fit_text
from .tokens import check_budget, get_counter

__all__ = ["Compression", "compress", "condense"]


def compress(
    messages: Iterable[MessageLike],
    *,
    budget: int,
    strategy: Any = "auto",
    counter: CounterSpec = "o200k_base",
    query: Query = None,
    **options: Any,
) -> CompressionResult:
    """Compress a conversation to at most ``budget`` tokens.

    Args:
        messages: OpenAI chat dicts or :class:`ctxfold.Message` objects.
        budget: the token budget for the whole conversation.
        strategy: a registered name (``"auto"``, ``"sliding_window"``), a profile
            (``"fast"``, ``"balanced"``, ``"quality"``, ``"cost"``), a compressor class
            or instance, ``(name_or_class, {options})`` or ``{"strategy": name,
            **options}``: every form :func:`ctxfold.normalize` reads but off.
        counter: an encoding or model name (``"o200k_base"``, ``"gpt-4o"``),
            ``"approx"``, a :class:`ctxfold.TokenCounter`, or a ``str -> int`` function.
        query: what the output should answer: the passages of the older history it
            recalls are kept in a recall block (see :mod:`ctxfold.recall`). Default:
            the newest user message when it is the last message and asks something
            (in an agent's run, where recall is off unless ``recall_share`` is set,
            the newest tool calls and the errors their results report); ``False``:
            no recall; any text: that query. A compressor that is no
            :class:`ctxfold.BaseCompressor` takes only ``query=None``.
        **options: passed to the strategy's constructor (over the options the
            strategy form gives).

    Returns:
        A :class:`CompressionResult`; ``result.to_openai()`` gives OpenAI dicts back.

    Raises:
        BudgetError: the content the strategy must keep cannot fit.
        ConfigurationError: an unknown strategy, counter or option.
        InvalidMessageError: a malformed message (its index is named).
    """
    compression = Compression(budget, strategy=strategy, counter=counter, query=query, **options)
    return compression(messages)


class Compression:
    """One compression's settings, checked once, as a callable: called with messages,
    it is :func:`compress` with those settings (what a chain or a wrapper keeps and
    calls on every turn).

    >>> shrink = ctxfold.Compression(4000, strategy="fast")    # doctest: +SKIP
    >>> result = shrink(messages)                               # doctest: +SKIP

    The arguments are :func:`compress`'s. A bad budget, strategy, counter, option or
    query raises :class:`ConfigurationError` here, before any message is read.
    """

    def __init__(
        self,
        budget: int,
        *,
        strategy: Any = "auto",
        counter: CounterSpec = "o200k_base",
        query: Query = None,
        **options: Any,
    ) -> None:
        self.compressor = resolve_strategy(strategy, **options)
        self.budget = check_budget(budget)
        self.counter = get_counter(counter)
        self.query = check_query(query)
        check_takes(self.compressor, self.query)

    def __call__(self, messages: Iterable[MessageLike]) -> CompressionResult:
        """``messages`` compressed to at most the budget (see :func:`compress`)."""
        return compress_with(
            self.compressor, messages, budget=self.budget, counter=self.counter, query=self.query
        )

    def __repr__(self) -> str:
        return f"Compression({self.budget}, strategy={self.compressor!r}, counter={self.counter!r})"


def condense(
    messages: Iterable[MessageLike],
    *,
    max_tokens: int,
    counter: CounterSpec = "o200k_base",
    **options: Any,
) -> str:
    """The messages as text of at most ``max_tokens`` tokens, with no model call: what
    the ``auto`` strategy keeps of them within that budget, written as a transcript
    (``speaker: text`` lines; what it folds becomes its note: who said what,
    condensed, then the identifiers of the folded messages). A summarizer for
    frameworks that replace older messages by a summary text
    (:func:`langchain_ctx.note_summarizer`). Messages that fit are given whole.

    Args:
        messages: OpenAI chat dicts or :class:`ctxfold.Message` objects.
        max_tokens: the most tokens the text may take (``counter``'s count of it).
        counter: as for :func:`compress`.
        **options: ``auto``'s options; ``reversible=True`` with a persistent
            ``store`` keeps the originals there, and the note names the round whose
            id :func:`ctxfold.expand` (or the expand tool) reads them back by.

    Raises:
        ConfigurationError: ``max_tokens`` is not a positive count, or a bad option.
    """
    count = get_counter(counter)
    msgs, _ = read_messages(messages)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ConfigurationError(f"max_tokens must be a positive token count, got {max_tokens!r}")
    options = {"pin_roles": (), "reversible": False, "overflow": "best_effort", **options}
    compressor = resolve_strategy("auto", **options)
    whole = transcript(msgs)
    if count.count_text(whole) <= max_tokens and not getattr(compressor, "redact", False):
        return whole  # (redacting, even a short history goes through compress's masking)

    def write(budget: int) -> str:
        result = compress_with(compressor, msgs, budget=budget, counter=count, query=False)
        return _written(result.messages)

    text, fits = fit_text(write, max_tokens, count)
    return text if fits else fit_summary(text, max_tokens, count)


def _written(messages: Sequence[Message]) -> str:
    """A transcript in which a note stands as its own text (its lines name their
    speakers already)."""
    return "\n".join(m.text if is_note(m) else transcript([m]) for m in messages)
