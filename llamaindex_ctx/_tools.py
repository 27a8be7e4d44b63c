"""The expand tool as a LlamaIndex tool (no postponed annotations: pydantic reads the
parameters' Annotated descriptions at run time)."""

from typing import Annotated, Any

from llama_index.core.tools import FunctionTool
from pydantic import Field

import ctxfold
from ctxfold.reversible import ExpandTool
from ctxfold.storage import VerbatimStore

__all__ = ["as_function_tool", "expand_tool"]


def expand_tool(store: VerbatimStore | str | None = None, **options: Any) -> FunctionTool:
    """:func:`ctxfold.expand_tool` (same ``options``: ``max_tokens``, ``counter``,
    ``name``, ``redact``) as a LlamaIndex ``FunctionTool``, sync and async: give it to
    an agent (``FunctionAgent(tools=[...])``) beside a reversible history so that the
    model can read any folded original. For a :class:`CompressedChatMemory`, use its
    own ``expand_tool()``.

    Its answers mask every credential whenever ``store`` holds originals that
    ``redact=True`` stored (the default, ``redact=None``); ``redact=False`` shows them
    to the model even then."""
    return as_function_tool(ctxfold.expand_tool(store, **options))


def as_function_tool(tool: ExpandTool) -> FunctionTool:
    """An expand tool as a LlamaIndex ``FunctionTool``."""
    schema = tool.parameters["properties"]

    def run(
        id: Annotated[str, Field(description=schema["id"]["description"])],
        page: Annotated[int, Field(description=schema["page"]["description"])] = 1,
    ) -> str:
        return tool(id, page)

    async def arun(id: str, page: int = 1) -> str:
        return await tool.acall(id, page)

    if not tool.searches:
        return FunctionTool.from_defaults(
            fn=run, async_fn=arun, name=tool.name, description=tool.description
        )
    asked = schema["query"]["description"]

    def run_or_search(
        id: Annotated[str, Field(description=schema["id"]["description"])] = "",
        page: Annotated[int, Field(description=schema["page"]["description"])] = 1,
        query: Annotated[str, Field(description=asked)] = "",
    ) -> str:
        return tool(id, page, query)

    async def arun_or_search(id: str = "", page: int = 1, query: str = "") -> str:
        return await tool.acall(id, page, query)

    return FunctionTool.from_defaults(
        fn=run_or_search, async_fn=arun_or_search, name=tool.name, description=tool.description
    )
