"""Test doubles for LangChain code that uses ctxfold: a scripted chat model that records
what it is sent, and the replay of a recorded agent conversation through an agent.

::

    replay = Replay.of(messages)  # OpenAI dicts or ctxfold messages of one trajectory
    agent = create_agent(replay.model, replay.tools, system_prompt=replay.system_prompt,
                         middleware=[CompressionMiddleware(budget=4000)],
                         checkpointer=InMemorySaver())
    state = replay.run(agent, {"configurable": {"thread_id": "t1"}})
    replay.model.calls  # what each model call received: messages and tool schemas

No network and no API key: the model answers with the recorded assistant messages, the
tools with the recorded tool results.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from ctxfold import InvalidMessageError, Message
from ctxfold.contract import CounterSpec
from ctxfold.tokens import TokenCounter, get_counter
from ctxfold.validity import check_tool_structure, tool_pairing_problems, turn_order_problems
from ctxfold.wire.openai import as_messages

from ._convert import from_langchain, to_langchain
from ._models import tool_schema_tokens

__all__ = ["END_OF_REPLAY", "NO_RESULT", "ModelCall", "Replay", "ScriptedChatModel"]

#: What the scripted model answers once its script is spent.
END_OF_REPLAY = "(end of the recorded conversation)"
#: What a replayed tool returns for a call the recording has no result for.
NO_RESULT = "(no result was recorded for this call)"


@dataclass(frozen=True)
class ModelCall:
    """What one call of a :class:`ScriptedChatModel` received."""

    messages: list[BaseMessage]
    tools: list[dict[str, Any]]

    def tokens(self, counter: CounterSpec = "o200k_base") -> int:
        """Tokens the call took: its messages and its tool schemas."""
        return self._tokens(get_counter(counter), from_langchain(self.messages))

    def _tokens(self, count: TokenCounter, messages: list[Message]) -> int:
        return count.count_messages(messages) + tool_schema_tokens(count, self.tools)

    def problems(
        self, budget: int, counter: CounterSpec = "o200k_base", *, strict: bool = True
    ) -> list[str]:
        """Why the call was not a valid request within ``budget`` tokens: over the
        budget, a tool call split from its results, or (with ``strict``, for a history
        that keeps it) a turn order strict chat APIs refuse; ``[]`` when it was."""
        messages = from_langchain(self.messages)
        found = tool_pairing_problems(messages)
        if strict:
            found += turn_order_problems(messages)
        tokens = self._tokens(get_counter(counter), messages)
        if tokens > budget:
            found.append(f"{tokens} tokens, over the budget of {budget}")
        try:
            check_tool_structure(messages)
        except InvalidMessageError as exc:
            found.append(str(exc))
        return found


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers with ``responses`` in turn (then ``END_OF_REPLAY``)
    and records every call in :attr:`calls`; ``bind_tools`` records the tool schemas
    each call was given. Safe to call from several threads."""

    responses: list[AIMessage] = Field(default_factory=list)
    calls: list[ModelCall] = Field(default_factory=list)
    #: When set, each answer reports ``usage_metadata`` as a provider whose tokenizer
    #: counts this many tokens for each o200k_base one (input: messages and tools).
    provider_scale: float | None = None
    _next: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "ctxfold-scripted"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[Any, AIMessage]:
        """The model with ``tools`` (as OpenAI schemas) passed to every call."""
        schemas = [convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=schemas, tool_choice=tool_choice, **kwargs)

    @property
    def remaining(self) -> int:
        """How many scripted responses are left."""
        return len(self.responses) - self._next

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            call = ModelCall(list(messages), list(kwargs.get("tools") or []))
            self.calls.append(call)
            k = self._next
            self._next += 1
        answer = self.responses[k] if k < len(self.responses) else AIMessage(END_OF_REPLAY)
        answer = answer.model_copy(deep=True)
        if self.provider_scale is not None:
            reported = math.ceil(self.provider_scale * call.tokens())
            answer.usage_metadata = UsageMetadata(
                input_tokens=reported,
                output_tokens=1,
                total_tokens=reported + 1,
                input_token_details={},
                output_token_details={},
            )
        return ChatResult(generations=[ChatGeneration(message=answer)])


class _AnyArguments(BaseModel):
    """A replayed tool takes whatever arguments were recorded."""

    model_config = ConfigDict(extra="allow")
    tool_call_id: Annotated[str, InjectedToolCallId]


def _replayed_tool(name: str, results: dict[str, deque[str]]) -> BaseTool:
    def run(tool_call_id: str, **_: Any) -> str:
        waiting = results.get(tool_call_id)
        return waiting.popleft() if waiting else NO_RESULT  # ids may be used again later

    return StructuredTool.from_function(
        func=run,
        name=name,
        description=f"The recorded tool {name!r}.",
        args_schema=_AnyArguments,
    )


@dataclass
class Replay:
    """A recorded conversation, ready to run through an agent: the leading system
    prompt, the scripted model, one tool per recorded tool name, and the user turns
    each agent run starts with. :meth:`run` runs them all on one thread."""

    system_prompt: str | None
    model: ScriptedChatModel
    tools: list[BaseTool]
    inputs: list[list[BaseMessage]]
    recorded: list[BaseMessage] = field(repr=False)
    strict: bool = True  # the recording itself keeps the turn order strict APIs require

    @classmethod
    def of(cls, messages: Sequence[Message | dict[str, Any]]) -> Replay:
        """The replay of ``messages`` (OpenAI dicts or :class:`ctxfold.Message`)."""
        msgs = as_messages(messages)
        system = None
        if msgs and msgs[0].role == "system":
            system, msgs = msgs[0].text, msgs[1:]
        recorded = to_langchain(msgs)
        results: dict[str, deque[str]] = {}
        for m in msgs:
            if m.role == "tool" and m.tool_call_id:
                results.setdefault(m.tool_call_id, deque()).append(m.text)
        names = dict.fromkeys(c.name for m in msgs for c in m.tool_calls)
        responses = [m for m in recorded if isinstance(m, AIMessage)]
        return cls(
            system_prompt=system,
            model=ScriptedChatModel(responses=responses),
            tools=[_replayed_tool(name, results) for name in names],
            inputs=list(_runs(recorded)),
            recorded=recorded,
            strict=not turn_order_problems(as_messages(messages)),
        )

    def holds_all(self, messages: Sequence[BaseMessage]) -> bool:
        """Whether ``messages`` (an agent's final state) hold every recorded message in
        order, the results of one model turn's calls in any order (an agent runs
        them in parallel), and after them only what the replay adds: a result for a
        call the recording left open, and the closing answer."""
        held, recorded = _comparable(messages), _comparable(self.recorded)
        added = {text for _role, text, *_ in held[len(recorded) :]}
        return held[: len(recorded)] == recorded and added <= {NO_RESULT, END_OF_REPLAY}

    def budget_for(
        self, share: float, counter: CounterSpec = "o200k_base", *, expand_tool: bool = True
    ) -> int:
        """A budget that holds the system prompt and the tool schemas whole (with
        ``expand_tool``, the expand tool :class:`CompressionMiddleware` gives the agent
        too) and ``share`` of the recorded history's tokens."""
        count = get_counter(counter)
        system = [SystemMessage(self.system_prompt)] if self.system_prompt is not None else []
        tools = list(self.tools)
        if expand_tool:
            from ._agent import CompressionMiddleware  # needs the agents extra: on use

            tools += CompressionMiddleware(budget=1_000_000).tools
        fixed = count.count_messages(from_langchain(system)) + tool_schema_tokens(count, tools)
        return fixed + int(share * count.count_messages(from_langchain(self.recorded)))

    def run(self, agent: Runnable[Any, Any], config: RunnableConfig) -> dict[str, Any]:
        """Run every user turn through ``agent`` on the thread of ``config``; the final
        state."""
        state: dict[str, Any] = {}
        for turn in self.inputs:
            state = agent.invoke({"messages": turn}, config)
        return state

    async def arun(self, agent: Runnable[Any, Any], config: RunnableConfig) -> dict[str, Any]:
        """:meth:`run` through the agent's async path."""
        state: dict[str, Any] = {}
        for turn in self.inputs:
            state = await agent.ainvoke({"messages": turn}, config)
        return state


def _comparable(messages: Sequence[BaseMessage]) -> list[tuple[Any, ...]]:
    """What a replay must keep of each message, each block of tool results sorted."""
    out: list[tuple[Any, ...]] = []
    block: list[tuple[Any, ...]] = []
    for m in from_langchain(messages):
        calls = tuple((c.id, c.name, c.arguments) for c in m.tool_calls)
        shape = (m.role, m.text, m.tool_call_id, calls)
        if m.role == "tool":
            block.append(shape)
            continue
        out += sorted(block, key=str)
        block = []
        out.append(shape)
    return out + sorted(block, key=str)


def _runs(recorded: Sequence[BaseMessage]) -> Iterator[list[BaseMessage]]:
    """The input of each agent run: the messages before each model turn that the agent
    does not make itself (user turns), an empty input where the recording has two model
    turns in a row with no call between them."""
    pending: list[BaseMessage] = []
    ends_run = True  # the previous model turn ended the agent's run
    for m in recorded:
        if isinstance(m, AIMessage):
            if pending or ends_run:
                yield pending
            pending = []
            ends_run = not m.tool_calls
        elif not isinstance(m, ToolMessage):
            pending.append(m)
    if pending:
        yield pending
