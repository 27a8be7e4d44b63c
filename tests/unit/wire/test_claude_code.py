"""A coding assistant's session log (Claude Code's JSONL transcript) is read into a valid
Anthropic request: one API message's lines merged, results after their calls, side
chains, meta and bookkeeping lines left out, every bad line reported by its number."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ctxfold import InvalidMessageError, from_anthropic
from ctxfold.validity import tool_pairing_problems, turn_order_problems
from ctxfold.wire.claude_code import (
    ClaudeCodeLog,
    Compaction,
    ProblemKind,
    read_claude_code,
    read_claude_code_file,
)

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "claude_code_session.jsonl"
SESSION = "0b6f3a52-1c4e-4f0a-9d8e-7a2b5c3d1e90"
SIGNATURE = "EqQBCkYIBxgCKkA2bW9ja3NpZ25hdHVyZQ+/=="  # opaque: must come back as written


class Log:
    """A log written line by line as Claude Code writes it: each line's ``parentUuid``
    the ``uuid`` of the line before, the session's fields on every line."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.last: str | None = None

    def entry(self, kind: str, **fields: Any) -> dict[str, Any]:
        uuid = fields.pop("uuid", f"{len(self.lines) + 1:08d}-aaaa-4bbb-8ccc-dddddddddddd")
        line = {
            "parentUuid": self.last,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/shop",
            "sessionId": SESSION,
            "version": "2.0.55",
            "gitBranch": "main",
            "type": kind,
            **fields,
            "uuid": uuid,
            "timestamp": f"2025-11-20T10:00:{len(self.lines):02d}.000Z",
        }
        self.add(line)
        self.last = uuid
        return line

    def add(self, line: dict[str, Any]) -> None:
        self.lines.append(json.dumps(line))

    def raw(self, text: str) -> None:
        self.lines.append(text)

    def user(self, content: Any, **fields: Any) -> None:
        self.entry("user", message={"role": "user", "content": content}, **fields)

    def result(self, call: str, content: Any, **block: Any) -> None:
        self.user([{"tool_use_id": call, "type": "tool_result", "content": content, **block}])

    def assistant(self, mid: str, block: dict[str, Any], **fields: Any) -> None:
        message = {
            "model": "claude-sonnet-4-5-20250929",
            "id": mid,
            "type": "message",
            "role": "assistant",
            "content": [block],
            "stop_reason": "tool_use" if block["type"] == "tool_use" else None,
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 120, "cache_read_input_tokens": 9000},
        }
        self.entry("assistant", message=message, requestId=f"req_{mid}", **fields)

    def read(self, **options: Any) -> ClaudeCodeLog:
        return read_claude_code(self.lines, **options)


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def result(call_id: str, content: Any, **block: Any) -> dict[str, Any]:
    return {"tool_use_id": call_id, "type": "tool_result", "content": content, **block}


def problems(log: ClaudeCodeLog) -> list[tuple[int, ProblemKind]]:
    return [(p.line, p.kind) for p in log.problems]


def assert_valid_request(log: ClaudeCodeLog) -> None:
    """What the CLI relies on: ctxfold reads the messages, and a strict API takes them."""
    messages = from_anthropic(log.messages)
    assert turn_order_problems(messages) == []
    assert tool_pairing_problems(messages) == []


THINKING = {
    "type": "thinking",
    "thinking": "The cart total is off by the discount; read cart.py, run its tests.",
    "signature": SIGNATURE,
}
SCREENSHOT = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgoAAAANSUhEUg=="},
}


def session_with_everything() -> Log:
    """The brief's sample: a prompt; one reply over thinking, text and two parallel
    calls; their results on separate lines, the second first, one with an image, one an
    error; a corrupt line between; a side chain, a meta and a summary line; a second
    reply with two parallel calls; a closing text; a new prompt; a call whose result is
    the last line, cut short."""
    log = Log()
    log.add({"type": "file-history-snapshot", "messageId": "m0", "snapshot": {}})  # 1
    log.user("The cart total ignores the discount. Fix it.")  # 2
    log.assistant("msg_A", THINKING)  # 3
    log.assistant("msg_A", text("Let me look at the cart and run its tests."))  # 4
    log.assistant("msg_A", call("toolu_1", "Read", file_path="shop/cart.py"))  # 5
    log.assistant("msg_A", call("toolu_2", "Bash", command="pytest tests/test_cart.py"))  # 6
    log.result("toolu_2", "1 failed: test_discount", is_error=True)  # 7
    log.raw('{"type":"user","message":{"role":"user","content":[{"type":"tool_re')  # 8
    log.result("toolu_1", [text("def total(self): return sum(self.items)"), SCREENSHOT])  # 9
    log.entry(  # 10: a sub-agent's line
        "assistant",
        isSidechain=True,
        message={"role": "assistant", "id": "msg_S", "content": [text("sub-agent")]},
    )
    log.user("<local-command-caveat>Caveat: local commands</local-command-caveat>", isMeta=True)
    log.add({"type": "summary", "summary": "Cart discount fix", "leafUuid": log.last})  # 12
    log.assistant("msg_B", text("total() drops the discount; fixing it and the test."))  # 13
    log.assistant("msg_B", call("toolu_3", "Edit", file_path="shop/cart.py"))  # 14
    log.assistant("msg_B", call("toolu_4", "Edit", file_path="tests/test_cart.py"))  # 15
    log.result("toolu_3", "The file shop/cart.py has been updated.")  # 16
    log.result("toolu_4", "The file tests/test_cart.py has been updated.")  # 17
    log.assistant("msg_C", text("Fixed: total() now applies the discount."))  # 18
    log.user("Thanks. Now run the whole suite.")  # 19
    log.assistant("msg_D", call("toolu_5", "Bash", command="pytest -q"))  # 20
    log.raw('{"parentUuid":"x","type":"user","message":{"role":"user","content":[{"tool_')  # 21
    return log


def test_a_session_is_read_into_merged_alternating_turns():
    log = session_with_everything().read()

    assert log.messages == [
        {"role": "user", "content": "The cart total ignores the discount. Fix it."},
        {
            "role": "assistant",
            "content": [
                THINKING,
                text("Let me look at the cart and run its tests."),
                call("toolu_1", "Read", file_path="shop/cart.py"),
                call("toolu_2", "Bash", command="pytest tests/test_cart.py"),
            ],
        },
        {
            "role": "user",
            "content": [  # in the order of the calls, not of the lines
                result("toolu_1", [text("def total(self): return sum(self.items)"), SCREENSHOT]),
                result("toolu_2", "1 failed: test_discount", is_error=True),
            ],
        },
        {
            "role": "assistant",
            "content": [
                text("total() drops the discount; fixing it and the test."),
                call("toolu_3", "Edit", file_path="shop/cart.py"),
                call("toolu_4", "Edit", file_path="tests/test_cart.py"),
            ],
        },
        {
            "role": "user",
            "content": [
                result("toolu_3", "The file shop/cart.py has been updated."),
                result("toolu_4", "The file tests/test_cart.py has been updated."),
            ],
        },
        {"role": "assistant", "content": [text("Fixed: total() now applies the discount.")]},
        {"role": "user", "content": "Thanks. Now run the whole suite."},
        {"role": "assistant", "content": [call("toolu_5", "Bash", command="pytest -q")]},
    ]
    assert log.system is None  # Claude Code does not log its system prompt
    assert problems(log) == [
        (8, ProblemKind.CORRUPT_JSON),
        (20, ProblemKind.CUT_OFF),  # kept, said
        (21, ProblemKind.TRUNCATED),
    ]
    assert str(log.problems[0]).startswith("line 8: not JSON")
    assert_valid_request(log)


def test_thinking_comes_back_byte_for_byte():
    log = session_with_everything().read()
    block = log.messages[1]["content"][0]
    assert json.dumps(block) == json.dumps(THINKING)  # keys, order and signature as written


def test_parallel_results_written_between_the_lines_of_one_reply_join_it():
    """A tool run while the reply streamed: its result line comes before the reply's
    next block; a system line (a slash command typed meanwhile) can come between too."""
    log = Log()
    log.user("Read both configs.")
    log.assistant("msg_A", call("toolu_1", "Read", file_path="a.toml"))
    log.result("toolu_1", "a = 1")
    log.entry("system", subtype="local_command", content="<command-name>/color</command-name>")
    log.assistant("msg_A", call("toolu_2", "Read", file_path="b.toml"))
    log.result("toolu_2", "b = 2")
    log.assistant("msg_B", text("a is 1 and b is 2."))

    read = log.read()

    assert read.messages == [
        {"role": "user", "content": "Read both configs."},
        {
            "role": "assistant",
            "content": [
                call("toolu_1", "Read", file_path="a.toml"),
                call("toolu_2", "Read", file_path="b.toml"),
            ],
        },
        {"role": "user", "content": [result("toolu_1", "a = 1"), result("toolu_2", "b = 2")]},
        {"role": "assistant", "content": [text("a is 1 and b is 2.")]},
    ]
    assert read.problems == ()
    assert_valid_request(read)


def test_an_interrupted_call_and_the_next_prompt_make_one_user_turn():
    log = Log()
    log.user("Run the slow tests.")
    log.assistant("msg_A", call("toolu_1", "Bash", command="pytest -m slow"))
    log.result("toolu_1", "[Request interrupted by user for tool use]", is_error=True)
    log.user([text("[Request interrupted by user for tool use]")])
    log.user("Skip those, just the fast ones.")

    read = log.read()

    assert read.messages[2] == {
        "role": "user",
        "content": [
            result("toolu_1", "[Request interrupted by user for tool use]", is_error=True),
            text("[Request interrupted by user for tool use]"),
            text("Skip those, just the fast ones."),
        ],
    }
    assert_valid_request(read)


def test_error_notices_are_left_out_and_replies_side_by_side_join():
    log = Log()
    log.user("Summarize README.md")
    log.assistant("msg_A", text("Reading it now."))
    api_error = {
        "role": "assistant",
        "model": "<synthetic>",
        "content": [text("API Error: 529 Overloaded. Try again in a moment.")],
    }
    log.entry("assistant", message=api_error, isApiErrorMessage=True)
    log.assistant("msg_B", text("It describes a small shop app."))

    read = log.read()

    assert read.messages[1:] == [
        {
            "role": "assistant",
            "content": [text("Reading it now."), text("It describes a small shop app.")],
        }
    ]
    assert_valid_request(read)


def test_lines_written_again_with_their_uuid_are_read_once():
    """A log reopened by an editor, or resumed, can repeat lines byte for byte."""
    log = Log()
    log.user("List the files.")
    log.assistant("msg_A", call("toolu_1", "Glob", pattern="**/*.py"))
    log.result("toolu_1", "shop/cart.py")
    log.assistant("msg_B", text("One file: shop/cart.py."))
    once = log.read()
    log.lines.extend(log.lines[1:])  # replayed
    log.lines.append(log.lines[1])

    twice = log.read()

    assert twice.messages == once.messages
    assert twice.problems == ()


def test_a_compact_summary_is_left_out_when_the_history_it_summarizes_is_there():
    log = Log()
    log.user("Add a discount field.")
    log.assistant("msg_A", text("Added `discount` to Cart."))
    log.entry(
        "system",
        subtype="compact_boundary",
        content="Conversation compacted",
        compactMetadata={"trigger": "manual", "preTokens": 150_000},
    )
    summary = "This session is being continued from a previous conversation. Summary: ..."
    log.user(summary, isCompactSummary=True, isVisibleInTranscriptOnly=True)
    log.user("Now use it in total().")

    read = log.read()

    assert read.messages == [
        {"role": "user", "content": "Add a discount field."},
        {"role": "assistant", "content": [text("Added `discount` to Cart.")]},
        {"role": "user", "content": "Now use it in total()."},
    ]
    assert read.compactions == (Compaction(line=4, at=2, summary=summary, kept=False),)
    assert read.problems == ()


def test_a_log_that_starts_at_a_compaction_keeps_its_summary():
    log = Log()
    log.entry("system", subtype="compact_boundary", content="Conversation compacted")
    log.user([text("Summary: Cart has a discount field.")], isCompactSummary=True)
    log.user("Now use it in total().")
    log.assistant("msg_A", text("Done."))

    read = log.read()

    assert read.messages[0] == {
        "role": "user",
        "content": [text("Summary: Cart has a discount field."), text("Now use it in total().")],
    }
    assert read.compactions[0].kept
    assert read.compactions[0].summary == "Summary: Cart has a discount field."
    assert_valid_request(read)


def test_a_result_whose_call_was_on_a_corrupt_line_is_left_out_and_said():
    log = Log()
    log.user("Show the config.")
    log.raw('{"type":"assistant","message":{"role":"assistant","id":"msg_A","content":[{')
    log.result("toolu_1", "debug = true")
    log.assistant("msg_B", text("Debug is on."))
    log.user("Turn it off.")

    read = log.read()

    assert problems(read) == [(2, ProblemKind.CORRUPT_JSON), (3, ProblemKind.ORPHAN_RESULT)]
    assert "toolu_1" in read.problems[1].reason
    assert [m["role"] for m in read.messages] == ["user", "assistant", "user"]
    assert_valid_request(read)


def test_a_call_whose_result_was_lost_is_kept_and_said():
    log = Log()
    log.user("Check the version.")
    log.assistant("msg_A", call("toolu_1", "Bash", command="python -V"))
    log.raw('{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1",')
    log.user("Hello?")
    log.assistant("msg_B", text("Python 3.12."))

    read = log.read()

    assert problems(read) == [(2, ProblemKind.UNANSWERED_CALL), (3, ProblemKind.CORRUPT_JSON)]
    assert read.messages[1]["content"] == [call("toolu_1", "Bash", command="python -V")]
    from_anthropic(read.messages)  # ctxfold reads it (a strict API would not)


def test_a_second_result_or_call_with_one_id_is_left_out():
    log = Log()
    log.user("Go.")
    log.assistant("msg_A", call("toolu_1", "Bash", command="ls"))
    log.result("toolu_1", "a.py")
    log.result("toolu_1", "a.py")  # the same result, written again under a new uuid
    log.assistant("msg_B", call("toolu_1", "Bash", command="ls"))
    log.assistant("msg_B", text("One file."))

    read = log.read()

    assert problems(read) == [(4, ProblemKind.DUPLICATE_RESULT), (5, ProblemKind.DUPLICATE_CALL)]
    assert read.messages[2:] == [
        {"role": "user", "content": [result("toolu_1", "a.py")]},
        {"role": "assistant", "content": [text("One file.")]},
    ]
    assert_valid_request(read)


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("[1, 2, 3]", ProblemKind.NOT_AN_OBJECT),
        ('{"type": "user", "uuid": "u9"}', ProblemKind.UNKNOWN_SHAPE),
        ('{"type": "user", "message": {"role": "user", "content": 7}}', ProblemKind.UNKNOWN_SHAPE),
        (
            '{"type": "user", "message": {"role": "assistant", "content": "x"}}',
            ProblemKind.UNKNOWN_SHAPE,
        ),
        (
            '{"type": "assistant", "message": {"role": "assistant", "content": '
            '[{"type": "tool_use", "name": "Bash", "input": {}}]}}',
            ProblemKind.UNKNOWN_SHAPE,
        ),
        (
            '{"type": "user", "message": {"role": "user", "content": '
            '[{"type": "tool_result", "content": "no id"}]}}',
            ProblemKind.UNKNOWN_SHAPE,
        ),
        ("[" * 500 + "]" * 500, ProblemKind.CORRUPT_JSON),  # past the depth ctxfold reads
    ],
)
def test_a_line_of_the_wrong_shape_is_said_and_skipped(line, kind):
    log = Log()
    log.user("First.")
    log.raw(line)
    log.assistant("msg_A", text("Second."))

    read = log.read()

    assert problems(read) == [(2, kind)]
    assert read.messages == [
        {"role": "user", "content": "First."},
        {"role": "assistant", "content": [text("Second.")]},
    ]


def test_a_file_that_is_no_session_log_is_refused():
    request = json.dumps({"messages": [{"role": "user", "content": "hi"}]}, indent=2)
    with pytest.raises(InvalidMessageError, match="no line is an entry of a Claude Code"):
        read_claude_code(request)
    with pytest.raises(InvalidMessageError, match="Claude Code"):
        read_claude_code(['{"role": "user", "content": "hi"}'])  # OpenAI JSONL
    assert read_claude_code([]) == ClaudeCodeLog(messages=[])
    only_a_title = read_claude_code(['{"type": "summary", "summary": "t", "leafUuid": "u"}'])
    assert only_a_title.messages == [] and only_a_title.problems == ()


def test_the_whole_text_is_split_at_newlines_only(tmp_path):
    """JSON.stringify leaves U+2028 unescaped; ``str.splitlines`` would cut the line."""
    log = Log()
    log.user("Split here:\u2028and here:\u2029done.")
    log.assistant("msg_A", text("Both kept."))
    raw = "\n".join(
        line.replace("\\u2028", "\u2028").replace("\\u2029", "\u2029") for line in log.lines
    )
    assert "\u2028" in raw

    for read in (read_claude_code(raw), read_claude_code(raw.encode())):
        assert read.messages[0]["content"] == "Split here:\u2028and here:\u2029done."
        assert read.problems == ()
    path = tmp_path / "session.jsonl"
    path.write_text(raw + "\n", encoding="utf-8")
    assert read_claude_code_file(path).messages == read_claude_code(raw).messages


def test_a_line_that_is_not_utf8_is_said_and_reading_goes_on(tmp_path):
    log = Log()
    log.user("First.")
    log.assistant("msg_A", text("Second."))
    path = tmp_path / "session.jsonl"
    path.write_bytes(
        log.lines[0].encode()
        + b"\n"
        + b'{"type": "user", "x": "\xff\xfe"}\n'
        + log.lines[1].encode()
    )

    read = read_claude_code_file(path)

    assert problems(read) == [(2, ProblemKind.CORRUPT_JSON)]
    assert "UTF-8" in read.problems[0].reason
    assert len(read.messages) == 2


def test_a_sub_agents_own_file_is_read_with_sidechains():
    log = Log()
    for line in session_with_everything().lines[:7]:
        entry = json.loads(line) if line.startswith("{") else None
        if entry and entry.get("type") in ("user", "assistant"):
            entry["isSidechain"] = True
            entry["agentId"] = "a1b2c3d4"
        log.raw(json.dumps(entry) if entry else line)

    assert log.read().messages == []
    agent = log.read(sidechains=True)
    assert [m["role"] for m in agent.messages] == ["user", "assistant", "user"]
    assert problems(agent) == [(5, ProblemKind.UNANSWERED_CALL)]  # its result is later


def test_the_input_lines_are_not_changed():
    lines = session_with_everything().lines
    before = copy.deepcopy(lines)
    log = read_claude_code(lines)
    log.messages[1]["content"].clear()
    assert lines == before
    assert read_claude_code(lines).messages[1]["content"]  # a second read is whole


def test_a_long_session_reads_whole():
    """5,000 lines: each reply over three lines (text and two parallel calls), the two
    results on their own lines. Reading is one pass: no list is copied per line."""
    log = Log()
    log.user("Refactor every module.")
    turns = 1000
    for k in range(turns):
        mid = f"msg_{k}"
        log.assistant(mid, text(f"Module {k}: reading it and its test."))
        log.assistant(mid, call(f"toolu_{k}a", "Read", file_path=f"src/m{k}.py"))
        log.assistant(mid, call(f"toolu_{k}b", "Read", file_path=f"tests/test_m{k}.py"))
        log.result(f"toolu_{k}b", f"def test_{k}(): ...")
        log.result(f"toolu_{k}a", f"def f{k}(): return {k}")
    assert len(log.lines) == 5001

    read = log.read()

    assert read.problems == ()
    assert len(read.messages) == 1 + 2 * turns
    assert read.messages[-1]["content"] == [
        result(f"toolu_{turns - 1}a", f"def f{turns - 1}(): return {turns - 1}"),
        result(f"toolu_{turns - 1}b", f"def test_{turns - 1}(): ..."),
    ]
    assert_valid_request(read)


def test_the_bundled_example_reads_without_a_problem():
    read = read_claude_code_file(EXAMPLE)

    assert read.problems == ()
    assert read.compactions == ()
    assert len(read.messages) == 16
    kinds = {
        b["type"] for m in read.messages if isinstance(m["content"], list) for b in m["content"]
    }
    assert kinds == {"thinking", "text", "tool_use", "tool_result"}
    assert any(len(m["content"]) == 3 for m in read.messages if m["role"] == "assistant")
    assert_valid_request(read)
