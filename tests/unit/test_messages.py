from __future__ import annotations

import copy
import dataclasses
import json
import pickle

import pytest
from hypothesis import given, settings

from conftest import example_records, shared_records
from ctxfold import (
    ContentPart,
    Decision,
    InvalidMessageError,
    Message,
    ToolCall,
    from_anthropic,
    from_openai,
    to_anthropic,
    to_openai,
)
from ctxfold.testing.strategies import conversations
from ctxfold.wire.openai import as_messages


def test_openai_round_trip_is_lossless_on_examples():
    for record in example_records():
        assert to_openai(from_openai(record["messages"])) == record["messages"]


@pytest.mark.full_sweep
def test_openai_round_trip_is_lossless_on_the_shared_data():
    records = shared_records()
    assert len(records) >= 12
    for record in records:
        back = to_openai(from_openai(record["messages"]))
        # byte for byte, key order aside
        assert json.dumps(back, sort_keys=True) == json.dumps(record["messages"], sort_keys=True)


def test_multipart_content_names_and_unknown_fields_survive():
    raw = [
        {
            "role": "user",
            "name": "ann",
            "content": [
                {"type": "text", "text": "what is in this picture?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://x.test/a.png", "detail": "low"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "look first",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "look", "arguments": '{"zoom": 2}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "look", "content": "a cat"},
        {"role": "assistant", "content": "A cat.", "refusal": None, "id": "msg_7"},
    ]
    msgs = from_openai(raw)
    assert to_openai(msgs) == raw
    assert msgs[0].text == "what is in this picture?"
    image = {"image_url": {"url": "https://x.test/a.png", "detail": "low"}}
    assert msgs[0].content[1].data == image
    assert msgs[1].tool_calls == (ToolCall("c1", "look", '{"zoom": 2}'),)
    assert dict(msgs[1].extras) == {"reasoning_content": '"look first"'}
    assert msgs[3].id == "msg_7"


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"role": "robot", "content": "x"}, "unknown role 'robot'"),
        ({"role": "user", "content": 5}, "'content' must be"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "assistant", "content": "", "tool_calls": [{"id": "a"}]}, "'function'"),
        ({"role": "user", "content": [{"text": "no type"}]}, "'type'"),
        ("just a string", "expected a message object"),
    ],
)
def test_invalid_messages_raise_a_typed_error_naming_the_message(raw, fragment):
    with pytest.raises(InvalidMessageError) as info:
        from_openai([{"role": "user", "content": "fine"}, raw])
    assert fragment in str(info.value)
    assert info.value.index == 1
    assert isinstance(info.value, ValueError)


def test_as_messages_accepts_dicts_and_messages_but_not_one_dict():
    mixed = as_messages([Message("user", "a"), {"role": "assistant", "content": "b"}])
    assert [m.role for m in mixed] == ["user", "assistant"]
    with pytest.raises(InvalidMessageError, match="single dict"):
        as_messages({"role": "user", "content": "a"})


def test_messages_are_frozen_values():
    m = Message("user", "hi", metadata={"k": [1]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.content = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        m.metadata["k"] = 2  # type: ignore[index]
    assert m == Message("user", "hi") and hash(m) == hash(Message("user", "hi"))
    assert Message("user", "hi") != Message("assistant", "hi")
    clone = copy.deepcopy(m)
    assert clone == m and clone.metadata == {"k": [1]}
    assert clone.metadata["k"] is not m.metadata["k"]
    assert pickle.loads(pickle.dumps(m)) == m
    assert m.with_content("bye").content == "bye" and m.content == "hi"


def test_fingerprint_ignores_metadata_and_ids_but_not_content():
    a = Message("user", "hi", id="1", metadata={"x": 1})
    assert a.fingerprint == Message("user", "hi").fingerprint
    assert a.fingerprint != Message("user", "hi!").fingerprint
    assert len(a.fingerprint) == 64


def test_a_copy_never_keeps_its_originals_fingerprint_or_metadata():
    m = Message("user", "hi")
    assert m.fingerprint  # computed and kept on the original
    changed = m.with_content("bye")
    assert changed.fingerprint == Message("user", "bye").fingerprint != m.fingerprint
    tagged = Message("user", "hi", metadata={"k": 1})
    assert not m.metadata and dict(tagged.metadata) == {"k": 1}
    assert not Message("user", "yo").metadata  # the shared empty mapping stays empty
    pickled = pickle.loads(pickle.dumps(m))  # a fingerprint kept is no part of the value
    assert pickled == m and pickled.fingerprint == m.fingerprint
    assert "_fingerprint" not in repr(m) and copy.copy(m).fingerprint == m.fingerprint


def test_a_long_history_holds_no_dict_per_message_or_decision():
    """Messages and decisions have slots: a 100,000-message history in memory is not
    100,000 instance dicts more (about 12 MB), nor as many objects more to collect."""
    m = Message("user", "hi")
    d = Decision(0, "kept", "recent", 1, 1, "auto")
    assert not hasattr(m, "__dict__") and not hasattr(d, "__dict__")


ANTHROPIC = [
    {"role": "user", "content": "Book me a flight to Paris."},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "need the user id", "signature": "sig"},
            {"type": "text", "text": "Let me look you up."},
            {"type": "tool_use", "id": "tu_1", "name": "find_user", "input": {"email": "a@b.c"}},
            {"type": "tool_use", "id": "tu_2", "name": "list_flights", "input": {"to": "CDG"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "tu_1", "content": "user_42"},
            {
                "type": "tool_result",
                "tool_use_id": "tu_2",
                "is_error": True,
                "content": [{"type": "text", "text": "timeout"}],
            },
            {"type": "text", "text": "Also, window seat please."},
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
]


def test_anthropic_round_trip_is_lossless():
    msgs = from_anthropic(ANTHROPIC, system="You are a travel agent.")
    assert [m.role for m in msgs] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
    ]
    assert msgs[2].tool_calls[0] == ToolCall("tu_1", "find_user", '{"email":"a@b.c"}')
    assert msgs[4].tool_call_id == "tu_2" and dict(msgs[4].extras) == {"is_error": "true"}
    system, back = to_anthropic(msgs)
    assert system == "You are a travel agent."
    assert back == ANTHROPIC


def test_openai_tool_history_converts_to_valid_anthropic_turns():
    raw = json.loads(json.dumps(example_records()[0]["messages"]))
    system, turns = to_anthropic(from_openai(raw))
    assert isinstance(system, str) and system
    roles = [t["role"] for t in turns]
    # every tool_result sits in a user turn right after the assistant turn that called it
    for k, turn in enumerate(turns):
        if isinstance(turn["content"], list):
            for block in turn["content"]:
                if block["type"] == "tool_result":
                    prev = turns[k - 1]
                    assert roles[k] == "user" and prev["role"] == "assistant"
                    assert block["tool_use_id"] in {
                        b["id"] for b in prev["content"] if b["type"] == "tool_use"
                    }
    # and back again, the tool structure is the same
    again = from_anthropic(turns, system=system)
    assert [(m.role, m.tool_call_id, [c.id for c in m.tool_calls]) for m in again] == [
        (m.role, m.tool_call_id, [c.id for c in m.tool_calls]) for m in from_openai(raw)
    ]


def test_anthropic_rejects_non_json_tool_arguments_clearly():
    msg = Message("assistant", None, tool_calls=(ToolCall("c", "f", "{not json"),))
    with pytest.raises(InvalidMessageError, match="not JSON"):
        to_anthropic([msg])


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_generated_histories_round_trip_through_openai_dicts(msgs):
    assert from_openai(to_openai(msgs)) == msgs
    assert from_openai(json.loads(json.dumps(to_openai(msgs)))) == msgs


@settings(max_examples=100, deadline=None)
@given(conversations())
def test_generated_histories_keep_their_tool_structure_through_anthropic(msgs):
    system, turns = to_anthropic(msgs)
    again = from_anthropic(turns, system=system)

    def calls(ms):
        return [(c.id, c.name, json.loads(c.arguments)) for m in ms for c in m.tool_calls]

    def results(ms):
        return [(m.tool_call_id, m.text) for m in ms if m.role == "tool"]

    assert calls(again) == calls(msgs)
    assert results(again) == results(msgs)


def test_content_part_text_and_non_text():
    assert ContentPart.from_dict(
        {"type": "text", "text": "a", "cache_control": {"type": "x"}}
    ).to_dict() == {"type": "text", "text": "a", "cache_control": {"type": "x"}}
    assert not ContentPart("image_url", extra='{"image_url": {}}').is_text


def test_turn_order_problems_name_what_strict_apis_refuse() -> None:
    from ctxfold.validity import turn_order_problems

    sys_, user, bot = Message("system", "s"), Message("user", "u"), Message("assistant", "a")
    assert turn_order_problems([sys_, user, bot, user]) == []
    assert turn_order_problems([sys_]) == [
        "no message after the system block (a request needs one from the user)"
    ]
    assert "opens the conversation as 'assistant'" in turn_order_problems([sys_, bot])[0]
    assert "both 'user'" in turn_order_problems([sys_, user, user])[0]
    assert "system message after" in turn_order_problems([user, sys_, bot])[0]
    call = Message("assistant", None, tool_calls=(ToolCall("c", "f", "{}"),))
    result = Message("tool", "ok", tool_call_id="c")
    assert turn_order_problems([user, call, result, bot, user]) == []


def test_tool_pairing_problems_name_orphans_and_unanswered_calls() -> None:
    from ctxfold.validity import tool_pairing_problems

    user, bot = Message("user", "u"), Message("assistant", "a")
    calls = Message(
        "assistant", None, tool_calls=(ToolCall("c1", "f", "{}"), ToolCall("c2", "f", "{}"))
    )
    r1, r2 = Message("tool", "1", tool_call_id="c1"), Message("tool", "2", tool_call_id="c2")
    assert tool_pairing_problems([user, calls, r2, r1, bot]) == []
    assert tool_pairing_problems([user, calls]) == []  # the agent is about to run them
    orphan = tool_pairing_problems([user, r1, bot])
    assert orphan == [
        "message 1 answers tool call 'c1', which the assistant message before it does not make"
    ]
    assert tool_pairing_problems([user, calls, r1, bot]) == [
        "tool calls ['c2'] have no result before message 3"
    ]
    # a result after another turn is an orphan too, even though its call came earlier
    assert len(tool_pairing_problems([user, calls, r1, bot, user, r2])) == 2
