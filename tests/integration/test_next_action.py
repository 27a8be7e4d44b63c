"""The next-action benchmark (``benchmarks/next_action.py``): its measure on a
conversation whose answer is known, its extractor, and a run on the shared data (a
render of the default session shows what the agent's next call uses at least as
often as ``trim_messages``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import ctxfold
from ctxfold import Message, ToolCall
from tests.conftest import DATA_DIR, REPO, SKIP_NO_DATA

sys.path.insert(0, str(REPO / "benchmarks"))

import next_action

PATH = "src/app/core_utils.py"


def _call(name: str, args: dict, n: int) -> Message:
    return Message("assistant", "", tool_calls=(ToolCall(f"c{n}", name, json.dumps(args)),))


def _conversation() -> list[Message]:
    """The task names a path; the agent reads it (the path is in the newest message),
    runs a test file it has not seen, and edits the path after an unrelated message."""
    return [
        Message("system", "You are a coding agent."),
        Message("user", f"The parser crashes on empty input; the code is in {PATH}."),
        _call("read_file", {"path": PATH}, 1),
        Message("tool", "def parse(text):\n    return text.split()[0]", tool_call_id="c1"),
        _call("run", {"command": "python -m pytest tests/test_parse_empty.py -x"}, 2),
        Message("tool", "IndexError: list index out of range", tool_call_id="c2"),
        Message("user", "Keep going."),
        _call("edit", {"path": PATH, "old": "split()[0]", "line": 2}, 3),
        Message("tool", "edited", tool_call_id="c3"),
    ]


class Everything:
    """A render of the whole history."""

    def __init__(self, budget: int) -> None:
        self.history: list[Message] = []

    def turn(self, new: list[Message]) -> list[Message]:
        self.history += new
        return list(self.history)


class Newest(Everything):
    """A render of the system prompt and the newest message only."""

    def turn(self, new: list[Message]) -> list[Message]:
        return [super().turn(new)[0], self.history[-1]]


class Refused(Everything):
    def turn(self, new: list[Message]) -> list[Message]:
        raise ctxfold.BudgetError("over", required=10, budget=1)


def test_only_identifiers_the_history_showed_are_scored() -> None:
    calls = next_action.calls_to_score(_conversation())
    # the test file is new at its call: nothing to support, so that call scores nothing
    assert [(c.index, set(c.shown)) for c in calls] == [(2, {PATH}), (4, set()), (7, {PATH})]


def test_support_is_the_share_of_shown_identifiers_a_render_keeps() -> None:
    whole = next_action.support(_conversation(), Everything, 100)
    assert (whole.found, whole.scored, whole.calls, whole.share) == (2, 2, 2, 1.0)
    assert len(whole.times) == 3  # a render before every call, scored or not
    # the path is in the newest message at the read, in no message the render keeps
    # at the edit
    newest = next_action.support(_conversation(), Newest, 100)
    assert (newest.found, newest.scored, newest.share) == (1, 2, 0.5)
    refused = next_action.support(_conversation(), Refused, 100)
    assert refused.share == 0.0 and len(refused.errors) == 3


def test_the_extractor_finds_paths_names_flags_ids_and_patterns() -> None:
    command = 'grep -rn "def validate" src/pkg/schema.py --include=*.py | head -20 && cd /testbed'
    assert next_action.identifiers(json.dumps({"command": command}), frozenset({"bash"})) == {
        "def validate",
        "src/pkg/schema.py",
        "--include",
        "/testbed",
    }
    args = {"user_id": "mia_li_3668", "origin": "JFK", "date": "2024-05-20", "n": 2}
    assert next_action.identifiers(json.dumps(args)) == {"mia_li_3668", "JFK", "2024-05-20"}
    # common words, short numbers and the tool's own name are not identifiers
    plain = {"q": "find the file", "k": 12, "t": "bash"}
    assert next_action.identifiers(json.dumps(plain), frozenset({"bash"})) == set()


def test_identifiers_are_reported_by_kind() -> None:
    kinds = {
        i: next_action.kind_of(i).value
        for i in ("src/pkg/schema.py", "--include", "JFK", "870", "845,865p", "1.14", "Test 1: ok")
    }
    assert kinds == {
        "src/pkg/schema.py": "name",
        "--include": "name",
        "JFK": "name",
        "870": "number",
        "845,865p": "number",  # a line range, as sed takes it
        "1.14": "number",
        "Test 1: ok": "text",
    }
    # the newest message alone shows the path at the read, not at the edit: the path
    # (a name) is kept once of twice, and no other kind is scored
    newest = next_action.summarize([next_action.support(_conversation(), Newest, 100)])
    assert newest["by_kind"] == {
        "name": {"kept": 0.5, "n": 2},
        "number": {"kept": None, "n": 0},
        "text": {"kept": None, "n": 0},
    }


def test_it_skips_without_the_shared_data(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("CTXFOLD_DATA_DIR", str(tmp_path / "absent"))
    assert next_action.main([]) == 0
    assert "benchmark skipped" in capsys.readouterr().err


def test_the_default_session_supports_the_next_action_on_a_sample(tmp_path: Path) -> None:
    if DATA_DIR is None:
        pytest.skip(SKIP_NO_DATA)
    out = tmp_path / "out.json"
    argv = ["--datasets", "mini_swe_agent", "tau_airline", "--limit", "1", "--budgets", "4000"]
    assert next_action.main([*argv, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    agent = {m: report["support"][f"mini_swe_agent/4000/all/{m}"] for m in next_action.REPLAYED}
    assert agent["session"]["calls"] > 50 and agent["session"]["errors"] == []
    assert agent["session"]["calls"] == agent["trim_messages"]["calls"]
    assert agent["session"]["support"] >= agent["trim_messages"]["support"]
    assert agent["compress"]["support"] >= agent["trim_messages"]["support"]
    tools = report["tool_inputs"]
    assert tools["tau_airline/10%/all/compress"]["identifiers"] > 0
    kinds = tools["mini_swe_agent/10%/all/compress"]["by_kind"]
    assert (
        sum(k["n"] for k in kinds.values())
        == tools["mini_swe_agent/10%/all/compress"]["identifiers"]
    )
    assert (
        tools["mini_swe_agent/10%/all/compress"]["found"]
        >= (tools["mini_swe_agent/10%/all/trim_messages"]["found"])
    )
