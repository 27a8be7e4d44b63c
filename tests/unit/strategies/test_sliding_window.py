from __future__ import annotations

import pytest

from ctxfold import (
    BudgetError,
    ConfigurationError,
    Message,
    SlidingWindow,
    TiktokenCounter,
    ToolCall,
)

COUNTER = TiktokenCounter("o200k_base")


def history() -> list[Message]:
    return [
        Message("system", "You are a careful coding agent."),
        Message("user", "Fix the failing test in src/auth/middleware.ts please."),
        Message("assistant", None, tool_calls=(ToolCall("c1", "bash", '{"cmd": "npm test"}'),)),
        Message("tool", "FAIL src/auth/middleware.test.ts\n" + "x" * 400, tool_call_id="c1"),
        Message("assistant", "The token check is inverted; I will flip it."),
        Message("user", "Go ahead."),
        Message(
            "assistant",
            None,
            tool_calls=(
                ToolCall("c2", "edit", '{"path": "src/auth/middleware.ts"}'),
                ToolCall("c3", "bash", '{"cmd": "npm test"}'),
            ),
        ),
        Message("tool", "edited", tool_call_id="c2"),
        Message("tool", "PASS 12 tests", tool_call_id="c3"),
        Message("assistant", "All 12 tests pass now."),
    ]


def cost(msgs):
    return COUNTER.count_messages(msgs)


def gap(count: int) -> Message:
    """The note that opens a window starting on an assistant turn, for strict APIs."""
    return Message("user", f"[ctxfold: {count} earlier messages left out]")


def test_keeps_system_and_the_newest_whole_units():
    msgs = history()
    budget = cost([msgs[0], *msgs[5:]])
    result = SlidingWindow().compress(msgs, budget=budget, counter=COUNTER)
    assert list(result.messages) == [msgs[0], *msgs[5:]]
    assert result.stats.tokens_after <= budget
    assert [d.reason for d in result.trace] == [
        "pinned:system",
        *["outside_window"] * 4,
        *["window"] * 5,
    ]
    assert result.decision_counts() == {"kept": 6, "dropped": 4}


def test_never_splits_a_tool_exchange():
    msgs = history()
    # room for the last assistant message and one tool result, but not the whole exchange
    budget = cost([msgs[0], gap(8), msgs[8], msgs[9]])
    result = SlidingWindow().compress(msgs, budget=budget, counter=COUNTER)
    assert list(result.messages) == [msgs[0], gap(8), msgs[9]]


def test_window_is_contiguous_it_does_not_skip_a_big_unit_to_keep_older_ones():
    msgs = history()
    budget = cost([msgs[0], msgs[1], *msgs[4:]])  # fits 1 + 4.. but not the big unit 2-3
    result = SlidingWindow().compress(msgs, budget=budget, counter=COUNTER)
    assert list(result.messages) == [msgs[0], gap(3), *msgs[4:]]


def test_a_window_that_opens_on_an_assistant_turn_gets_a_user_note_and_room_for_it():
    msgs = history()
    budget = cost([msgs[0], *msgs[4:]])  # the window 4.. fits, but not with the note
    result = SlidingWindow().compress(msgs, budget=budget, counter=COUNTER)
    # 4 made room, and the window now opens on the user: no note needed
    assert list(result.messages) == [msgs[0], *msgs[5:]]
    assert result.trace[4].action == "dropped" and result.stats.tokens_after <= budget
    # After the kept task (a user turn), a window opening on the user needs an
    # assistant note between them, or room made by the window, never by the task.
    msgs[4] = Message("assistant", "The token check is inverted in the middleware. " * 5)
    bridge = Message("assistant", "[ctxfold: 3 earlier messages left out]")
    budget = cost([msgs[0], msgs[1], bridge, *msgs[5:]])
    roomy = SlidingWindow(keep_first=1).compress(msgs, budget=budget, counter=COUNTER)
    assert list(roomy.messages) == [msgs[0], msgs[1], bridge, *msgs[5:]]
    tight = SlidingWindow(keep_first=1).compress(msgs, budget=budget - 1, counter=COUNTER)
    assert list(tight.messages) == [msgs[0], msgs[1], *msgs[6:]]


def test_keep_first_keeps_the_task_statement():
    msgs = history()
    budget = cost([msgs[0], msgs[1], msgs[9]])
    result = SlidingWindow(keep_first=1).compress(msgs, budget=budget, counter=COUNTER)
    assert list(result.messages) == [msgs[0], msgs[1], msgs[9]]
    assert result.trace[1].reason == "keep_first"


def test_history_that_fits_comes_back_unchanged():
    msgs = history()
    result = SlidingWindow().compress(msgs, budget=cost(msgs), counter=COUNTER)
    assert list(result.messages) == msgs
    assert {d.reason for d in result.trace} == {"fits_budget"}
    assert result.stats.ratio == 1.0 and result.stats.reduction_pct == 0.0


def test_budget_error_when_pinned_content_cannot_fit_and_nothing_is_lost():
    msgs = history()
    with pytest.raises(BudgetError) as info:
        SlidingWindow().compress(msgs, budget=5, counter=COUNTER)
    assert info.value.budget == 5 and info.value.required > 5
    assert "overflow='best_effort'" in str(info.value)
    assert msgs == history()


def test_budget_error_when_the_newest_unit_alone_cannot_fit():
    msgs = history()
    budget = cost([msgs[0], msgs[9]]) - 1
    with pytest.raises(BudgetError) as info:
        SlidingWindow().compress(msgs, budget=budget, counter=COUNTER)
    assert info.value.required == cost([msgs[0], msgs[9]])


def test_best_effort_returns_pinned_and_newest_unit_over_budget(caplog):
    msgs = history()
    result = SlidingWindow(overflow="best_effort").compress(msgs, budget=5, counter=COUNTER)
    assert list(result.messages) == [msgs[0], gap(8), msgs[9]]
    assert not result.stats.fits
    assert result.trace[9].reason == "window:over_budget"
    assert "over the budget" in caplog.text


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"pin_roles": "system"}, "not one string"),
        ({"pin_roles": ["sytem"]}, "unknown roles"),
        ({"keep_first": -1}, "keep_first"),
        ({"overflow": "truncate"}, "overflow must be one of"),
    ],
)
def test_bad_settings_fail_at_construction(kwargs, fragment):
    with pytest.raises(ConfigurationError, match=fragment):
        SlidingWindow(**kwargs)


def test_bad_budget_is_a_configuration_error():
    for bad in (-1, 2.5, "100", True):
        with pytest.raises(ConfigurationError, match="budget"):
            SlidingWindow().compress(history(), budget=bad, counter=COUNTER)  # type: ignore[arg-type]
