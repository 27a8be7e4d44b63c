"""Turn rendering: the Turn model, the renderers, their options and the pressure mode."""

from __future__ import annotations

import copy
import json
import re
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxfold
from conftest import DATA_DIR, SKIP_NO_DATA, example_records
from ctxfold import (
    BudgetError,
    ConfigurationError,
    Message,
    Renderer,
    Turn,
    from_openai,
    get_counter,
    normalize_renderer,
    render,
    to_anthropic,
    to_openai,
    turns_from_messages,
)
from ctxfold.exceptions import InvalidTurnError
from ctxfold.rendering import (
    FullHistory,
    PressureTriggered,
    RenderStats,
    SingleUserCoalesced,
    ToolUse,
)
from ctxfold.testing import check_tool_integrity
from ctxfold.text import shorten

COUNTER = get_counter("o200k_base")
_RETURNCODE = re.compile(r"<returncode>(\d+)</returncode>")


def agent_turns(messages: list[Message]) -> tuple[list[Turn], dict]:
    """An agent history as turns; a shell result with a non-zero return code is the
    call's error (as a mini-swe-agent run reports it)."""
    turns, options = turns_from_messages(messages)
    out = []
    for t in turns:
        calls = []
        for c in t.tool_calls:
            m = _RETURNCODE.search(c.result or "")
            if m and m.group(1) != "0":
                c = ToolUse(c.name, c.arguments, None, c.result, c.id)
            calls.append(c)
        out.append(Turn(t.program, tuple(calls), t.output))
    return out, options


def records(name: str) -> list[dict]:
    if DATA_DIR is None:
        pytest.skip(SKIP_NO_DATA)
    path = DATA_DIR / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def shape(messages: list[Message]) -> list[tuple]:
    """What a round trip keeps: role, content, calls and the ids that tie them."""
    return [(m.role, m.content, m.tool_calls, m.tool_call_id) for m in messages]


def sections(text: str) -> list[str]:
    return [s.strip() for s in re.findall(r"^## (\w[\w ]*)", text, flags=re.M)]


# ------------------------------------------------------------------------- Turn


def test_turn_normalizes_its_fields():
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    t = Turn(
        "print(x)",
        tool_calls=[{"name": "read", "arguments": {"path": "a.py"}, "result": "ok"}],
        output="one\ntwo",
        started_at=when,
        ended_at=when.timestamp() + 2.5,
    )
    assert t.tool_calls == (ToolUse("read", '{"path": "a.py"}', "ok"),)
    assert t.output == ("one", "two")
    assert t.duration == 2.5 and not t.failed
    assert Turn(output=["a\nb", "c"]).output == ("a", "b", "c")
    assert Turn(error="boom").failed and ToolUse("x", error="no").failed


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"program": 3}, "program must be a string"),
        ({"tool_calls": [{"name": ""}]}, "non-empty name"),
        ({"tool_calls": [{"name": "x", "args": {}}]}, "unknown tool-call fields"),
        ({"tool_calls": [{"name": "x", "arguments": 3}]}, "mapping or JSON text"),
        ({"output": [1]}, "printed output must be strings"),
        ({"error": 5}, "a turn's error must be a string"),
        ({"started_at": "noon"}, "datetime or seconds"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_bad_turn_is_named_by_index(bad, words):
    with pytest.raises(InvalidTurnError, match=words) as info:
        render([Turn("fine"), bad])
    assert info.value.index == 1 and isinstance(info.value, ValueError)


def test_turns_must_be_a_sequence():
    with pytest.raises(InvalidTurnError, match="sequence"):
        render("not turns")


# ------------------------------------------------------------- from messages, full


def test_examples_round_trip_through_turns():
    for record in example_records():
        messages = from_openai(record["messages"])
        turns, options = turns_from_messages(messages)
        assert len(turns) == sum(m.role == "assistant" for m in messages)
        out, stats = FullHistory().to_messages(turns, {}, options)
        assert shape(out) == shape(messages), record["id"]
        assert stats.tokens == COUNTER.count_messages(out) and stats.turns == len(turns)


@pytest.mark.parametrize("name", ["mini_swe_agent", "swe_agent", "tau_airline"])
def test_shared_histories_round_trip_through_turns(name):
    for record in records(name):
        messages = from_openai(record["messages"])
        turns, options = turns_from_messages(messages)
        out, _ = FullHistory().to_messages(turns, {}, options)
        assert shape(out) == shape(messages), record["id"]


def test_full_history_renders_errors_output_and_missing_ids():
    turns = [
        Turn("run", tool_calls=[ToolUse("sh", {"c": "ls"}, error="denied")], output="x"),
        Turn("again", error="Traceback ...\nValueError: bad"),
    ]
    out, stats = FullHistory(mission="do it").to_messages(turns)
    assert [m.role for m in out] == ["user", "assistant", "tool", "user", "assistant", "user"]
    assert out[1].tool_calls[0].id == "call_1_1" and out[2].tool_call_id == "call_1_1"
    assert out[2].metadata["is_error"] and out[2].content == "denied"
    assert out[5].content == "Error:\nTraceback ...\nValueError: bad"
    to_openai(out), to_anthropic(out)  # valid input for both APIs
    assert stats.tool_calls_total == stats.tool_calls_shown == 1


# ------------------------------------------------------------------ coalesced


def calls_turns(n: int, *, lines_per_turn: int = 2) -> list[Turn]:
    return [
        Turn(
            f"step {t}",
            tool_calls=[ToolUse("read", {"path": f"src/mod_{t}.py"}, f"contents of mod_{t}")],
            output=[f"turn {t} line {k}" for k in range(lines_per_turn)],
        )
        for t in range(1, n + 1)
    ]


def test_coalesced_is_a_system_and_one_user_message_in_the_documented_order():
    def lookup(flight: str) -> str:
        """Look a flight up.

        Long details."""
        return flight

    turns = calls_turns(3)
    turns[-1] = Turn("x = 1/0", output="partial", error="Traceback\nZeroDivisionError: no")
    out, stats = SingleUserCoalesced().to_messages(
        turns,
        {"flights": ["HAT001", "HAT002"]},
        {
            "mission": "Rebook the flight",
            "tools": [lookup],
            "expected_output": "A confirmation",
            "max_turns": 10,
        },
    )
    assert [m.role for m in out] == ["system", "user"]
    text = out[1].text
    assert sections(text) == [
        "Task",
        "Tools",
        "Data",
        "Expected output",
        "Tool calls",
        "Printed output",
        "Error in the last turn",
    ]
    assert "- lookup(flight: str) -> str: Look a flight up." in text
    assert "- flights: list len=2 = ['HAT001', 'HAT002']" in text
    assert "### turn 2: read" in text and "contents of mod_2" in text
    assert "ZeroDivisionError: no" in text and "x = 1/0" in text
    assert text.endswith("Turns left: 7")
    assert stats == RenderStats("single_user_coalesced", 3, 2, stats.tokens, 2, 2, 5, 5)
    assert stats.tokens == COUNTER.count_messages(out)


def test_coalesced_keeps_the_newest_calls_and_lines_and_counts_the_rest():
    turns = calls_turns(30)
    out, stats = SingleUserCoalesced().to_messages(turns)
    text = out[1].text
    assert (stats.tool_calls_total, stats.tool_calls_shown, stats.tool_calls_dropped) == (
        30,
        20,
        10,
    )
    assert (stats.output_lines_total, stats.output_lines_shown) == (60, 15)
    assert stats.output_lines_dropped == 45
    assert "mod_30" in text and "mod_11.py" in text and "mod_10.py" not in text
    assert "the last 20 of 30" in text and "the last 15 of 60 lines" in text
    assert "turn 30 line 1" in text and "turn 22 line 1" not in text
    few, _ = SingleUserCoalesced(max_tool_calls=3, max_output_lines=0).to_messages(turns)
    assert "mod_27.py" not in few[1].text and "mod_28.py" in few[1].text
    assert "turn 30 line 1" not in few[1].text


def test_results_of_kept_calls_stay_visible_shortened_with_their_identifiers():
    listing = "\n".join(f"src/pkg/module_{k}.py: {'x' * 60}" for k in range(200))
    turns = [Turn("ls", tool_calls=[ToolUse("sh", {"cmd": "grep -rn x src"}, listing)])]
    out, stats = SingleUserCoalesced(max_result_tokens=120).to_messages(turns)
    text = out[1].text
    body = text.split("### turn 1: sh", 1)[1]
    assert COUNTER.count_text(body) <= 120 + 30  # the result's allowance, plus the head
    assert "[also in the full text: " in body and "src/pkg/module_" in body
    assert stats.results_shortened == 1


def test_error_block_only_when_the_last_turn_failed_and_recovered_errors_collapse():
    trace = "Traceback (most recent call last):\n  File 'a.py', line 3\nKeyError: 'seat'"
    failed = Turn("book()", tool_calls=[ToolUse("book", {"f": "HAT1"}, error=trace)], error=trace)
    fixed = Turn("book(seat=1)", tool_calls=[ToolUse("book", {"f": "HAT1"}, "ok")])
    out, stats = SingleUserCoalesced().to_messages([failed, fixed])
    text = out[1].text
    assert "Error in the last turn" not in text and "most recent call last" not in text
    assert "error (recovered from): KeyError: 'seat'" in text
    assert "Earlier failed turn 1, since recovered from" in text
    assert stats.errors_recovered == 1
    out, stats = SingleUserCoalesced().to_messages([fixed, failed])
    text = out[1].text
    assert "## Error in the last turn (turn 2)" in text and "most recent call last" in text
    assert text.count("KeyError: 'seat'") == 1  # the call's error is the turn's: said once
    assert "error: in the error block below" in text
    assert "since recovered" not in text and stats.errors_recovered == 0


def test_turns_left_and_the_final_turn_notice():
    turns = calls_turns(4)

    def last_line(n):
        out, _ = SingleUserCoalesced(max_turns=n).to_messages(turns)
        return out[1].text.splitlines()[-1]

    assert last_line(9) == "Turns left: 5"
    assert last_line(5).startswith("This is your final turn")
    assert "Turns left" not in SingleUserCoalesced().to_messages(turns)[0][1].text


def test_the_first_turn_still_gets_a_user_message():
    out, stats = SingleUserCoalesced(system=None).to_messages([])
    assert out == [Message("user", "This is the first turn.")] and stats.turns == 0
    to_anthropic(out)


def test_memory_samples_are_bounded():
    class Loud:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    class Plain:
        pass

    memory = {"rows": list(range(100_000)), "text": "y" * 50_000, "odd": Loud(), "p": Plain()}
    memory.update({f"v{k}": k for k in range(40)})
    out, _ = SingleUserCoalesced(max_memory_items=5, max_value_chars=60).to_messages([], memory)
    data = out[1].text.split("## Data\n", 1)[1]
    rows = data.splitlines()
    assert len(rows) == 6 and rows[-1] == "- ... and 39 more"
    plain = SingleUserCoalesced().to_messages([], {"p": Plain()})[0][1].text
    assert plain.endswith("Plain object>") and " at 0x" not in plain  # alike in any process
    assert rows[0].startswith("- rows: list len=100000 = [0, 1, 2, 3, 4, ...]")
    assert "len=50000" in rows[1] and len(rows[1]) < 100
    assert rows[2] == "- odd: Loud = <Loud: repr failed with RuntimeError>"


def test_tool_descriptions_in_every_common_form():
    class Named:
        name = "search"
        description = "Search the code.\nMore."

    openai_tool = {
        "type": "function",
        "function": {
            "name": "book",
            "description": "Book a seat",
            "parameters": {"properties": {"flight": {}, "seat": {}}},
        },
    }
    anthropic_tool = {"name": "cancel", "input_schema": {"properties": {"id": {}}}}
    out, _ = render([], tools=[openai_tool, anthropic_tool, Named(), "shell: run it", len])
    tools = out[1].text.split("## Tools\n", 1)[1].splitlines()
    assert tools[:4] == [
        "- book(flight, seat): Book a seat",
        "- cancel(id)",
        "- search: Search the code.",
        "- shell: run it",
    ]
    assert tools[4].startswith("- len(obj, /)")
    with pytest.raises(ConfigurationError, match="tools"):
        SingleUserCoalesced(tools=[42])
    with pytest.raises(ConfigurationError, match="tools"):
        SingleUserCoalesced(tools="shell")


def test_budget_drops_the_oldest_entries_first_and_raises_when_the_task_alone_is_over():
    turns = calls_turns(30, lines_per_turn=5)
    full, _ = SingleUserCoalesced().to_messages(turns)
    budget = COUNTER.count_messages(full) // 2
    out, stats = SingleUserCoalesced(budget=budget).to_messages(turns)
    assert stats.tokens <= budget and stats.tokens == COUNTER.count_messages(out)
    assert stats.tool_calls_shown < 20 and "mod_30.py" in out[1].text
    assert "turn 30 line 4" in out[1].text
    with pytest.raises(BudgetError) as info:
        SingleUserCoalesced(budget=40).to_messages(turns, {}, {"mission": "word " * 200})
    assert info.value.budget == 40 and info.value.required > 40


# --------------------------------------------------------------- pure, deterministic


def test_rendering_is_pure_and_deterministic():
    record = example_records()[2]  # the coding agent
    turns, options = agent_turns(from_openai(record["messages"]))
    memory = {"seen": {"a.py", "b.py"}, "notes": ["x"] * 3}
    before = copy.deepcopy((turns, memory, options))
    for renderer in (SingleUserCoalesced(max_turns=60), FullHistory(), _pressure()):
        first = renderer.to_messages(turns, memory, options)
        again = renderer.to_messages(turns, memory, options)
        on_copy = renderer.to_messages(*copy.deepcopy((turns, memory, options)))
        assert first == again == on_copy
        assert (turns, memory, options) == before


def _pressure() -> PressureTriggered:
    return PressureTriggered(trigger_tokens=2000)


# ----------------------------------------------------------------- normalization


def test_normalize_renderer_takes_the_same_forms_as_strategies():
    assert normalize_renderer(None) is None and normalize_renderer(False) is None
    default = normalize_renderer(True)
    assert isinstance(default, SingleUserCoalesced) and default.options["max_tool_calls"] == 20
    assert isinstance(normalize_renderer(FullHistory), FullHistory)
    assert isinstance(normalize_renderer("full_history"), FullHistory)
    inst = SingleUserCoalesced(max_output_lines=3)
    assert normalize_renderer(inst) is inst
    merged = normalize_renderer((SingleUserCoalesced, {"max_tool_calls": 5}), max_turns=9)
    assert merged.options["max_tool_calls"] == 5 and merged.options["max_turns"] == 9
    assert merged.options["max_output_lines"] == 15
    as_dict = normalize_renderer({"renderer": "single_user_coalesced", "max_tool_calls": 2})
    assert as_dict.options["max_tool_calls"] == 2
    child = normalize_renderer((inst, {"mission": "sub"}))
    assert child.options["max_output_lines"] == 3 and child.options["mission"] == "sub"
    for bad in (3, "nope", ("single_user_coalesced", {"max_tool_calls": -1}), {"x": 1}):
        with pytest.raises(ConfigurationError):
            normalize_renderer(bad)
    with pytest.raises(ConfigurationError, match="unknown option 'max_tools'"):
        SingleUserCoalesced(max_tools=3)
    with pytest.raises(ConfigurationError, match="max_turns"):
        SingleUserCoalesced().to_messages([], {}, {"max_turns": 0})


def test_sub_agents_inherit_their_parents_options():
    parent = normalize_renderer(
        (SingleUserCoalesced, {"max_tool_calls": 4, "mission": "parent", "tools": ["sh"]})
    )
    sub = normalize_renderer(True, parent=parent, mission="child task")
    assert sub.options["max_tool_calls"] == 4 and sub.options["tools"] == ("sh",)
    assert sub.options["mission"] == "child task"
    assert parent.child(max_tool_calls=1).options["mission"] == "parent"
    full = normalize_renderer(FullHistory, parent=parent)  # takes only what it knows
    assert full.options["mission"] == "parent" and "tools" not in full.options


def test_a_custom_renderer_is_a_protocol_away():
    class Last:
        def name(self) -> str:
            return "last"

        def to_messages(self, turns, memory=None, options=None):
            msgs = [Message("user", turns[-1].program if turns else "")]
            return msgs, RenderStats("last", len(turns), 1, 0)

    assert isinstance(Last(), Renderer)
    renderer = normalize_renderer(Last)
    assert render([Turn("hi")], renderer=renderer)[0] == [Message("user", "hi")]
    ctxfold.register_renderer("last-test", Last)
    try:
        assert isinstance(normalize_renderer("last-test"), Last)
        with pytest.raises(ConfigurationError, match="already registered"):
            ctxfold.register_renderer("last-test", Last)
    finally:
        ctxfold.register_renderer("last-test", Last, replace=True)


# ------------------------------------------------------------------- pressure


def test_pressure_renders_the_full_history_until_a_trigger_fires():
    record = example_records()[2]
    turns, options = agent_turns(from_openai(record["messages"]))
    full, full_stats = FullHistory().to_messages(turns, {}, options)
    limit = full_stats.tokens
    same, stats = PressureTriggered(trigger_tokens=limit).to_messages(turns, {}, options)
    assert same == full and stats.trigger is None
    out, stats = PressureTriggered(trigger_tokens=limit - 1).to_messages(turns, {}, options)
    assert [m.role for m in out] == ["system", "user"] and stats.trigger == "tokens"
    assert stats.renderer == "pressure:single_user_coalesced" and stats.tokens < limit
    by_turns = PressureTriggered(trigger_turns=len(turns) - 1, max_tool_calls=3)
    out, stats = by_turns.to_messages(turns, {}, options)
    assert stats.trigger == "turns" and stats.tool_calls_shown == 3
    few, stats = by_turns.to_messages(turns[:5], {}, options)
    assert stats.trigger is None and len(few) > 2


def test_pressure_with_a_compressor_fallback_fits_the_budget():
    record = example_records()[2]
    turns, options = agent_turns(from_openai(record["messages"]))
    renderer = PressureTriggered(
        trigger_tokens=3000, fallback=("sliding_window", {"keep_first": 2})
    )
    out, stats = renderer.to_messages(turns, {}, options)
    assert stats.trigger == "tokens" and stats.tokens <= 3000
    assert stats.renderer == "pressure:SlidingWindow"
    assert 0 <= stats.output_lines_shown <= stats.output_lines_total
    assert COUNTER.count_messages(out) == stats.tokens
    full, _ = FullHistory().to_messages(turns, {}, options)
    check_tool_integrity(full, out)


def test_pressure_checks_its_settings():
    with pytest.raises(ConfigurationError, match="trigger_tokens"):
        PressureTriggered()
    with pytest.raises(ConfigurationError, match="budget"):
        PressureTriggered(trigger_turns=3, fallback="auto")
    with pytest.raises(ConfigurationError, match="unknown option 'colour'"):
        PressureTriggered(trigger_turns=3, colour="red")
    with pytest.raises(ConfigurationError, match="fallback"):
        PressureTriggered(trigger_turns=3, fallback=42)
    with pytest.raises(ConfigurationError, match="max_tool_calls"):
        PressureTriggered(trigger_turns=3, max_tool_calls=-1)  # checked when given


# --------------------------------------------------------- real agent histories


@pytest.mark.parametrize("name", ["mini_swe_agent", "swe_agent"])
def test_coalesced_renderings_of_real_runs_keep_the_contract(name):
    renderer = SingleUserCoalesced()
    pressure = PressureTriggered(trigger_tokens=8000)
    for record in records(name):
        messages = from_openai(record["messages"])
        turns, options = agent_turns(messages)
        out, stats = renderer.to_messages(turns, {}, options)
        switched, why = pressure.to_messages(turns, {}, options)
        if COUNTER.count_messages(messages) <= 8000:
            assert shape(switched) == shape(messages) and why.trigger is None
        else:
            assert switched == out and why.trigger == "tokens"
        assert [m.role for m in out] == ["system", "user"], record["id"]
        to_openai(out), to_anthropic(out)
        assert stats.turns == len(turns) and stats.tokens == COUNTER.count_messages(out)
        n_calls = sum(len(t.tool_calls) for t in turns)
        assert stats.tool_calls_total == n_calls
        assert stats.tool_calls_shown == min(n_calls, 20)
        last = [c for t in turns for c in t.tool_calls][-stats.tool_calls_shown :]
        for c in last:  # every kept call is there, with (the start of) its result
            assert f": {c.name}(" in out[1].text
        if len(turns) > 25:
            assert stats.tokens < COUNTER.count_messages(messages), record["id"]
        budget = max(stats.tokens // 2, 1)
        try:
            _, small_stats = renderer.to_messages(turns, {}, {**options, "budget": budget})
        except BudgetError as exc:
            assert exc.required > budget
        else:
            assert small_stats.tokens <= budget


# --------------------------------------------------------------- shorten


@pytest.mark.parametrize("limit", [40, 150, 600])
def test_shorten_fits_exactly_and_keeps_what_fits(limit):
    texts = [m["content"] for r in example_records() for m in r["messages"] if m["content"]]
    for text in texts:
        out = shorten(text, limit, COUNTER)
        assert COUNTER.count_text(out) <= limit
        if COUNTER.count_text(text) <= limit:
            assert out == text
    pretty = json.dumps({"items": [{"id": k, "name": f"n{k}"} for k in range(5)]}, indent=4)
    assert shorten(pretty, COUNTER.count_text(pretty) - 1, COUNTER) == json.dumps(
        json.loads(pretty), separators=(",", ":")
    )


# --------------------------------------------------------------- properties

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)
_call = st.builds(
    ToolUse,
    st.sampled_from(["read", "sh", "book"]),
    st.dictionaries(st.sampled_from(["a", "b"]), _text, max_size=2),
    st.none() | _text,
    st.none() | _text,
)
_turn = st.builds(
    Turn,
    _text,
    st.lists(_call, max_size=3),
    st.lists(_text, max_size=4),
    st.none() | _text,
)


@settings(max_examples=60, deadline=None)
@given(
    turns=st.lists(_turn, max_size=8),
    limits=st.tuples(st.integers(0, 5), st.integers(0, 5)),
    budget=st.none() | st.integers(60, 400),
)
def test_any_turns_render_deterministically_within_the_budget(turns, limits, budget):
    renderer = SingleUserCoalesced(
        max_tool_calls=limits[0], max_output_lines=limits[1], budget=budget
    )
    try:
        out, stats = renderer.to_messages(turns)
    except BudgetError as exc:
        assert budget is not None and exc.required > budget
        return
    assert renderer.to_messages(turns) == (out, stats)
    assert [m.role for m in out] == ["system", "user"]
    assert stats.tool_calls_shown <= min(limits[0], stats.tool_calls_total)
    assert stats.output_lines_shown <= min(limits[1], stats.output_lines_total)
    assert budget is None or stats.tokens <= budget
    full, _ = FullHistory().to_messages(turns)
    to_openai(full), to_anthropic(full)
    back, _ = turns_from_messages(full)
    assert len(back) == len(turns)
