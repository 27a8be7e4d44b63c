"""A trace kept as columns reads as the tuple of its decisions, and its copies hold."""

from __future__ import annotations

import pickle

import pytest

from ctxfold.result import Decision, Trace, flagged

DECISIONS = (
    Decision(0, "kept", "pinned:system", 40, 40, "auto"),
    Decision(1, "dropped", "folded:note", 300, 0, "auto", ("adapter:logs",)),
    Decision(2, "compressed", "selected", 120, 45, "auto", ("layer:json",)),
    Decision(3, "kept", "recent", 80, 80, "auto"),
)


def _trace() -> Trace:
    trace = Trace()
    trace.add("kept", "recent", "auto", [40, 300, 120, 80])
    trace[0] = DECISIONS[0]
    trace[1] = DECISIONS[1]
    trace[2] = DECISIONS[2]
    return trace


def test_a_trace_reads_as_its_decisions() -> None:
    trace = _trace()
    assert len(trace) == 4
    assert tuple(trace) == DECISIONS
    assert trace == DECISIONS and trace == list(DECISIONS)
    assert DECISIONS.__eq__(trace) is NotImplemented  # so a tuple asks the trace
    assert trace != DECISIONS[:3] and trace != (*DECISIONS[:3], DECISIONS[0])
    assert [trace[i] for i in range(-4, 4)] == [*DECISIONS, *DECISIONS]
    assert trace[1:3] == DECISIONS[1:3]
    assert trace.action(1) == "dropped"
    assert hash(trace) == hash(DECISIONS)
    assert pickle.loads(pickle.dumps(trace)) == trace
    with pytest.raises(IndexError):
        trace[4]
    with pytest.raises(ValueError, match="message 2 cannot stand at 3"):
        trace[3] = DECISIONS[2]


def test_copies_and_flagged_traces_are_not_reached_by_later_changes() -> None:
    trace = _trace()
    copy = trace.copy()
    marked = flagged(trace, [3, 1], "recalled")
    trace[3] = Decision(3, "dropped", "folded:note", 80, 0, "auto")
    trace.add("kept", "recent", "auto", [7])
    assert copy == DECISIONS
    assert marked == (
        DECISIONS[0],
        Decision(1, "dropped", "folded:note", 300, 0, "auto", ("adapter:logs", "recalled")),
        DECISIONS[2],
        Decision(3, "kept", "recent", 80, 80, "auto", ("recalled",)),
    )
    assert isinstance(marked, Trace)
    assert len(trace) == 5 and trace[4] == Decision(4, "kept", "recent", 7, 7, "auto")
