"""``compress_messages``: ctxfold's compression as a LangChain function and Runnable,
shaped like ``trim_messages``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, overload

from langchain_core.callbacks import CallbackManagerForChainRun
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.tracers.base import BaseTracer

from ctxfold import Compression, CompressionResult
from ctxfold.contract import CounterSpec
from ctxfold.recall import Query

from ._convert import from_langchain, to_langchain

__all__ = ["compress_messages"]


@overload
def compress_messages(
    messages: None = None,
    *,
    budget: int,
    strategy: Any = "auto",
    counter: CounterSpec = None,
    query: Query = None,
    **options: Any,
) -> Runnable[Any, Any]: ...


@overload
def compress_messages(
    messages: Any,
    *,
    budget: int,
    strategy: Any = "auto",
    counter: CounterSpec = None,
    query: Query = None,
    **options: Any,
) -> Any: ...


def compress_messages(
    messages: Any = None,
    *,
    budget: int,
    strategy: Any = "auto",
    counter: CounterSpec = None,
    query: Query = None,
    **options: Any,
) -> Any:
    """Compress LangChain messages to at most ``budget`` tokens, as
    :func:`ctxfold.compress` does (tool calls never split from their results, the
    output a request strict chat APIs accept).

    Called with messages (a list in any form LangChain accepts, a prompt value, or a
    dict with a ``"messages"`` key), it returns the compressed list of LangChain
    messages (for a dict: the dict with its messages compressed). Called without, it
    returns a Runnable that does the same, for a chain::

        chain = prompt | compress_messages(budget=4000) | model

    ``strategy`` is any form :func:`ctxfold.compress` takes: a strategy or profile
    name (``"quality"``), a class or instance, ``(name, {options})`` or a dict.

    ``query`` is what the model is about to answer (default: the last message when it
    is the user's and asks; ``False``: none): the passages of the older history it
    recalls are shown at the head of the question (see :func:`ctxfold.compress`).

    As a Runnable, it puts the result's stats (``ctxfold``: tokens before and after,
    ratio, decision counts, the round's id) in its run's metadata, so a LangSmith
    trace shows what each call folded.

    The budget, strategy, counter and options are checked here, once: a bad one raises
    :class:`ctxfold.ConfigurationError` before any message is read. Raises
    :class:`ctxfold.BudgetError` when what must be kept cannot fit, and
    :class:`ctxfold.InvalidMessageError` for what LangChain cannot read as a message.
    """
    compression = Compression(budget, strategy=strategy, counter=counter, query=query, **options)

    def run(value: Any, run_manager: CallbackManagerForChainRun | None = None) -> Any:
        if isinstance(value, Mapping) and "messages" in value:
            return {**value, "messages": run(value["messages"], run_manager)}
        msgs = from_langchain(value)
        result = compression(msgs)
        if run_manager is not None:
            annotate(run_manager, result)
        out: list[BaseMessage] = to_langchain(result.messages)
        return out

    if messages is None:
        return RunnableLambda(run, name="compress_messages")
    return run(messages)


def annotate(run_manager: CallbackManagerForChainRun, result: CompressionResult) -> None:
    """Put the compression's stats and decision counts in the metadata of the run
    ``run_manager`` reports to, so a tracer (LangSmith's) shows what was folded."""
    stats = {
        **result.stats.as_dict(),
        "decisions": result.decision_counts(),
        "round_id": result.round_id,
    }
    key = str(run_manager.run_id)
    for handler in run_manager.handlers:
        if isinstance(handler, BaseTracer):
            traced = handler.run_map.get(key)
            if traced is not None:
                traced.add_metadata({"ctxfold": stats})
