"""The command reads OpenAI's and Anthropic's formats by their shape (or as
``--input-format`` says) and writes each back in its own format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import EXAMPLES
from ctxfold import from_anthropic, from_openai, get_counter, to_anthropic
from ctxfold.cli import main
from ctxfold.validity import turn_order_problems

SWE = next(p for p in EXAMPLES if p.name == "swe_agent_marshmallow.json")


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def anthropic_request(tmp_path: Path) -> tuple[Path, dict]:
    """The bundled SWE-agent run as an Anthropic request file."""
    record = json.loads(SWE.read_text(encoding="utf-8"))
    system, turns = to_anthropic(from_openai(record["messages"]))
    request = {"model": "claude-x", "max_tokens": 1024, "system": system, "messages": turns}
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    return path, request


def test_an_anthropic_request_file_is_read_as_one(capsys, anthropic_request):
    """The issue's case: such a file counted 0 tool calls, lost its system prompt and
    came out as a mix that from_anthropic rejected."""
    path, request = anthropic_request
    code, out, _ = run(capsys, "stats", path)
    calls = sum(
        1
        for t in request["messages"]
        for b in t["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    )
    tokens = get_counter("o200k_base").count_messages(
        from_anthropic(request["messages"], system=request["system"])
    )
    assert code == 0 and calls > 10
    row = next(line for line in out.splitlines() if line.startswith(str(path)))
    assert f" {calls} " in row and f" {tokens} " in row
    code, out, _err = run(capsys, "compress", path, "--budget", "25%")
    assert code == 0
    written = json.loads(out)
    assert written["model"] == "claude-x" and written["system"].startswith(request["system"])
    messages = from_anthropic(written["messages"], system=written["system"])
    assert not turn_order_problems(messages)
    assert written["messages"][-1] == request["messages"][-1]


def test_input_format_says_how_to_read(capsys, anthropic_request, tmp_path):
    _path, request = anthropic_request
    bare = tmp_path / "turns.json"
    bare.write_text(json.dumps(request["messages"]), encoding="utf-8")
    code, out, _ = run(capsys, "compress", bare, "--budget", "3000", "--input-format", "anthropic")
    assert code == 0 and all(m["role"] in ("user", "assistant") for m in json.loads(out))
    code, _, err = run(capsys, "compress", bare, "--budget", "3000", "--input-format", "openai")
    assert code == 2 and "invalid message" in err


def test_output_format_converts(capsys, anthropic_request):
    path, _ = anthropic_request
    code, out, _ = run(capsys, "compress", path, "--budget", "25%", "--format", "openai")
    assert code == 0
    written = json.loads(out)
    assert written["messages"][0]["role"] == "system" and "system" not in written
    assert any(m["role"] == "tool" for m in written["messages"])
    code, out, _ = run(capsys, "compress", SWE, "--budget", "25%", "--format", "anthropic")
    written = json.loads(out)
    assert code == 0 and written["system"] and written["messages"][0]["role"] == "user"


SESSION_LOG = Path(__file__).resolve().parents[2] / "examples" / "claude_code_session.jsonl"


@pytest.mark.parametrize("flag", [[], ["--input-format", "claude-code"]])
def test_a_session_log_is_compressed_into_an_anthropic_request(capsys, flag):
    code, out, err = run(capsys, "compress", SESSION_LOG, "--budget", "50%", *flag)
    assert code == 0 and "ctxfold:" not in err
    written = json.loads(out)
    messages = from_anthropic(written["messages"], system=written.get("system"))
    assert not turn_order_problems(messages)
    assert written["messages"][0]["content"].startswith("The test for paginate() fails")


def test_a_corrupt_line_of_a_session_log_is_named_and_reading_goes_on(capsys, tmp_path):
    lines = SESSION_LOG.read_text(encoding="utf-8").split("\n")
    lines.insert(5, '{"type": "assistant", "message": {"role": "assis')
    broken = tmp_path / "session.jsonl"
    broken.write_text("\n".join(lines), encoding="utf-8")
    code, out, err = run(capsys, "stats", broken)
    assert code == 0 and f"{broken}, line 6:" in err
    clean = run(capsys, "stats", SESSION_LOG)[1]
    assert out.split()[-7:] == clean.split()[-7:]  # the same counts: nothing else lost


def test_a_session_log_forced_as_another_format_is_refused(capsys):
    code, _, err = run(capsys, "stats", SESSION_LOG, "--input-format", "openai")
    assert code == 2 and "ctxfold:" in err
