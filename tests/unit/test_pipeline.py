"""The one driver (``ctxfold.pipeline.run``): every public call, ``compress`` with any
strategy or profile and a session's render alike, is one call: it fires exactly one
``compaction_started`` and one ``compaction_completed``, the latter with the result
returned."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

import ctxfold
from ctxfold import Message, ToolCall
from ctxfold.strategies import PROFILES, registered

COUNTER = ctxfold.TiktokenCounter("o200k_base")


def _history(turns: int = 12) -> list[Message]:
    """A task, tool calls with results and chat turns: over a small budget."""
    out = [Message("system", "You are a careful assistant."), Message("user", "Fix the parser.")]
    for k in range(turns):
        call = ToolCall(f"c{k}", "read_file", f'{{"path": "src/mod_{k}.py"}}')
        out.append(Message("assistant", f"Reading module {k}.", tool_calls=(call,)))
        body = "\n".join(f"def handler_{k}_{j}(x):\n    return x + {j}" for j in range(12))
        out.append(Message("tool", body, tool_call_id=f"c{k}"))
    out.append(Message("user", "Which module defines handler_3_4?"))
    return out


@contextmanager
def _events() -> Iterator[list[ctxfold.hooks.Event]]:
    seen: list[ctxfold.hooks.Event] = []
    offs = [ctxfold.on(n, seen.append) for n in ("compaction_started", "compaction_completed")]
    try:
        yield seen
    finally:
        for off in offs:
            off()


def _one_call(seen: list[ctxfold.hooks.Event], result: ctxfold.CompressionResult) -> None:
    assert [e.name for e in seen] == ["compaction_started", "compaction_completed"]
    assert seen[1]["result"] is result


@pytest.mark.parametrize("name", sorted({*registered(), *PROFILES}))
def test_every_strategy_and_profile_is_one_call(name: str) -> None:
    msgs = _history()
    budget = COUNTER.count_messages(msgs) // 3
    compressor = ctxfold.normalize(name, overflow="best_effort")
    assert compressor is not None
    with _events() as seen:
        result = compressor.compress(msgs, budget=budget, counter=COUNTER)
    assert result.stats.tokens_before > budget  # it compacted
    _one_call(seen, result)


def test_a_history_that_fits_is_one_call_too() -> None:
    msgs = _history(2)
    with _events() as seen:
        result = ctxfold.compress(msgs, budget=10_000, counter=COUNTER)
    assert result.messages == tuple(msgs)
    _one_call(seen, result)


@pytest.mark.parametrize(
    "render",
    [
        lambda s: s.render(),
        lambda s: s.render(query="Which module defines handler_3_4?"),
        lambda s: s.render(query=False),
    ],
    ids=["default", "query", "no-query"],
)
def test_every_session_render_is_one_call(render: Callable[[ctxfold.Session], object]) -> None:
    msgs = _history()
    session = ctxfold.Session(budget=COUNTER.count_messages(msgs) // 3, counter=COUNTER)
    for k, m in enumerate(msgs):
        session.add(m)
        with _events() as seen:
            result = render(session)
        assert isinstance(result, ctxfold.CompressionResult)
        _one_call(seen, result)
        if k == len(msgs) - 1:
            assert result.round_id is not None  # it compacted on the way
