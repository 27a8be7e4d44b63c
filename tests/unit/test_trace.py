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


def test_outputs_are_matched_to_their_inputs_by_one_rule() -> None:
    """``result.sources_of``: an input shown as it is, one rewritten, a note this
    compaction wrote, an earlier round's note kept, and a recall block."""
    from ctxfold import Message
    from ctxfold.result import NOTE_KEY, RECALL_KEY, Decision, sources_of

    old_note = Message(
        "system",
        "[ctxfold round 0123456789ab]\nnotes",
        metadata={NOTE_KEY: {"what": "x", "round": "0123456789ab"}},
    )
    inputs = [
        Message("system", "sys"),
        old_note,
        Message("user", "a long question about parsing"),
        Message("assistant", "an answer"),
        Message("user", "thanks"),
    ]
    rewritten = Message("user", "a long question [...]")
    note = Message(
        "user", "[ctxfold: 1 earlier message condensed]", metadata={NOTE_KEY: {"what": "1"}}
    )
    block = Message("user", "[ctxfold recall: ...]", metadata={RECALL_KEY: {"sources": [3]}})
    # the note's copy, rewritten by this round, is no note of this round: an input
    old_copy = Message("system", old_note.text + " [expand 1]", metadata=old_note.metadata)
    out = [inputs[0], old_copy, note, rewritten, block, inputs[4]]
    trace = [
        Decision(0, "kept", "pinned:system", 2, 2, "auto"),
        Decision(1, "compressed", "shortened", 9, 9, "auto"),
        Decision(2, "compressed", "shortened", 8, 5, "auto"),
        Decision(3, "summarized", "folded:note", 4, 0, "auto"),
        Decision(4, "kept", "recent", 2, 2, "auto"),
    ]
    assert sources_of(inputs, out, trace, "fedcba987654") == [0, 1, None, 2, None, 4]
    # with this round's id on its note, the note is still this compaction's own
    ours = Message("user", note.text, metadata={NOTE_KEY: {"what": "1", "round": "fedcba987654"}})
    out[2] = ours
    assert sources_of(inputs, out, trace, "fedcba987654")[2] is None
