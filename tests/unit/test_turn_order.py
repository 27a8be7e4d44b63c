"""The turn-order rule strict chat APIs hold to, written once (``ctxfold.validity``):
``clashes`` for two neighbours, ``turn_order_problems`` for a whole request, and the
system roles every module reads from there."""

from __future__ import annotations

import pytest

from ctxfold import Message
from ctxfold.validity import SYSTEM_ROLES, clashes, system_block_end, turn_order_problems


@pytest.mark.parametrize(
    ("before", "after", "clash"),
    [
        (None, "system", False),
        (None, "user", False),
        (None, "assistant", True),  # a request opens with the user
        ("system", "developer", False),
        ("developer", "assistant", True),
        ("system", "tool", True),
        ("user", "assistant", False),
        ("assistant", "tool", False),
        ("tool", "user", False),
        ("tool", "assistant", False),
        ("user", "user", True),
        ("assistant", "assistant", True),
        ("tool", "tool", False),  # results of one call's several tools
        ("user", "system", True),  # instructions only in the leading block
        ("assistant", "developer", True),
    ],
)
def test_clashes_is_the_rule_for_two_neighbours(before, after, clash) -> None:
    assert clashes(before, after) is clash


def _msgs(*roles: str) -> list[Message]:
    return [Message(r, "x", tool_call_id="c1" if r == "tool" else None) for r in roles]


def test_turn_order_problems_names_each_clash() -> None:
    assert turn_order_problems(_msgs("system", "user", "assistant", "user")) == []
    assert turn_order_problems(_msgs("system", "developer")) == [
        "no message after the system block (a request needs one from the user)"
    ]
    assert turn_order_problems(_msgs("system", "assistant", "user")) == [
        "message 1 opens the conversation as 'assistant', not 'user'"
    ]
    assert turn_order_problems(_msgs("user", "user", "assistant", "system", "user")) == [
        "messages 0 and 1 are both 'user': turns must alternate",
        "message 3 is a system message after the conversation began",
    ]


def test_the_system_block_ends_at_the_first_other_role() -> None:
    assert SYSTEM_ROLES == ("system", "developer")
    assert system_block_end(_msgs("system", "developer", "user", "system")) == 2
    assert system_block_end(_msgs("user")) == 0
    assert system_block_end([]) == 0
