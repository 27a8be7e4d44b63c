"""The agent's working state in a note: the files its tool calls touched (the last
action on each) and the errors no later run of the same command resolved, read from
the calls of the clients we meet (a shell tool, SWE-agent's and Anthropic's editors,
Claude Code's Read/Edit/Write), carried from note to note in a session."""

from __future__ import annotations

import json
from pathlib import Path

import ctxfold
from ctxfold import AutoCompressor, Message, ToolCall, from_anthropic, get_counter
from ctxfold.result import NOTE_KEY, is_note
from ctxfold.strategies.auto.calls import Touch, plan_of, touches
from ctxfold.strategies.auto.outcomes import failure
from ctxfold.strategies.auto.state import OpenError, WorkingState, working_state
from ctxfold.validity import turn_order_problems
from ctxfold.wire.claude_code import read_claude_code_file

COUNTER = get_counter("o200k_base")


def _call(name: str, **args: object) -> ToolCall:
    return ToolCall("c", name, json.dumps(args))


def test_an_editor_a_reader_and_a_writer_name_their_file_and_action() -> None:
    editor = "str_replace_editor"
    assert touches(_call(editor, command="view", path="/repo/a.py")) == [("/repo/a.py", Touch.READ)]
    assert touches(_call(editor, command="create", path="b.py", file_text="x")) == [
        ("b.py", Touch.CREATED)
    ]
    assert touches(_call(editor, command="str_replace", path="a.py", old_str="x")) == [
        ("a.py", Touch.EDITED)
    ]
    assert touches(_call("Edit", file_path="src/c.ts", old_string="a")) == [
        ("src/c.ts", Touch.EDITED)
    ]
    assert touches(_call("Read", file_path="src/c.ts")) == [("src/c.ts", Touch.READ)]
    assert touches(_call("Write", file_path="notes.md", content="x")) == [
        ("notes.md", Touch.CREATED)
    ]
    assert touches(_call("get_reservation_details", reservation_id="JG7FMM")) == []


def test_a_shell_command_reads_writes_and_runs_files_by_its_verbs() -> None:
    def shell(command: str) -> list[tuple[str, Touch]]:
        return touches(_call("bash", command=command))

    assert shell("cat -n src/app/models.py | head -50") == [("src/app/models.py", Touch.READ)]
    assert shell("sed -i 's/old/new/' src/app/models.py") == [("src/app/models.py", Touch.EDITED)]
    # a here-document's body is code, not commands; the file it writes is created
    written = "cat > repro.py << 'EOF'\nimport os\nprint(open('secret.txt').read())\nEOF\n"
    assert shell(written + "python repro.py") == [
        ("repro.py", Touch.CREATED),
        ("repro.py", Touch.RAN),
    ]
    assert shell("cd /repo && python -m pytest tests/test_a.py::test_b -q") == [
        ("tests/test_a.py", Touch.RAN)
    ]
    assert shell('grep -rn "self.items" src/ tests/test_x.py') == [("tests/test_x.py", Touch.READ)]
    assert shell("echo done >> log.txt 2>/dev/null") == [("log.txt", Touch.EDITED)]
    assert shell("ls -la src/ && git status") == []
    assert shell("curl -s https://example.com/a.json") == []
    # what was tried and abandoned: a change put back, a file removed
    assert shell("git checkout -- src/pay.py && rm -f repro.py") == [
        ("src/pay.py", Touch.REVERTED),
        ("repro.py", Touch.DELETED),
    ]
    assert shell("git restore src/a.py; git rm old/legacy.py") == [
        ("src/a.py", Touch.REVERTED),
        ("old/legacy.py", Touch.DELETED),
    ]
    assert shell("git checkout feature/x && git checkout -b fix/y") == []  # branches


def test_a_result_reports_an_error_by_its_exit_status_or_an_error_line() -> None:
    framed = "<returncode>{}</returncode>\n<output>\n{}\n</output>"
    trace = "Traceback (most recent call last):\n  File \"t.py\", line 3\nKeyError: 'rule'"
    assert failure(framed.format(1, trace)) == "exit 1: KeyError: 'rule'"
    assert failure(framed.format(0, "all good, 0 errors")) is None
    assert failure(framed.format(2, "")) == "exit 2"
    assert failure("Error: reservation not found") == "Error: reservation not found"
    assert failure("FAILED tests/test_a.py::test_b - assert 1 == 2\n1 failed") == (
        "FAILED tests/test_a.py::test_b - assert 1 == 2"
    )
    # prose that names errors reports none
    assert failure("rules/L001.py checks the layout for errors and reports them.") is None
    assert len(failure("Error: " + "x" * 5000) or "") <= 160


def _run(*steps: tuple[str, str]) -> list[Message]:
    """A shell agent's run: each step a command and its result."""
    msgs = [Message("system", "You are a coding agent."), Message("user", "Fix the bug.")]
    for k, (command, result) in enumerate(steps):
        msgs += [
            Message(
                "assistant",
                None,
                tool_calls=(ToolCall(f"c{k}", "bash", json.dumps({"command": command})),),
            ),
            Message("tool", result, tool_call_id=f"c{k}"),
        ]
    return msgs


def test_an_error_stays_open_until_the_same_command_succeeds() -> None:
    msgs = _run(
        ("python repro.py", "Traceback...\nValueError: bad currency"),
        ("python -m pytest tests/test_b.py", "FAILED tests/test_b.py::t\n1 failed"),
        ("sed -i 's/a/b/' src/pay.py", ""),
        ("cd /repo && python repro.py", "ok: 42"),  # the same last step: resolved
    )
    state = working_state(msgs, range(len(msgs)))
    assert state.errors == (
        OpenError("python -m pytest tests/test_b.py", "FAILED tests/test_b.py::t"),
    )
    assert dict(state.files) == {
        "repro.py": Touch.RAN,
        "tests/test_b.py": Touch.RAN,
        "src/pay.py": Touch.EDITED,
    }
    assert [p for p, _ in state.files][-1] == "repro.py"  # the last touched last
    lines = state.lines(200, COUNTER)
    assert lines == [
        "Files: src/pay.py (edited), repro.py (ran), tests/test_b.py (ran)",
        "Unresolved: `python -m pytest tests/test_b.py` -> FAILED tests/test_b.py::t",
        "Ran: `cd /repo && python repro.py`; `sed -i 's/a/b/' src/pay.py`",  # newest first
    ]
    assert state.commands == ("sed -i 's/a/b/' src/pay.py", "cd /repo && python repro.py")
    assert state.lines(200, COUNTER, elsewhere={"cd /repo && python repro.py"})[-1] == (
        "Ran: `sed -i 's/a/b/' src/pay.py`"  # a command the output shows is no news
    )
    assert state.lines(4, COUNTER) == []  # nothing fits: nothing is cut mid-line
    assert state.lines(12, COUNTER) == ["Files: src/pay.py (edited)"]  # changed first


def test_a_note_hands_its_state_on_and_an_edited_one_is_ignored() -> None:
    state = WorkingState(
        (("a.py", Touch.EDITED),), (OpenError("make", "error: expected ';'"),), ("make -j2",)
    )
    assert WorkingState.from_meta(json.loads(json.dumps(state.meta()))) == state
    for edited in (
        None,
        "files",
        {"files": [["a.py", "burned"], ["b.py"], [1, "read"]], "errors": [["x"], [1, 2]]},
        {"files": "a.py", "errors": None, "commands": [1, ["make"], None]},
    ):
        assert WorkingState.from_meta(edited) == WorkingState()


def test_the_note_opens_with_the_files_touched_and_the_unresolved_errors() -> None:
    steps = [(f"cat src/mod_{k}.py", "def f():\n    return 1\n" * 30) for k in range(6)]
    steps.append(("python run_checks.py", "Traceback...\nKeyError: 'merchant_7_token'"))
    steps.append(("sed -i 's/token/key/' src/mod_3.py", ""))
    steps += [(f"cat src/mod_{k}.py", "def g():\n    return 2\n" * 30) for k in range(6, 12)]
    msgs = _run(*steps)
    budget = COUNTER.count_messages(msgs) // 4
    out = list(AutoCompressor().compress(msgs, budget=budget, counter=COUNTER).messages)
    note = next(m for m in out if is_note(m))
    lines = note.text.splitlines()
    assert lines[1].startswith("Files: ") and "src/mod_3.py (edited)" in lines[1]
    assert lines[2] == "Unresolved: `python run_checks.py` -> KeyError: 'merchant_7_token'"
    assert COUNTER.count_messages(out) <= budget and turn_order_problems(out) == []
    assert note.metadata[NOTE_KEY]["state"]["errors"] == [
        ["python run_checks.py", "KeyError: 'merchant_7_token'"]
    ]


def test_a_session_keeps_the_state_of_every_round_it_folded() -> None:
    """The first round's files and open error are in the last note, though the
    messages that showed them were folded two compactions before."""
    session = ctxfold.Session(budget=2400)
    rounds: set[object] = set()
    first = _run(
        ("cat src/billing/rates.py", "RATE = 3\n" * 40),
        (
            "python -m pytest tests/test_rates.py",
            "E   AssertionError\nFAILED tests/test_rates.py::t\n1 failed",
        ),
    )
    session.add(first)
    for k in range(12):
        session.add(
            [
                Message(
                    "assistant",
                    None,
                    tool_calls=(
                        ToolCall(
                            f"x{k}",
                            "bash",
                            json.dumps({"command": f"grep -n rate docs/page_{k}.md"}),
                        ),
                    ),
                ),
                Message(
                    "tool",
                    f"docs/page_{k}.md:{k}: the rate table, row {k}\n" * 40,
                    tool_call_id=f"x{k}",
                ),
            ]
        )
        out = list(session.render().messages)
        assert COUNTER.count_messages(out) <= 2400
        rounds.update(m.metadata[NOTE_KEY].get("round") for m in out if is_note(m))
    notes = [m for m in out if is_note(m)]
    assert notes and len(rounds) >= 2  # compacted twice at least
    text, state = notes[0].text, notes[0].metadata[NOTE_KEY]["state"]
    unresolved = "`python -m pytest tests/test_rates.py` -> FAILED tests/test_rates.py::t"
    assert f"Unresolved: {unresolved}" in text
    assert "Files: tests/test_rates.py (ran)" in text  # what ran before what was read
    assert ["src/billing/rates.py", "read"] in state["files"]  # handed on, if not shown


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_a_claude_code_session_read_from_its_log() -> None:
    """Claude Code's Read, Edit and Bash tools, read from the example session log (the
    Anthropic format): the source and the test edited, the suite run; the first run's
    failure is resolved by the whole suite passing after the fix."""
    log = read_claude_code_file(EXAMPLES / "claude_code_session.jsonl")
    msgs = from_anthropic(log.messages, system=log.system)
    state = working_state(msgs, range(len(msgs)))
    assert dict(state.files) == {
        "/home/dev/pagination-demo/src/pages.py": Touch.EDITED,
        "/home/dev/pagination-demo/tests/test_pages.py": Touch.EDITED,
        "tests/test_pages.py": Touch.RAN,
    }
    assert state.errors == ()
    first_run = next(i for i, m in enumerate(msgs) if m.role == "tool") + 1
    early = working_state(msgs, range(first_run))  # before the fix: the failure is open
    assert early.errors == (
        OpenError("python -m pytest tests/test_pages.py -q", "1 failed, 1 passed in 0.04s"),
    )


def test_swe_agent_function_calls_and_a_file_listing_that_names_errors() -> None:
    """SWE-agent's own tools (open, create, edit of the open file): a listing of source
    code holding ``except ... as error:`` reports no error."""
    record = json.loads((EXAMPLES / "swe_agent_marshmallow.json").read_text())
    msgs = ctxfold.from_openai(record["messages"])
    state = working_state(msgs, range(len(msgs)))
    assert dict(state.files) == {
        "setup.py": Touch.READ,
        "src/marshmallow/fields.py": Touch.READ,
        "reproduce.py": Touch.DELETED,  # created, run, then removed (rm reproduce.py)
    }
    assert state.errors == ()
    listing = "1533:            except FieldInstanceResolutionError as error:\n1534: pass"
    assert failure(listing) is None and failure("log = logging.ERROR") is None


def test_a_passing_run_resolves_the_failures_it_covers() -> None:
    msgs = _run(
        ("pytest tests/a.py::test_x", "FAILED tests/a.py::test_x - KeyError"),
        ("pytest tests/b.py", "E   AssertionError\n1 failed"),
        ("python a.py", "Traceback...\nOSError: gone"),
        ("pytest tests/a.py -q", "3 passed"),  # the whole file: test_x with it
        ("python b.py", "fine"),  # another program file: a.py still failing
    )
    state = working_state(msgs, range(len(msgs)))
    assert [e.command for e in state.errors] == ["pytest tests/b.py", "python a.py"]
    msgs += _run(("pytest -q", "12 passed"))[2:]  # every test: b.py's failure is over
    assert [e.command for e in working_state(msgs, range(len(msgs))).errors] == ["python a.py"]


def test_a_credential_in_a_command_or_a_path_never_reaches_the_state() -> None:
    """The state quotes the command that failed: a token in it is masked, in the
    note and in its metadata, and a path holding one is not listed."""
    token = "ghp_" + "R8sT2uV4wX6yZ8aB0cD2eF4gH6iJ8kL0mN2o"  # shaped as GitHub issues them
    msgs = _run(
        (f'curl -H "Authorization: token {token}" https://api.github.com/x', "Error: 401"),
        (f"cat /tmp/{token}.json", "{}"),
        ("cat src/app.py", "x = 1"),
        (f"git push https://x:{token}@github.com/o/r", "Everything up-to-date"),
    )
    state = working_state(msgs, range(len(msgs)))
    text = json.dumps(state.meta()) + "\n".join(state.lines(500, COUNTER))
    assert token not in text and text.count("[secret]") >= 4  # failed, ran, in meta and note
    assert dict(state.files) == {"src/app.py": Touch.READ}


def test_a_hostile_command_and_result_of_100_kb_are_read_whole() -> None:
    """A 100 KB command (one word, a path too long to be one) and a 100 KB result (an
    error line of it) give a state of bounded lines."""
    msgs = _run(
        ("cat " + "a/" * 50_000 + "x.py", "Error: " + "x" * 100_000),
        ("python run.py " + "--flag " * 15_000, "ok\n" * 30_000 + "FAILED " + "t" * 100_000),
    )
    state = working_state(msgs, range(len(msgs)))
    assert state.files == (("run.py", Touch.RAN),)
    assert [len(e.error) for e in state.errors] == [160, 160]
    assert all(len(e.command) <= 100 for e in state.errors)


def test_a_hostile_plan_of_100_kb_gives_bounded_steps() -> None:
    """A to-do list of 20,000 steps and one step of 100 KB: its first 30 steps are
    read, each shortened to 100 characters; the plan's line stays within its room."""
    many = _todo(0, *[(f"step {k}", "pending") for k in range(20_000)])
    state = working_state(many, range(2))
    assert len(state.plan) == 30 and state.plan[0] == ("todo", "step 0")
    huge = _todo(1, ("x" * 100_000, "in_progress"), ("y " * 50_000, "weird-status"))
    state = working_state(huge, range(2))
    assert [len(step) for _, step in state.plan] == [100, 100]
    assert [status for status, _ in state.plan] == ["now", "todo"]
    assert COUNTER.count_text("\n".join(state.lines(80, COUNTER))) <= 80


def test_arguments_nested_past_what_json_is_read_to_are_no_arguments() -> None:
    """A model's arguments nested 100,000 deep (the standard parser recurses until it
    fails) are read as no arguments: no file, the call named as it was written."""
    deep = "[" * 100_000 + "]" * 100_000
    msgs = [
        Message("user", "Go."),
        Message("assistant", None, tool_calls=(ToolCall("d", "bash", deep),)),
        Message("tool", "Error: bad arguments", tool_call_id="d"),
    ]
    state = working_state(msgs, range(len(msgs)))
    assert state.files == () and state.errors[0].error == "Error: bad arguments"
    assert state.errors[0].command.startswith("bash([[[") and len(state.errors[0].command) <= 100


def _todo(k: int, *steps: tuple[str, str]) -> list[Message]:
    """Claude Code's TodoWrite call (``todos`` of content, status, activeForm), answered."""
    todos = [{"content": c, "status": s, "activeForm": c + "ing"} for c, s in steps]
    call = ToolCall(f"t{k}", "TodoWrite", json.dumps({"todos": todos}))
    return [
        Message("assistant", None, tool_calls=(call,)),
        Message("tool", "Todos have been modified successfully.", tool_call_id=f"t{k}"),
    ]


def test_the_latest_plan_an_agent_wrote_is_its_state_and_a_newer_one_shown_wins() -> None:
    """Claude Code's TodoWrite and Codex's update_plan are read as plans (each
    replacing the one before); the note opens with the last plan its folded messages
    wrote, unless a message kept beside it writes a newer one."""
    codex = ToolCall(
        "u",
        "update_plan",
        json.dumps({"plan": [{"step": "Find the bug", "status": "completed"}]}),
    )
    assert plan_of(codex) == (("done", "Find the bug"),)
    assert plan_of(_call("bash", command="ls -la")) == ()
    assert plan_of(_call("search", queries=["a", "b"])) == ()  # a list, but no steps
    first = _todo(0, ("Reproduce the bug", "in_progress"), ("Fix rates.py", "pending"))
    second = _todo(1, ("Reproduce the bug", "completed"), ("Fix rates.py", "in_progress"))
    body = "".join(f"rate_{j} = load_rate({j}, region='eu-{j % 7}')\n" for j in range(60))
    steps = [(f"cat src/mod_{k}.py", body.replace("rate_", f"r{k}_")) for k in range(10)]
    msgs = _run(*steps[:5])
    msgs[2:2] = first + second
    msgs += _run(*steps[5:])[2:]
    state = working_state(msgs, range(len(msgs)))
    assert state.plan == (("done", "Reproduce the bug"), ("now", "Fix rates.py"))
    assert WorkingState.from_meta(json.loads(json.dumps(state.meta()))) == state
    assert state.lines(300, COUNTER)[0] == "Plan: [done] Reproduce the bug; [now] Fix rates.py"
    budget = COUNTER.count_messages(msgs) // 4
    out = list(AutoCompressor().compress(msgs, budget=budget, counter=COUNTER).messages)
    note = next(m for m in out if is_note(m))
    assert "Plan: [done] Reproduce the bug; [now] Fix rates.py" in note.text
    newer = _todo(2, ("Fix rates.py", "completed"), ("Run the suite", "in_progress"))
    out = list(AutoCompressor().compress([*msgs, *newer], budget=budget, counter=COUNTER).messages)
    note = next(m for m in out if is_note(m))
    assert "Plan: " not in note.text  # the newer plan is shown: the older is no news
    assert any("Run the suite" in c.arguments for m in out for c in m.tool_calls)


def test_a_long_plan_shows_how_many_steps_are_done_and_the_rest_that_fit() -> None:
    steps = [(f"Step {k} of the migration", "completed") for k in range(20)]
    steps += [("Backfill the ledger", "in_progress"), ("Drop the old table", "pending")]
    token = "sk-proj-" + "Z8aB0cD2eF4gH6iJ8kL0mN2oP4qR6sT8uV0wX2yZ4aB6cD8e"
    steps.append((f"Rotate the key {token}", "pending"))
    state = working_state(_todo(0, *steps), range(2))
    line = state.lines(60, COUNTER)[0]
    assert line.startswith("Plan: 20 done; [now] Backfill the ledger; [todo] Drop the old table")
    assert token not in json.dumps(state.meta()) and COUNTER.count_text(line) <= 60
    edited = {"plan": [["done", "a"], ["finished", "b"], ["todo", 3], "c"]}
    assert WorkingState.from_meta(edited).plan == (("done", "a"),)


def test_a_summarized_note_keeps_the_task_and_the_state_and_hands_them_on() -> None:
    """With an LLM summarizer the note's extractive lines become its summary, but the
    note still opens with the task and the working state, written by the same
    composer, and hands the state on: a session's later notes name the error met in
    its first round."""

    def llm(messages: list[Message]) -> str:  # a chat model: prompt, then the text
        return "The agent read the billing modules and ran the rate tests."

    task = " ".join(f"Order {4000 + k} was billed at the wrong rate." for k in range(200))
    steps = [("python -m pytest tests/test_rates.py", "E   AssertionError\n1 failed")]
    body = "".join(f"rate_{j} = load_rate({j}, region='eu-{j % 7}')\n" for j in range(60))
    steps += [(f"cat src/mod_{k}.py", body.replace("rate_", f"r{k}_")) for k in range(8)]
    msgs = _run(*steps)
    msgs[1] = Message("user", task)
    budget = COUNTER.count_messages(msgs) // 4
    strategy = AutoCompressor(summarizer=llm, cache=False)
    out = list(strategy.compress(msgs, budget=budget, counter=COUNTER).messages)
    note = next(m for m in out if is_note(m))
    lines = note.text.splitlines()
    assert "earlier messages summarized]" in lines[0]
    assert lines[1].startswith("user: Order 4000 was billed at the wrong rate.")
    assert any(ln.startswith("Unresolved: `python -m pytest tests/test_rates.py`") for ln in lines)
    assert "The agent read the billing modules" in note.text
    meta = note.metadata[NOTE_KEY]
    assert meta["task"] == lines[1] and meta["state"]["errors"]
    assert COUNTER.count_messages(out) <= budget
    session = ctxfold.Session(budget=2400, strategy=strategy, counter=COUNTER)
    for m in msgs:
        session.add(m)
        if m.role == "tool":
            out = list(session.render().messages)
    note = next(m for m in out if is_note(m))
    assert "Unresolved: `python -m pytest tests/test_rates.py`" in note.text
