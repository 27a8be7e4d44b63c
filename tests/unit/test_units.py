from __future__ import annotations

from hypothesis import given, settings

from conftest import example_conversations
from ctxfold import Message, ToolCall, group_units
from ctxfold.testing.strategies import conversations


def call(i: str) -> ToolCall:
    return ToolCall(i, "bash", "{}")


def test_assistant_with_its_results_is_one_unit():
    msgs = [
        Message("system", "s"),
        Message("user", "u"),
        Message("assistant", None, tool_calls=(call("a"), call("b"))),
        Message("tool", "ra", tool_call_id="a"),
        Message("tool", "rb", tool_call_id="b"),
        Message("assistant", "done"),
    ]
    g = group_units(msgs)
    assert [(u.start, u.end, u.kind) for u in g.units] == [
        (0, 1, "system"),
        (1, 2, "user"),
        (2, 5, "tool_exchange"),
        (5, 6, "assistant"),
    ]
    assert g.dangling_calls == () and g.orphan_results == () and g.warnings() == ()


def test_dangling_calls_and_orphan_results_are_reported_not_fatal():
    msgs = [
        Message("tool", "lost", tool_call_id="zz"),
        Message("user", "go"),
        Message("assistant", None, tool_calls=(call("a"), call("b"))),
        Message("tool", "ra", tool_call_id="a"),
        Message("assistant", None, tool_calls=(call("c"),)),
    ]
    g = group_units(msgs)
    assert [(u.start, u.end, u.kind) for u in g.units] == [
        (0, 1, "orphan_result"),
        (1, 2, "user"),
        (2, 4, "tool_exchange"),
        (4, 5, "assistant"),
    ]
    assert g.dangling_calls == ((2, "b"), (4, "c"))
    assert g.orphan_results == (0,)
    assert len(g.warnings()) == 3 and "has no result" in g.warnings()[0]


def test_a_late_result_pulls_everything_between_into_the_unit():
    msgs = [
        Message("assistant", None, tool_calls=(call("a"),)),
        Message("user", "while you wait"),
        Message("tool", "ra", tool_call_id="a"),
        Message("assistant", "ok"),
    ]
    assert [(u.start, u.end) for u in group_units(msgs).units] == [(0, 3), (3, 4)]


def test_reused_call_ids_bind_to_the_latest_call():
    msgs = [
        Message("assistant", None, tool_calls=(call("x"),)),
        Message("tool", "1", tool_call_id="x"),
        Message("assistant", None, tool_calls=(call("x"),)),
        Message("tool", "2", tool_call_id="x"),
    ]
    assert [(u.start, u.end) for u in group_units(msgs).units] == [(0, 2), (2, 4)]


def test_units_on_real_conversations_partition_the_history():
    for _, msgs in example_conversations():
        g = group_units(msgs)
        assert [i for u in g.units for i in u.indices] == list(range(len(msgs)))


@settings(max_examples=60, deadline=None)
@given(conversations())
def test_units_partition_and_never_separate_a_call_from_its_result(msgs):
    g = group_units(msgs)
    assert [i for u in g.units for i in u.indices] == list(range(len(msgs)))
    unit_of = {i: k for k, u in enumerate(g.units) for i in u.indices}
    for j, m in enumerate(msgs):
        if m.role == "tool" and j not in g.orphan_results:
            owner = max(
                i for i in range(j) if any(c.id == m.tool_call_id for c in msgs[i].tool_calls)
            )
            assert unit_of[owner] == unit_of[j]
