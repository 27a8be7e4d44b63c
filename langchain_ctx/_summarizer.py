"""ctxfold's extractive note as the ``summarizer`` of LangChain's
``SummarizationMiddleware``: the summary in milliseconds, with no model call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableLambda

import ctxfold
from ctxfold.contract import CounterSpec

from ._convert import from_langchain

__all__ = ["note_summarizer"]


def note_summarizer(
    max_tokens: int = 2000, *, counter: CounterSpec = "o200k_base", **options: Any
) -> Runnable[Sequence[BaseMessage], str]:
    """A summarizer for ``SummarizationMiddleware(model, summarizer=...)``: the
    messages it replaces, condensed by :func:`ctxfold.condense` into at most
    ``max_tokens`` tokens (who said what, condensed, and the identifiers of what was
    folded), sync and async, deterministic, no model call.

    The middleware trims what it hands a summarizer to ``trim_tokens_to_summarize``
    tokens first (4,000 by default); pass ``trim_tokens_to_summarize=None`` so the
    note sees everything it replaces. ``options`` go to ``auto`` (``reversible=True``
    and a persistent ``store`` keep the originals, readable by the round's id with
    :func:`ctxfold.expand` or :func:`langchain_ctx.expand_tool`).
    """
    ctxfold.condense([], max_tokens=max_tokens, counter=counter, **options)  # checks now

    def summary(messages: Sequence[BaseMessage]) -> str:
        return ctxfold.condense(
            from_langchain(list(messages)), max_tokens=max_tokens, counter=counter, **options
        )

    async def asummary(messages: Sequence[BaseMessage]) -> str:
        return summary(messages)  # milliseconds of CPU: no thread to hop to

    return RunnableLambda(summary, afunc=asummary, name="ctxfold_note_summarizer")
