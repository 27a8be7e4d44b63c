"""The expand tool as a LangChain tool."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

import ctxfold
from ctxfold.reversible import ExpandTool
from ctxfold.storage import VerbatimStore

__all__ = ["as_langchain_tool", "expand_tool"]


def expand_tool(store: VerbatimStore | str | None = None, **options: Any) -> BaseTool:
    """:func:`ctxfold.expand_tool` (same ``options``: ``max_tokens``, ``counter``,
    ``name``, ``redact``) as a LangChain tool, sync and async: bind it to the model
    beside a reversible history (``model.bind_tools([expand_tool(store)])``, or
    ``create_agent(..., tools=[...])``) so that it can read any folded original.
    (:class:`CompressionMiddleware` gives its agent one of its own.)

    Its answers mask every credential whenever ``store`` holds originals that
    ``redact=True`` stored (the default, ``redact=None``); ``redact=False`` shows them
    to the model even then."""
    return as_langchain_tool(ctxfold.expand_tool(store, **options))


def as_langchain_tool(tool: ExpandTool) -> BaseTool:
    """``tool`` as a LangChain tool, sync and async, with its name, description and
    argument schema."""

    def run(id: str = "", page: int = 1, query: str = "") -> str:
        return tool(id, page, query)

    async def arun(id: str = "", page: int = 1, query: str = "") -> str:
        return await tool.acall(id, page, query)

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=tool.name,
        description=tool.description,
        args_schema=tool.parameters,
    )
