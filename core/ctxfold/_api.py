"""The top-level verb: ``ctxfold.compress``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .contract import Compressor, CounterSpec, MessageLike
from .recall import Query
from .result import CompressionResult
from .strategies.base import compress_with
from .strategies.registry import resolve_strategy

__all__ = ["compress"]


def compress(
    messages: Iterable[MessageLike],
    *,
    budget: int,
    strategy: str | Compressor | type[Any] = "auto",
    counter: CounterSpec = "o200k_base",
    query: Query = None,
    **options: Any,
) -> CompressionResult:
    """Compress a conversation to at most ``budget`` tokens.

    Args:
        messages: OpenAI chat dicts or :class:`ctxfold.Message` objects.
        budget: the token budget for the whole conversation.
        strategy: a registered name (``"auto"``, ``"sliding_window"``), a compressor
            class, or a compressor instance.
        counter: an encoding or model name (``"o200k_base"``, ``"gpt-4o"``),
            ``"approx"``, a :class:`ctxfold.TokenCounter`, or a ``str -> int`` function.
        query: what the output should answer: the passages of the older history it
            recalls are kept in a recall block (see :mod:`ctxfold.recall`). Default:
            the newest user message when it is the last message and asks something
            (in an agent's run, where recall is off unless ``recall_share`` is set,
            the newest tool calls and the errors their results report); ``False``:
            no recall; any text: that query. A compressor that is no
            :class:`ctxfold.BaseCompressor` takes only ``query=None``.
        **options: passed to the strategy's constructor.

    Returns:
        A :class:`CompressionResult`; ``result.to_openai()`` gives OpenAI dicts back.

    Raises:
        BudgetError: the content the strategy must keep cannot fit.
        ConfigurationError: an unknown strategy, counter or option.
        InvalidMessageError: a malformed message (its index is named).
    """
    compressor = resolve_strategy(strategy, **options)
    return compress_with(compressor, messages, budget=budget, counter=counter, query=query)
