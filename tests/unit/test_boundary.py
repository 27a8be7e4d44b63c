"""Input checked at the boundary: what no chat API accepts is a typed error naming the
message and saying what to do; what real histories do is accepted and carried through."""

from __future__ import annotations

import pytest

import ctxfold
from ctxfold import ConfigurationError, InvalidMessageError


def call(call_id: str, name: str = "f") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


USER = {"role": "user", "content": "go"}


@pytest.mark.parametrize(
    ("messages", "index", "says"),
    [
        (None, None, "expected a list of messages"),
        (5, None, "expected a list of messages"),
        ({"role": "user", "content": "x"}, None, "a single dict"),
        ("hello", None, r"got str: a text needs a role, e.g. \[\{'role': 'user'"),
        ([{"role": "user", "content": "x", "blob": b"ab"}], 0, "field 'blob' holds bytes"),
        ([{"role": "user", "content": "x", "tags": {1, 2}}], 0, "field 'tags' holds set"),
        (
            [USER, {"role": "assistant", "content": None, "tool_calls": [call("a"), call("a")]}],
            1,
            "share an id",
        ),
        (
            [
                USER,
                {"role": "assistant", "content": None, "tool_calls": [call("a")]},
                {"role": "tool", "tool_call_id": "a", "content": "r"},
                {"role": "tool", "tool_call_id": "a", "content": "r2"},
            ],
            3,
            "a second result for tool call 'a'",
        ),
        ([{**USER, "tool_calls": [call("a")]}], 0, "only assistant messages call tools"),
        ([{**USER, "tool_call_id": "a"}], 0, "only 'tool' messages do"),
        (
            [USER, {"role": "assistant", "content": None, "tool_calls": [call("")]}],
            1,
            "non-empty",
        ),
        (
            [
                USER,
                {"role": "tool", "tool_call_id": "a", "content": "r"},
                {"role": "assistant", "content": None, "tool_calls": [call("a")]},
            ],
            1,
            "comes before the call",
        ),
    ],
)
def test_malformed_input_is_a_typed_error_naming_the_message(messages, index, says):
    with pytest.raises(InvalidMessageError, match=says) as caught:
        ctxfold.compress(messages, budget=100)
    assert caught.value.index == index
    assert isinstance(caught.value, ValueError)


def test_what_real_histories_do_is_accepted():
    reused = [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call("a")]},
        {"role": "tool", "tool_call_id": "a", "content": "r1"},
        {"role": "assistant", "content": None, "tool_calls": [call("a")]},  # id used again
        {"role": "tool", "tool_call_id": "a", "content": "r2"},
    ]
    orphan = [{"role": "tool", "tool_call_id": "gone", "content": "r"}, USER]  # trimmed prefix
    dangling = [USER, {"role": "assistant", "content": None, "tool_calls": [call("b")]}]
    parsed = {"role": "assistant", "content": None, "tool_calls": [call("c")]}
    parsed["tool_calls"][0]["function"]["arguments"] = {"x": 1}  # parsed arguments: as JSON
    for history in (reused, orphan, dangling):
        assert ctxfold.compress(history, budget=10_000).to_openai() == history
    out = ctxfold.compress([USER, parsed], budget=10_000).to_openai()
    assert out[1]["tool_calls"][0]["function"]["arguments"] == '{"x":1}'


def test_no_content_key_stays_absent_and_null_content_stays_null():
    for history in (
        [{"role": "user"}],
        [{"role": "user", "content": None}],
        [{"role": "assistant", "tool_calls": [call("a")]}, {"role": "tool", "tool_call_id": "a"}],
    ):
        assert ctxfold.to_openai(ctxfold.from_openai(history)) == history
        assert ctxfold.compress(history, budget=1_000).to_openai() == history


@pytest.mark.parametrize("bad", [lambda t: None, lambda t: -1, lambda t: 2.5, lambda t: True])
def test_a_counter_that_returns_no_count_is_a_configuration_error(bad):
    with pytest.raises(ConfigurationError, match="whole number of tokens"):
        ctxfold.compress([{"role": "user", "content": "hello " * 50}], budget=5, counter=bad)
