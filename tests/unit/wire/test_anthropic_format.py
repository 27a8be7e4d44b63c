"""Anthropic Messages-API dicts are detected by their shape wherever messages come in,
read with their tool structure, and given back in their own format."""

from __future__ import annotations

import copy
import itertools
import json

import pytest

import ctxfold
from conftest import examples_and_shared
from ctxfold import InvalidMessageError, MemoryStore, Session, from_anthropic, to_anthropic
from ctxfold.validity import turn_order_problems

TASK = "Fix the bug in src/app/views.py"
FILE = "\n".join(
    f"{n:>4}  def view_{n}(request): return render(request, 'page_{n}.html')" for n in range(40)
)


def smallest_run() -> list[dict]:
    """The issue's smallest case: a task, a Read call, its 40-line result, the answer."""
    return [
        {"role": "user", "content": TASK},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "Read",
                    "input": {"file_path": "src/app/views.py"},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": FILE}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Fixed src/app/views.py."}]},
    ]


def assert_valid_anthropic(messages: list[dict]) -> None:
    """What the Messages API accepts: user first, strict alternation, every tool_use
    answered in the next user turn, no system message in the list."""
    roles = [m["role"] for m in messages]
    assert roles[0] == "user" and all(a != b for a, b in itertools.pairwise(roles))
    for k, m in enumerate(messages):
        blocks = m["content"] if isinstance(m["content"], list) else []
        calls = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        if calls and k + 1 < len(messages):  # (the last turn's calls wait for results)
            after = messages[k + 1]["content"] if k + 1 < len(messages) else []
            answered = [b.get("tool_use_id") for b in after if isinstance(b, dict)]
            assert answered[: len(calls)] == calls
    assert not turn_order_problems(from_anthropic(messages))


def test_compress_reads_anthropic_dicts_with_their_tool_structure():
    run = smallest_run()
    given = compress_both(run, budget=100)
    assert given["anthropic"].messages == given["converted"].messages
    out = given["anthropic"].as_given()
    assert_valid_anthropic(out)
    text = json.dumps(out)
    assert TASK in text and "src/app/views.py" in text  # the task and the path survive
    assert out[-1] == run[-1]  # continuation, byte for byte


def compress_both(run: list[dict], budget: int) -> dict[str, ctxfold.CompressionResult]:
    store = MemoryStore(key=b"k" * 32)
    return {
        "anthropic": ctxfold.compress(run, budget=budget, store=store),
        "converted": ctxfold.compress(from_anthropic(run), budget=budget, store=store),
    }


def test_anthropic_dicts_count_as_their_converted_messages():
    run = smallest_run()
    counter = ctxfold.get_counter("o200k_base")
    result = ctxfold.compress(run, budget=10_000)
    assert result.stats.tokens_before == counter.count_messages(from_anthropic(run))
    assert result.stats.tokens_before > counter.count_text(FILE)  # the tool result counts


def test_the_input_is_never_modified():
    run = smallest_run()
    kept = copy.deepcopy(run)
    ctxfold.compress(run, budget=100)
    assert run == kept


def test_a_request_object_comes_back_as_one():
    request = {
        "model": "claude-x",
        "max_tokens": 512,
        "system": "You fix bugs.",
        "messages": smallest_run(),
    }
    result = ctxfold.compress(request, budget=140)
    out = result.as_given()
    assert out["model"] == "claude-x" and out["max_tokens"] == 512
    assert out["system"].startswith("You fix bugs.")
    assert_valid_anthropic(out["messages"])
    assert (
        result.stats.tokens_before
        > ctxfold.compress(smallest_run(), budget=10**6).stats.tokens_before
    )


def test_an_openai_request_comes_back_as_one():
    request = {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}
    assert ctxfold.compress(request, budget=100).as_given() == request


def test_a_list_without_a_system_slot_opens_the_first_user_turn_with_the_note():
    out = ctxfold.compress(smallest_run(), budget=100).as_given()
    assert all(m["role"] in ("user", "assistant") for m in out)
    first = out[0]["content"]
    assert isinstance(first, list) and first[0]["text"].startswith("[ctxfold")


def test_a_leading_system_message_stays_where_it_was():
    run = [{"role": "system", "content": "You fix bugs."}, *smallest_run()]
    out = ctxfold.compress(run, budget=130).as_given()
    assert out[0]["role"] == "system" and out[0]["content"].startswith("You fix bugs.")
    assert_valid_anthropic(out[1:])


def test_a_session_takes_anthropic_dicts_one_at_a_time():
    session = Session(budget=120, store=MemoryStore())
    for message in smallest_run():
        session.add(message)
    out = session.render().as_given()
    assert_valid_anthropic(out)
    assert out[-1] == smallest_run()[-1]


def test_condense_reads_anthropic_dicts():
    text = ctxfold.condense(smallest_run(), max_tokens=60)
    assert text == ctxfold.condense(from_anthropic(smallest_run()), max_tokens=60)
    assert TASK in text and ctxfold.get_counter("o200k_base").count_text(text) <= 60


@pytest.mark.parametrize(
    ("messages", "says"),
    [
        (
            [{"role": "tool", "tool_call_id": "c1", "content": "x"}, *smallest_run()],
            r"message 0 is OpenAI's \(role 'tool'\) and message 2 is Anthropic's "
            r"\(a 'tool_use' block\)",
        ),
        (
            [
                *smallest_run(),
                {"role": "assistant", "content": "x", "tool_calls": []},
                {"role": "user", "content": "ok", "name": "bob"},
            ],
            r"mix two formats",
        ),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "name": "Read", "input": {}}]}],
            r"message 0: a 'tool_use' block needs a string 'id'",
        ),
        (
            [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}],
            r"message 0: a 'tool_result' block needs the string 'tool_use_id'",
        ),
    ],
)
def test_a_list_that_fits_no_format_or_mixes_two_is_refused(messages, says):
    with pytest.raises(InvalidMessageError, match=says):
        ctxfold.compress(messages, budget=100)
    with pytest.raises(InvalidMessageError, match=says):
        Session(store=MemoryStore()).add(messages)


def test_a_request_given_where_messages_go_points_at_its_list():
    with pytest.raises(InvalidMessageError, match=r"data\['messages'\]"):
        Session(store=MemoryStore()).add({"messages": smallest_run()})
    with pytest.raises(InvalidMessageError, match="under 'messages'"):
        ctxfold.compress({"conversation": smallest_run()}, budget=100)


def test_a_system_parameter_beside_openai_messages_is_refused():
    request = {"system": "x", "messages": [{"role": "tool", "tool_call_id": "c", "content": "r"}]}
    with pytest.raises(InvalidMessageError, match="top-level 'system' is Anthropic's"):
        ctxfold.compress(request, budget=100)


@pytest.mark.parametrize(
    ("name", "messages"),
    examples_and_shared(limit=6),
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_a_run_converted_to_anthropic_gets_the_same_decisions(name, messages):
    """The same agent run, given as OpenAI dicts and as Anthropic's, is compressed
    alike: the format is read, not guessed. Each provider counts a tool call its own
    way (about half the messages differ by a token or two), so a message whose fate
    differs must sit beside one the two count differently; a misread format changes
    the fate of messages whose counts agree."""
    if not any(m.tool_calls for m in messages):
        pytest.skip("no tool calls: the formats do not differ")
    system, turns = to_anthropic(messages)
    counter = ctxfold.get_counter("o200k_base")
    budget = max(counter.count_messages(messages) // 4, counter.count_message(messages[0]) + 800)
    openai = ctxfold.compress(
        ctxfold.to_openai(messages), budget=budget, store=MemoryStore(key=b"k" * 32)
    )
    anthropic = ctxfold.compress(
        {"system": system, "messages": turns}, budget=budget, store=MemoryStore(key=b"k" * 32)
    )
    pairs = list(zip(anthropic.trace, openai.trace, strict=True))
    counted_apart = {a.index for a, o in pairs if a.tokens_before != o.tokens_before}
    unexplained = [
        (a.index, fate(a), fate(o))
        for a, o in pairs
        if fate(a) != fate(o) and not counted_apart & {a.index - 1, a.index, a.index + 1}
    ]
    assert not unexplained
    assert sum(fate(a) != fate(o) for a, o in pairs) <= max(2, len(pairs) // 50)
    converted = ctxfold.compress(
        from_anthropic(turns, system=system), budget=budget, store=MemoryStore(key=b"k" * 32)
    )
    assert anthropic.messages == converted.messages
    assert_valid_anthropic(anthropic.as_given()["messages"])


def fate(d: ctxfold.Decision) -> tuple[str, str]:
    """A decision, a message kept in place whether or not its JSON was compacted
    (Anthropic's ``input`` is an object, written compact; OpenAI's arguments are the
    model's text, spaces and all)."""
    return ("kept" if d.action in ("kept", "compressed") else d.action, d.reason)


def with_thinking(turns: list[dict]) -> list[dict]:
    """An Anthropic run with a signed thinking block opening every assistant turn."""
    out = []
    for k, turn in enumerate(turns):
        if turn["role"] == "assistant":
            content = turn["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            thought = f"Turn {k}: I should check what the last result says before acting. " * 12
            blocks = [
                {"type": "thinking", "thinking": thought, "signature": f"sig{k}" * 30},
                *blocks,
            ]
            turn = {"role": "assistant", "content": blocks}
        out.append(turn)
    return out


def thinking_blocks(turns: list[dict]) -> list[dict]:
    return [
        b
        for t in turns
        if isinstance(t["content"], list)
        for b in t["content"]
        if b.get("type") == "thinking"
    ]


@pytest.mark.parametrize(
    ("name", "messages"),
    examples_and_shared(limit=6),
    ids=lambda x: x if isinstance(x, str) else "",
)
@pytest.mark.parametrize("share", [0.5, 0.25, 0.1])
def test_thinking_blocks_are_kept_whole_or_dropped_whole(name, messages, share):
    """Anthropic verifies a thinking block by its signature: never rewritten; and in a
    tool loop the newest assistant turn's thinking must be sent."""
    if not any(m.tool_calls for m in messages):
        pytest.skip("no tool loop")
    system, turns = to_anthropic(messages)
    if turns[-1]["role"] == "assistant":  # end inside a tool loop: the results came
        turns = turns[:-1]
    run = with_thinking(turns)
    counter = ctxfold.get_counter("o200k_base")
    total = counter.count_messages(from_anthropic(run, system=system))
    budget = max(int(total * share), counter.count_text(system or "") + 1500)
    out = ctxfold.compress({"system": system, "messages": run}, budget=budget).as_given()[
        "messages"
    ]
    given = thinking_blocks(run)
    assert all(b in given for b in thinking_blocks(out))
    last_call = max(k for k, t in enumerate(out) if t["role"] == "assistant")
    assert thinking_blocks([out[last_call]]) == thinking_blocks(
        [run[max(k for k, t in enumerate(run) if t["role"] == "assistant")]]
    )
    assert counter.count_messages(from_anthropic(out, system=system)) <= budget


def test_thinking_parts_in_openai_dicts_are_not_a_second_format():
    """Gateways and ctxfold's own to_openai carry thinking blocks as parts of OpenAI
    messages: a thinking block is Anthropic's only where nothing else is OpenAI's."""
    thought = {"type": "thinking", "thinking": "Check the file first.", "signature": "s"}
    openai = [
        {"role": "user", "content": TASK},
        {
            "role": "assistant",
            "content": [thought],
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": FILE},
        {"role": "assistant", "content": [thought, {"type": "text", "text": "Fixed."}]},
    ]
    out = ctxfold.compress(openai, budget=10_000).as_given()
    assert out == openai
    chat = [
        {"role": "user", "content": "Why?"},
        {"role": "assistant", "content": [thought, {"type": "text", "text": "Because."}]},
    ]
    assert ctxfold.compress(chat, budget=10_000).as_given() == chat


def real_shaped_request() -> dict:
    """A request as a coding assistant sends it: cached system blocks, thinking with
    its signature, redacted thinking, parallel calls, results with text and image parts
    and is_error, a document, cache_control on the last block."""
    png = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6"
        "kgAAAABJRU5ErkJggg=="
    )
    return {
        "model": "claude-x",
        "max_tokens": 4096,
        "system": [
            {
                "type": "text",
                "text": "You are a coding agent.",
                "cache_control": {"type": "ephemeral"},
            }
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "spec"},
                        "title": "Spec",
                    },
                    {"type": "text", "text": TASK},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": "Read both files.",
                        "signature": "EqQBCkgIARAB" * 20,
                    },
                    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix" * 10},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "Read",
                        "input": {"file_path": "src/app/views.py"},
                    },
                    {"type": "tool_use", "id": "toolu_2", "name": "Screenshot", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": FILE}],
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "is_error": True,
                        "content": [
                            {"type": "text", "text": "partial capture"},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": png,
                                },
                            },
                        ],
                        "cache_control": {"type": "ephemeral"},
                    },
                ],
            },
        ],
    }


def test_a_real_shaped_request_round_trips_byte_for_byte():
    request = real_shaped_request()
    messages = from_anthropic(request["messages"], system=request["system"])
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "tool"]
    assert [c.id for c in messages[2].tool_calls] == ["toolu_1", "toolu_2"]
    assert to_anthropic(messages) == (request["system"], request["messages"])
    assert ctxfold.compress(request, budget=100_000).as_given() == request


def test_a_real_shaped_request_compressed_keeps_every_block_it_sends_whole():
    request = real_shaped_request()
    counter = ctxfold.get_counter("o200k_base")
    result = ctxfold.compress(request, budget=1200)
    out = result.as_given()
    assert counter.count_messages(from_anthropic(out["messages"], system=out["system"])) <= 1200
    assert_valid_anthropic(out["messages"])
    assert thinking_blocks(out["messages"]) == thinking_blocks(request["messages"][1:2])
    sent = [b for t in out["messages"] if isinstance(t["content"], list) for b in t["content"]]
    given = [b for t in request["messages"] for b in t["content"]]
    assert all(b in given for b in sent if b["type"] in ("redacted_thinking", "document"))


def test_anthropic_dicts_after_a_ctxfold_message_are_read_as_anthropic():
    run = smallest_run()
    mixed = [ctxfold.Message("user", TASK), *run[1:]]
    read = ctxfold.compress(mixed, budget=10_000).messages
    assert read == tuple(from_anthropic(run))
    assert [c.name for m in read for c in m.tool_calls] == ["Read"]
