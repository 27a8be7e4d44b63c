"""``pre_model_hook``: the compressed view for a LangGraph graph built by hand (or the
``pre_model_hook=`` of LangGraph's prebuilt agent)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import SystemMessage
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.tools import BaseTool
from typing_extensions import Unpack

from ctxfold.exceptions import ConfigurationError
from ctxfold.session import CompactionOptions

from ._convert import as_langchain_messages
from ._models import tool_schema_tokens
from ._options import check_settings
from ._threads import ThreadViews, thread_of

__all__ = ["pre_model_hook"]

#: The key of the view in the hook's update, as LangGraph's prebuilt agent reads it.
VIEW_KEY = "llm_input_messages"


def pre_model_hook(
    budget: int,
    *,
    messages_key: str = "messages",
    state_key: str | None = None,
    system_prompt: str | SystemMessage | None = None,
    tools: Sequence[BaseTool | dict[str, Any]] = (),
    max_threads: int = 256,
    **options: Unpack[CompactionOptions],
) -> Runnable[Mapping[str, Any], dict[str, Any]]:
    """A graph node that puts the state's history, compressed to ``budget`` tokens,
    under ``"llm_input_messages"`` and leaves ``messages`` whole::

        builder.add_node("compress", pre_model_hook(8000, system_prompt=PROMPT, tools=tools))
        builder.add_edge("compress", "agent")  # the agent calls its model with PROMPT,
                                                # tools and state["llm_input_messages"]

    The view is what :class:`CompressionMiddleware` sends (one session per thread,
    cache-stable, a tool call never split from its results). ``system_prompt`` and
    ``tools`` are what the model call adds to the view: they are counted against the
    budget, not added. With ``state_key`` (a state field of type ``dict | None``,
    such as the one :class:`CompressionState` declares), the thread's compaction is
    stored there too, so a restarted process takes it up rather than compacting
    again when the record verifies under its store's key (a persistent ``store=``;
    the default memory store's key is the process's own, so a new process compacts
    afresh once). Settings are those of :class:`ctxfold.Session`; a bad one raises
    :class:`ctxfold.ConfigurationError` here, when the node is made, and a budget the
    system prompt and tools fill a :class:`ctxfold.BudgetError`.
    """
    check_settings(pre_model_hook, options)
    if not isinstance(messages_key, str) or not messages_key:
        raise ConfigurationError(f"messages_key must be a state key, got {messages_key!r}")
    if state_key is not None and (not isinstance(state_key, str) or not state_key):
        raise ConfigurationError(f"state_key must be a state key or None, got {state_key!r}")
    views = ThreadViews(budget, max_threads, options)
    if isinstance(system_prompt, str):
        system_prompt = SystemMessage(system_prompt)
    fixed = views.fixed_tokens(system_prompt, tool_schema_tokens(views.counter, tools))
    views.check_room(fixed)

    def hook(state: Mapping[str, Any]) -> dict[str, Any]:
        return _update(state, thread_of())

    async def ahook(state: Mapping[str, Any]) -> dict[str, Any]:
        return await asyncio.to_thread(_update, state, thread_of())

    def _update(state: Mapping[str, Any], thread: Any) -> dict[str, Any]:
        if not isinstance(state, Mapping) or messages_key not in state:
            raise ConfigurationError(
                f"pre_model_hook reads the history from the state key {messages_key!r}, "
                f"which the state does not have; pass messages_key="
            )
        messages = as_langchain_messages(state[messages_key])
        saved = state.get(state_key) if state_key else None
        view = views.view(thread, messages, fixed=fixed, saved=saved)
        update: dict[str, Any] = {VIEW_KEY: view.messages}
        if state_key and view.record is not None:
            update[state_key] = view.record
        return update

    return RunnableLambda(hook, afunc=ahook, name="ctxfold_pre_model_hook")
