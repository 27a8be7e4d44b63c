"""``CompressionMiddleware``: an agent made by ``langchain.agents.create_agent`` sends
its model the compressed history, while its state keeps every message."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Annotated, Any, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command
from typing_extensions import NotRequired, Unpack

from ctxfold.exceptions import ConfigurationError
from ctxfold.session import CompactionOptions
from ctxfold.storage import VerbatimStore

from ._budget import Budget, BudgetSpec
from ._models import tool_schema_tokens
from ._options import check_settings
from ._threads import STATE_KEY, ThreadExpandTool, ThreadViews, View, thread_of
from ._tools import as_langchain_tool

__all__ = ["CompressionMiddleware", "CompressionState"]


class CompressionState(AgentState[Any]):
    """The agent state with the thread's compaction record, private to the middleware
    (left out of the agent's input and output schemas, kept in its checkpoints)."""

    ctxfold: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]


Handler = Callable[[ModelRequest[Any]], ModelResponse[Any]]
AsyncHandler = Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]


class CompressionMiddleware(AgentMiddleware[CompressionState, Any, Any]):
    """Compress what an agent's model sees to ``budget`` tokens, on every model call.

    ::

        agent = create_agent(model, tools, middleware=[CompressionMiddleware(budget=8000)],
                             checkpointer=InMemorySaver())

    The model receives the system prompt, the tool schemas and the history within
    ``budget`` tokens, a tool call never split from its results and in the strict
    turn order chat APIs require; the agent's state and its checkpoints keep every
    message. The thread's compaction (its compacted prefix, note and round id) is
    stored in the private state field ``ctxfold``: between compactions each call is
    the last one plus the new messages (a cache-stable prefix), and a thread rebuilt
    from its state (evicted from ``max_threads``, or run by a new middleware) takes the
    compaction up instead of making it again. The record is signed with the key of
    the process's sessions and checked against the thread's messages
    (:meth:`ctxfold.Session.resume`): one edited in the checkpoint, or made by another
    process (after a restart, on another worker), is never sent to the model; the
    thread's history is compacted afresh, once, and the new record kept.

    When the model's responses report their input tokens (``usage_metadata``) and the
    provider counts a call at more tokens than ctxfold did (another tokenizer: Claude's,
    Gemini's), the thread's later calls fit the budget by the provider's count: the
    room is scaled down by the ratio the last report showed.

    When the newest message is the user's and asks something, the passages of the
    older history it recalls are shown at its head (see :meth:`ctxfold.Session.render`).

    ``budget`` is tokens (``8000`` or ``("tokens", 8000)``) or, as
    ``SummarizationMiddleware`` takes it, ``("fraction", 0.8)`` of the context window
    of the model each call goes to (``request.model.profile["max_input_tokens"]``; a
    model without one is a :class:`ctxfold.ConfigurationError` saying to pass tokens).

    The agent gets a tool, ``expand`` (``expand_tool=False``: none), that the model
    calls with the id of a round (named in the note it sees) or of an ``[expand <id>]``
    marker to read the originals, in pages of at most ``expand_max_tokens`` (default:
    a quarter of a token budget, at most 4,000), from the rounds of its own thread only.
    ``store`` is where the rounds are kept: by default a memory store per thread, kept
    while its session is; ``"sqlite:///rounds.db"``, a Redis URL or a
    :class:`ctxfold.storage.VerbatimStore` keeps them across restarts (a new process
    with the same checkpointer and store reads every round the thread had). Given that
    store, :func:`ctxfold.expand` reads them back from what the state holds, without a
    session id: ``ctxfold.expand(state["ctxfold"], store=...)`` (the newest round's
    originals), a round id, or the messages a call was sent.

    ``strategy``, ``counter``, ``cache_stable``, ``low_water``, ``high_water``,
    ``recall_share``, ``recall_embedder`` and ``redact`` are those of :class:`ctxfold.Session`
    (a summarizer model goes in the strategy:
    ``strategy=("auto", {"summarizer": summarizer_from(model)})``, its calls tagged
    so they stay out of the agent's stream). Sessions of the ``max_threads`` threads
    used last stay in memory; another is rebuilt from its state when it returns.
    """

    state_schema = CompressionState

    def __init__(
        self,
        budget: BudgetSpec,
        *,
        max_threads: int = 256,
        store: VerbatimStore | str | None = None,
        expand_tool: bool = True,
        expand_max_tokens: int | None = None,
        **options: Unpack[CompactionOptions],
    ) -> None:
        super().__init__()
        check_settings(CompressionMiddleware.__init__, options)
        #: The budget as given: tokens, or a fraction of the model's context window.
        self.context_budget = Budget.of(budget)
        self.views = ThreadViews(self.context_budget.tokens, max_threads, options, store)
        self._schemas: dict[tuple[int, ...], tuple[Sequence[Any], int]] = {}
        self.tools = self._expand_tools(expand_tool, expand_max_tokens)

    def _expand_tools(self, wanted: object, max_tokens: int | None) -> list[BaseTool]:
        """The expand tool of the agent's threads, when ``wanted``."""
        if not isinstance(wanted, bool):
            raise ConfigurationError(f"expand_tool must be True or False, got {wanted!r}")
        if not wanted:
            return []
        page = self.context_budget.page_tokens() if max_tokens is None else max_tokens
        return [as_langchain_tool(ThreadExpandTool(self.views, max_tokens=page))]

    @property
    def budget(self) -> int | None:
        """Tokens each model call may receive: system prompt, tool schemas, history
        (``None`` for a fraction of the model's window, resolved at each call)."""
        return self.context_budget.tokens

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Handler
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Send the model the compressed view; store a new compaction in the state."""
        thread = thread_of()
        view = self._view(request, thread)
        response = handler(_compressed(request, view))
        self._anchor(thread, view, response)
        return _with_record(response, view)

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: AsyncHandler
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """:meth:`wrap_model_call` for an async agent (the render in a worker thread)."""
        thread = thread_of()
        view = await asyncio.to_thread(self._view, request, thread)
        response = await handler(_compressed(request, view))
        self._anchor(thread, view, response)
        return _with_record(response, view)

    def _view(self, request: ModelRequest[Any], thread: Hashable) -> View:
        fixed = self.views.fixed_tokens(request.system_message, self._schema_tokens(request.tools))
        saved = request.state.get(STATE_KEY)
        if not isinstance(saved, Mapping):
            saved = None
        budget = self.context_budget.for_model(request.model)
        return self.views.view(thread, request.messages, fixed=fixed, saved=saved, budget=budget)

    def _anchor(
        self, thread: Hashable, view: View, response: ModelResponse[Any] | AIMessage
    ) -> None:
        """Anchor the thread's budget on the input tokens the provider reported for
        this call (``usage_metadata``), when the response carries them."""
        answers = [response] if isinstance(response, AIMessage) else response.result
        for answer in answers:
            usage = getattr(answer, "usage_metadata", None) or {}
            reported = usage.get("input_tokens")
            if isinstance(reported, int) and not isinstance(reported, bool):
                counted = view.fixed + view.result.stats.tokens_after
                self.views.anchor(thread, counted, reported)
                return

    def _schema_tokens(self, tools: Sequence[BaseTool | dict[str, Any]]) -> int:
        """Tokens of the tool schemas the model receives, counted once per tool set."""
        key = tuple(id(t) for t in tools)
        hit = self._schemas.get(key)
        if hit is None:
            hit = (tools, tool_schema_tokens(self.views.counter, tools))
            if len(self._schemas) >= 64:
                self._schemas.clear()
            self._schemas[key] = hit  # holds the tools, so their ids stay theirs
        return hit[1]


def _compressed(request: ModelRequest[Any], view: View) -> ModelRequest[Any]:
    return request.override(messages=cast("list[AnyMessage]", view.messages))


def _with_record(
    response: ModelResponse[Any] | AIMessage, view: View
) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
    """The model's response, with the new compaction record as a state update."""
    if view.record is None:
        return response
    if isinstance(response, AIMessage):
        response = ModelResponse(result=[response])
    return ExtendedModelResponse(response, Command(update={STATE_KEY: view.record}))
